/// Reading YAML sources into typed values with `file:line:col` errors: the shape checks every
/// loader in Baton shares (flows, the contract, the deep-link allowlist), so the same mistake
/// gets the same message in every file.
public protocol ShapeReader {
    /// Records an error at `location`.
    mutating func error(_ message: String, _ location: SourceLocation)
}

extension ShapeReader {
    /// The pairs of a mapping; unknown keys are errors (with a suggestion) unless `allowed` is nil.
    public mutating func pairs(_ node: SourceNode, allowed: Set<String>?, what: String) -> [(key: SourceScalar, value: SourceNode)] {
        guard case .mapping(let pairs, _) = node else {
            error("\(what) must be a mapping, found \(node.kindDescription)", node.location)
            return []
        }
        if let allowed {
            for (key, _) in pairs where !allowed.contains(key.text) {
                let suggestion = Suggest.closest(key.text, in: allowed).map { "; did you mean '\($0)'?" } ?? ""
                error("unknown key '\(key.text)' in \(what)\(suggestion)", key.location)
            }
        }
        return pairs
    }

    /// A scalar; nil (and no error) when the node is absent.
    public mutating func text(_ node: SourceNode?, _ what: String) -> SourceScalar? {
        guard let node else { return nil }
        guard case .scalar(let scalar) = node else {
            error("\(what) must be text, found \(node.kindDescription)", node.location)
            return nil
        }
        return scalar
    }

    /// `true` or `false`.
    public mutating func bool(_ node: SourceNode?, _ what: String) -> Bool? {
        guard let scalar = text(node, what) else { return nil }
        switch scalar.text {
        case "true": return true
        case "false": return false
        default:
            error("\(what) must be true or false, found '\(scalar.text)'", scalar.location)
            return nil
        }
    }

    /// A whole number of at least `minimum`.
    public mutating func int(_ node: SourceNode?, _ what: String, minimum: Int = 0) -> Int? {
        guard let scalar = text(node, what) else { return nil }
        guard let value = Int(scalar.text), value >= minimum else {
            error("\(what) must be a whole number ≥ \(minimum), found '\(scalar.text)'", scalar.location)
            return nil
        }
        return value
    }
}
