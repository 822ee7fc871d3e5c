#!/usr/bin/env python3
"""Prepares distinct first-time commands for the command benchmark.

For each of --count fresh users it mints a development bearer token (HS256, the secret the
server runs with), fetches the playlist screen as that user and keeps the signed payload of
its "Add playlist to favourites" action. Each line of the output is "<token> <payload>":
one command wrk may send once (a second send would be a cheap idempotent replay, and the
subject's other start payloads go stale after its first command, so one per user).
"""
import argparse
import base64
import concurrent.futures
import hashlib
import hmac
import json
import sys
import time
import urllib.request


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token(subject: str, secret: str) -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = b64url(json.dumps({"sub": subject, "exp": int(time.time()) + 3 * 3600}).encode())
    signature = hmac.new(secret.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
    return f"{header}.{claims}.{b64url(signature)}"


def mint(base: str, playlist: str, subject: str, secret: str) -> str:
    bearer = token(subject, secret)
    request = urllib.request.Request(
        f"{base}/v3/screens/playlist?id={playlist}",
        headers={"Authorization": f"Bearer {bearer}", "X-Client-Platform": "ios"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        screen = json.load(response)
    for item in screen.get("secondaryButtons", []):
        if item.get("title") == "Add playlist to favourites":
            return f"{bearer} {item['action']['payload']}"
    raise RuntimeError(f"no favourite action for {subject}: {screen.get('secondaryButtons')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--base", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--prefix", required=True, help="user ids are <prefix>-<n>")
    parser.add_argument("--playlist", default="11111111-0000-4000-8000-000000000001")
    parser.add_argument("--secret", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        lines = pool.map(lambda n: mint(args.base, args.playlist, f"{args.prefix}-{n}", args.secret), range(args.count))
        with open(args.out, "w") as out:
            for done, line in enumerate(lines, 1):
                out.write(line + "\n")
                if done % 10000 == 0:
                    print(f"  minted {done}/{args.count}", file=sys.stderr)
    print(f"  minted {args.count} commands in {time.time() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
