import BatonFlows
import BatonJSON
import Foundation

/// Loads `Flows/contract.yaml`, reporting every problem with its position.
public enum ContractLoader {
    static let topKeys: Set<String> = ["contract", "components", "actions"]
    static let versionKeys: Set<String> = ["oldest", "newest"]
    static let componentKeys: Set<String> = ["since", "capabilities", "fields", "children", "fallback", "description"]
    static let actionKeys: Set<String> = ["since", "capabilities", "fields", "fallback", "description"]
    static let fallbackKeys: Set<String> = ["type", "map", "set"]
    /// Member names every component or action has (or may have) whatever its fields: a
    /// field cannot take one (the downgrade pass writes them itself).
    static let reservedFields: Set<String> = ["type", "id", "fallback"]

    public static func load(source: String, file: String) -> (ContractRegistry?, [Diagnostic]) {
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic): return (nil, [diagnostic])
        case .success(let root):
            var reader = ContractReader(file: file)
            return (reader.registry(root), reader.diagnostics)
        }
    }

    /// Loads `<directory>/contract.yaml` (diagnostic paths relative to the directory's parent).
    public static func load(directory: URL) -> (ContractRegistry?, [Diagnostic]) {
        let file = directory.appendingPathComponent("contract.yaml")
        let display = directory.lastPathComponent + "/contract.yaml"
        guard let source = try? String(contentsOf: file, encoding: .utf8) else {
            return (nil, [.error("contract.yaml is missing or unreadable", at: SourceLocation(file: display, line: 1, column: 1))])
        }
        return load(source: source, file: display)
    }
}

struct ContractReader: ShapeReader {
    let file: String
    var diagnostics: [Diagnostic] = []

    mutating func error(_ message: String, _ location: SourceLocation) { diagnostics.append(.error(message, at: location)) }

    /// A mapping that may be absent (then empty).
    mutating func mapping(_ node: SourceNode?, allowed: Set<String>?, what: String) -> [(key: SourceScalar, value: SourceNode)] {
        guard let node else { return [] }
        return pairs(node, allowed: allowed, what: what)
    }

    mutating func int(_ node: SourceNode?, _ what: String) -> Int? {
        guard let node else { return nil }
        guard case .scalar(let scalar) = node, let value = Int(scalar.text), value >= 1 else {
            error("\(what) must be a whole number ≥ 1", node.location)
            return nil
        }
        return value
    }

    mutating func strings(_ node: SourceNode?, _ what: String) -> [String] {
        guard let node else { return [] }
        switch node {
        case .scalar(let scalar): return [scalar.text]
        case .sequence(let items, _):
            return items.compactMap {
                if case .scalar(let scalar) = $0 { return scalar.text }
                error("\(what) must be a list of names", $0.location)
                return nil
            }
        case .mapping:
            error("\(what) must be a list of names", node.location)
            return []
        }
    }

    mutating func fields(_ node: SourceNode?, what: String) -> [String: FieldSpec] {
        var fields: [String: FieldSpec] = [:]
        for (key, value) in mapping(node, allowed: nil, what: "fields of \(what)") {
            guard !ContractLoader.reservedFields.contains(key.text) else {
                error("field '\(key.text)' of \(what) is reserved: every component and action has a type, every component an id, and any may carry an inline fallback", key.location)
                continue
            }
            // `name: string`, `name: string!` (required), or `name: { type, required, values }`.
            switch value {
            case .scalar(let scalar):
                var text = scalar.text
                let required = text.hasSuffix("!")
                if required { text.removeLast() }
                guard let type = FieldType(rawValue: text) else {
                    error("field '\(key.text)' has unknown type '\(text)' (\(FieldType.allCases.map(\.rawValue).joined(separator: ", ")))", scalar.location)
                    continue
                }
                fields[key.text] = FieldSpec(type, required: required)
            default:
                let pairs = mapping(value, allowed: ["type", "required", "values"], what: "field '\(key.text)'")
                _ = pairs
                guard case .scalar(let typeText)? = value["type"], let type = FieldType(rawValue: typeText.text) else {
                    error("field '\(key.text)' needs a type (\(FieldType.allCases.map(\.rawValue).joined(separator: ", ")))", value.location)
                    continue
                }
                var required = false
                if case .scalar(let flag)? = value["required"] { required = flag.text == "true" }
                fields[key.text] = FieldSpec(type, required: required, values: strings(value["values"], "values"))
            }
        }
        return fields
    }

