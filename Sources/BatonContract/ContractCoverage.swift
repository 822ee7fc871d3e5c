import BatonFlows
import BatonJSON

extension ContractRegistry {
    /// Every device capability a component or action of the contract needs.
    public var allCapabilities: Set<String> {
        Set(components.values.flatMap(\.capabilities) + actions.values.flatMap(\.capabilities))
    }
}

extension ContractLinter {
    /// What the current flows and screens would not show as designed to `client`: for each
    /// screen a flow state or template draws, the fallbacks and omissions the downgrade pass
    /// would apply (to a sample rendering, `when:` components included). Empty: everything
    /// renders fully.
    public func shortfalls(_ bundle: FlowBundle, for client: ScreenFitter.Client) -> [String] {
        var screens: [(origin: String, template: JSONTemplate)] = []
        for flow in bundle.flows.values.sorted(by: { $0.name < $1.name }) {
            for name in flow.stateOrder {
                guard case .screen(let screen) = flow.states[name]?.response, let inline = screen.inline else { continue }
                screens.append(("flow '\(flow.name)' state '\(name)'", inline))
            }
        }
        for template in bundle.screens.values.sorted(by: { $0.name < $1.name }) {
            screens.append(("screen '\(template.name)'", template.content))
        }
        let fitter = ScreenFitter(registry: registry)
        return screens.compactMap { origin, template in
            let (_, report) = fitter.fitScreen(template.sample(), for: client)
            let changes =
                report.fallbacks.keys.map { "\($0.component) → \($0.fallback)" }.sorted()
                + report.omissions.keys.map { "\($0.component) omitted (\($0.reason.rawValue))" }.sorted()
            return changes.isEmpty ? nil : "\(origin): \(changes.joined(separator: ", "))"
        }
    }
}
