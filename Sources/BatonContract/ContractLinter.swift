import BatonFlows
import BatonJSON

/// Checks every screen a flow or template can produce against the contract: components and
/// actions exist, their fields are the contract's, and the oldest supported client still gets
/// something on screen.
public struct ContractLinter: Sendable {
    public let registry: ContractRegistry

    public init(registry: ContractRegistry) {
        self.registry = registry
    }

    /// As a bundle check for ``FlowBundle/load(directory:catalog:extraChecks:)``.
    public var check: FlowBundleCheck {
        { bundle in self.lint(bundle) }
    }

    public func lint(_ bundle: FlowBundle) -> [Diagnostic] {
        var findings: [Diagnostic] = []
        let flows = bundle.flows.mapValues { Set($0.parameters.map(\.name)) }
        // Templates used by flow states may send that flow's events; the others stand alone.
        var usedByFlows = Set<String>()
        for flow in bundle.flows.values {
            for name in flow.stateOrder {
                guard case .screen(let screen) = flow.states[name]?.response else { continue }
                if let template = screen.templateName { usedByFlows.insert(template) }
                guard let inline = screen.inline else { continue }
                var context = Context(flows: flows, standalone: false)
                lintScreen(inline, origin: "state '\(name)' of flow '\(flow.name)'", fallbackLocation: screen.location, context: &context, into: &findings)
            }
        }
        for template in bundle.screens.values {
            var context = Context(flows: flows, standalone: !usedByFlows.contains(template.name))
            lintScreen(template.content, origin: "screen '\(template.name)'", fallbackLocation: template.location, context: &context, into: &findings)
        }
        return findings
    }

    struct Context {
        var flows: [String: Set<String>]
        /// A screen served on its own (GET /screens) has no session to send events to.
        var standalone: Bool
        var ids: [String: SourceLocation] = [:]
    }

    func lintScreen(
        _ screen: JSONTemplate, origin: String, fallbackLocation: SourceLocation, context: inout Context, into findings: inout [Diagnostic]
    ) {
        if let header = screen["header"] { lintComponent(header, context: &context, into: &findings) }
        if case .array(let sections)? = screen["sections"] {
            for section in sections {
                guard case .array(let components)? = section["components"] else {
                    findings.append(.error("a section needs components: [...]", at: section.location ?? fallbackLocation))
                    continue
                }
                if section["id"] == nil {
                    findings.append(.error("a section needs an id (done: { refresh: [ids] } refers to sections by id)", at: section.location ?? fallbackLocation))
                }
                for component in components { lintComponent(component, context: &context, into: &findings) }
            }
        }
        if case .array(let buttons)? = screen["secondaryButtons"] {
            for button in buttons {
                if let action = button["action"] { lintAction(action, context: context, into: &findings) } else {
                    findings.append(.error("a menu item needs an action", at: button.location ?? fallbackLocation))
                }
                if button["title"] == nil { findings.append(.error("a menu item needs a title", at: button.location ?? fallbackLocation)) }
            }
        }
        // What the oldest supported client would see.
        let fitter = ScreenFitter(registry: registry)
        let (fitted, _) = fitter.fitScreen(screen.sample(), for: .init(contract: registry.oldest, capabilities: []))
        let hasHeader = fitted["header"] != nil
        let hasComponents = !(fitted["sections"]?.arrayValue ?? []).isEmpty
        if !hasHeader, !hasComponents {
            findings.append(
                .error(
                    "\(origin) would render empty for contract version \(registry.oldest) (the oldest supported): every component is omitted; give the newer ones fallbacks",
                    at: screen.location ?? fallbackLocation))
        }
    }