    mutating func registry(_ root: SourceNode) -> ContractRegistry? {
        _ = mapping(root, allowed: ContractLoader.topKeys, what: "contract.yaml")
        _ = mapping(root["contract"], allowed: ContractLoader.versionKeys, what: "contract")
        guard let oldest = int(root["contract"]?["oldest"], "contract.oldest"),
            let newest = int(root["contract"]?["newest"], "contract.newest")
        else {
            if root["contract"] == nil { error("missing 'contract: { oldest, newest }'", root.location) }
            return nil
        }
        if oldest > newest { error("contract.oldest (\(oldest)) is newer than contract.newest (\(newest))", root["contract"]!.location) }

        var components: [String: ComponentSpec] = [:]
        var componentLocations: [String: SourceLocation] = [:]
        for (key, value) in mapping(root["components"], allowed: nil, what: "components") {
            _ = mapping(value, allowed: ContractLoader.componentKeys, what: "component '\(key.text)'")
            guard let since = int(value["since"], "since of '\(key.text)'") else {
                if value["since"] == nil { error("component '\(key.text)' needs since: <version>", key.location) }
                continue
            }
            var fallback = Fallback.omit
            if let fallbackNode = value["fallback"] {
                if case .scalar(let scalar) = fallbackNode {
                    if scalar.text != "omit" { error("fallback is 'omit' or { type, map, set }", scalar.location) }
                } else {
                    _ = mapping(fallbackNode, allowed: ContractLoader.fallbackKeys, what: "fallback of '\(key.text)'")
                    if case .scalar(let type)? = fallbackNode["type"] {
                        var map: [String: String] = [:]
                        for (field, source) in mapping(fallbackNode["map"], allowed: nil, what: "map") {
                            if case .scalar(let sourceField) = source { map[field.text] = sourceField.text }
                        }
                        var set = JSONObject()
                        for (field, constant) in mapping(fallbackNode["set"], allowed: nil, what: "set") { set[field.text] = constant.jsonValue }
                        fallback = .component(type: type.text, map: map, set: set)
                    } else {
                        error("a fallback component needs a type", fallbackNode.location)
                    }
                }
            } else if since > oldest {
                diagnostics.append(
                    .warning(
                        "component '\(key.text)' is newer than the oldest supported contract (\(oldest)) and has no fallback: older clients will not see it",
                        at: key.location))
            }
            var childrenField: String?
            if case .scalar(let children)? = value["children"] { childrenField = children.text }
            let spec = ComponentSpec(
                name: key.text, since: since, capabilities: strings(value["capabilities"], "capabilities"),
                fields: fields(value["fields"], what: "'\(key.text)'"), childrenField: childrenField, fallback: fallback,
                description: value["description"].flatMap { if case .scalar(let s) = $0 { s.text } else { nil } })
            if let childrenField, spec.fields[childrenField]?.type != .components {
                error("'\(key.text)' keeps its children in '\(childrenField)', which must be a field of type components", key.location)
            }
            components[key.text] = spec
            componentLocations[key.text] = key.location
        }

        var actions: [String: ActionSpec] = [:]
        for (key, value) in mapping(root["actions"], allowed: nil, what: "actions") {
            _ = mapping(value, allowed: ContractLoader.actionKeys, what: "action '\(key.text)'")
            guard let since = int(value["since"], "since of '\(key.text)'") else {
                if value["since"] == nil { error("action '\(key.text)' needs since: <version>", key.location) }
                continue
            }
            var fallback: String?
            if case .scalar(let text)? = value["fallback"], text.text != "omit" { fallback = text.text }
            actions[key.text] = ActionSpec(
                name: key.text, since: since, capabilities: strings(value["capabilities"], "capabilities"),
                fields: fields(value["fields"], what: "action '\(key.text)'"), fallback: fallback,
                description: value["description"].flatMap { if case .scalar(let s) = $0 { s.text } else { nil } })
        }

        // Fallbacks must lead somewhere real and older, so every chain ends.
        for (name, spec) in components {
            if case .component(let type, let map, _) = spec.fallback {
                guard let target = components[type] else {
                    error("fallback of '\(name)' is '\(type)', which is not a component", componentLocations[name]!)
                    continue
                }
                if target.since >= spec.since {
                    error("fallback of '\(name)' (since \(spec.since)) must be an older component; '\(type)' is since \(target.since)", componentLocations[name]!)
                }
                for (field, source) in map where target.fields[field] == nil || spec.fields[source] == nil {
                    error("fallback of '\(name)' maps '\(source)' to '\(type).\(field)', but one of them is not a field", componentLocations[name]!)
                }
            }
        }
        for (name, spec) in actions {
            if let fallback = spec.fallback {
                guard let target = actions[fallback], target.since < spec.since else {
                    error("fallback of action '\(name)' must be an older action; '\(fallback)' is not", root["actions"]![name]!.location)
                    continue
                }
            }
        }
        return ContractRegistry(oldest: oldest, newest: newest, components: components, actions: actions)
    }
}
