import BatonFlows

extension DeepLinkAllowlist {
    /// Checks the entries against what the rest of Baton defines, which this module cannot see:
    /// `knownFlows` and `knownScreens` map each name to the parameter names it declares. Reports
    /// targets that do not exist and parameters they do not declare.
    public func lint(knownFlows: [String: Set<String>], knownScreens: [String: Set<String>]) -> [Diagnostic] {
        var diagnostics: [Diagnostic] = []
        for entry in entries {
            let (kind, known): (String, [String: Set<String>]) =
                switch entry.target {
                case .flow: ("flow", knownFlows)
                case .screen: ("screen", knownScreens)
                }
            let name = entry.target.name
            guard let declared = known[name] else {
                let hint = Suggest.closest(name, in: known.keys).map { "; did you mean '\($0)'?" } ?? ""
                diagnostics.append(.error("entry '\(entry.name)' leads to \(kind) '\(name)', which does not exist\(hint)", at: entry.targetLocation))
                continue
            }
            for mapping in entry.parameterMap where !declared.contains(mapping.targetParameter) {
                let hint = Suggest.closest(mapping.targetParameter, in: declared).map { "; did you mean '\($0)'?" }
                    ?? (declared.isEmpty ? "; it declares none" : "; it declares \(declared.sorted().joined(separator: ", "))")
                diagnostics.append(
                    .error(
                        "entry '\(entry.name)' passes '\(mapping.targetParameter)' to \(kind) '\(name)', which has no such parameter\(hint)",
                        at: mapping.location))
            }
        }
        return diagnostics.ordered
    }
}
