#!/usr/bin/env python3
"""Validates flow files against Flows/schema/flow.schema.json.

Usage: validate_flows_schema.py SCHEMA FILE...

Reads YAML the way Baton does (YAML 1.2 core schema: only true/false are booleans, so
`on:` stays a key), and prints `file: path: message` per problem. Exit 1 on any.
"""
import json
import re
import sys

import jsonschema
import yaml


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML speaks YAML 1.1, where on/off/yes/no are booleans; Baton's YAML is 1.2."""


Yaml12Loader.yaml_implicit_resolvers = {
    key: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def main() -> int:
    schema = json.load(open(sys.argv[1], encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    problems = 0
    for path in sys.argv[2:]:
        document = yaml.load(open(path, encoding="utf-8"), Loader=Yaml12Loader)
        for error in sorted(validator.iter_errors(document), key=lambda e: list(e.path)):
            problems += 1
            where = "/".join(str(p) for p in error.path) or "(top)"
            print(f"{path}: {where}: {error.message}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