    func lintComponent(_ component: JSONTemplate, context: inout Context, into findings: inout [Diagnostic]) {
        let location = component.location ?? SourceLocation(file: "?", line: 1, column: 1)
        guard case .object(let pairs, _, let each, _) = component else {
            findings.append(.error("a component must be a mapping with a type", at: location))
            return
        }
        guard let type = component["type"]?.literalText else {
            findings.append(.error("a component needs a literal type (one of the contract's components)", at: location))
            return
        }
        guard let spec = registry.components[type] else {
            let hint = Suggest.closest(type, in: registry.components.keys).map { "; did you mean '\($0)'?" } ?? ""
            findings.append(.error("'\(type)' is not a component in contract.yaml\(hint)", at: location))
            return
        }
        if let id = component["id"] {
            if let literal = id.literalText, each == nil {
                if let first = context.ids[literal] {
                    findings.append(.error("component id '\(literal)' is used twice in this screen (first at line \(first.line))", at: location))
                } else {
                    context.ids[literal] = location
                }
            }
        } else {
            findings.append(.error("component '\(type)' needs an id", at: location))
        }
        let implicit: Set<String> = ["type", "id", "fallback"]
        for (name, value) in pairs where !implicit.contains(name) {
            guard let field = spec.fields[name] else {
                let hint = Suggest.closest(name, in: spec.fields.keys).map { "; did you mean '\($0)'?" } ?? ""
                findings.append(.error("component '\(type)' has no field '\(name)'\(hint)", at: location))
                continue
            }
            switch field.type {
            case .action: lintAction(value, context: context, into: &findings)
            case .component: lintComponent(value, context: &context, into: &findings)
            case .components:
                if case .array(let children) = value {
                    for child in children { lintComponent(child, context: &context, into: &findings) }
                } else {
                    findings.append(.error("field '\(name)' of '\(type)' must be a list of components", at: location))
                }
            case .string, .url:
                if let literal = value.literalText, !field.values.isEmpty, !field.values.contains(literal) {
                    findings.append(.error("field '\(name)' of '\(type)' must be one of \(field.values.joined(separator: ", ")); found '\(literal)'", at: location))
                }
            default:
                break
            }
        }
        for (name, field) in spec.fields where field.required && component[name] == nil {
            findings.append(.error("component '\(type)' needs field '\(name)'", at: location))
        }
        if let inline = component["fallback"] {
            lintComponent(inline, context: &context, into: &findings)
        } else if spec.since > registry.oldest, case .omit = spec.fallback {
            findings.append(
                .warning(
                    "'\(type)' appeared in contract version \(spec.since) and has no fallback: clients on version \(registry.oldest) will not see it",
                    at: location))
        }
    }

    func lintAction(_ action: JSONTemplate, context: Context, into findings: inout [Diagnostic]) {
        let location = action.location ?? SourceLocation(file: "?", line: 1, column: 1)
        guard let type = action["type"]?.literalText else {
            findings.append(.error("an action needs a literal type (one of the contract's actions)", at: location))
            return
        }
        guard let spec = registry.actions[type] else {
            let hint = Suggest.closest(type, in: registry.actions.keys).map { "; did you mean '\($0)'?" } ?? ""
            findings.append(.error("'\(type)' is not an action in contract.yaml\(hint)", at: location))
            return
        }
        // Command and start actions are minted by Baton: templates name the event or flow.
        var expected = Set(spec.fields.keys)
        switch type {
        case "command": expected = ["event", "title"]
        case "startFlow": expected = ["flow", "params", "title"]
        default: break
        }
        guard case .object(let pairs, _, _, _) = action else { return }
        for (name, _) in pairs where name != "type" && !expected.contains(name) {
            findings.append(.error("action '\(type)' has no field '\(name)' here (it takes \(expected.sorted().joined(separator: ", ")))", at: location))
        }
        switch type {
        case "command":
            if action["event"] == nil {
                findings.append(.error("a command action names the flow event it sends: event: <name>", at: location))
            } else if context.standalone {
                findings.append(
                    .error("this screen is served on its own, outside any flow: a command has no session to go to (use startFlow)", at: location))
            }
        case "startFlow":
            guard let flow = action["flow"]?.literalText else {
                findings.append(.error("a startFlow action names the flow it starts: flow: <literal name>", at: location))
                break
            }
            guard let parameters = context.flows[flow] else {
                let hint = Suggest.closest(flow, in: context.flows.keys).map { "; did you mean '\($0)'?" } ?? ""
                findings.append(.error("startFlow: there is no flow '\(flow)'\(hint)", at: location))
                break
            }
            if case .object(let params, _, _, _)? = action["params"] {
                for (name, _) in params where !parameters.contains(name) {
                    findings.append(.error("startFlow: flow '\(flow)' declares no parameter '\(name)'", at: location))
                }
            }
        default:
            for (name, field) in spec.fields where field.required && action[name] == nil {
                findings.append(.error("action '\(type)' needs field '\(name)'", at: location))
            }
        }
    }
}
