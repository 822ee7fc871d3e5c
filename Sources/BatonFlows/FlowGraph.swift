import Foundation

/// Draws a flow as a graph: states, transitions labelled with their event, guard and effect
/// outcome, and the terminal states. Mermaid for Markdown, DOT for Graphviz.
public enum FlowGraph {
    /// One arrow.
    public struct Edge: Sendable, Hashable {
        public var from: String
        public var to: String
        public var label: String
    }

    public enum Format: String, Sendable, CaseIterable { case mermaid, dot }

    /// Every transition of the flow as an edge (errors that stay in place are self-loops).
    public static func edges(of flow: FlowDefinition) -> [Edge] {
        var edges: [Edge] = []
        func add(_ from: String, _ target: Target?, _ label: [String]) {
            guard let target else { return }
            let text = label.filter { !$0.isEmpty }.joined(separator: " ")
            switch target {
            case .state(let name, _): edges.append(Edge(from: from, to: name, label: text))
            case .stay: edges.append(Edge(from: from, to: from, label: (text + " ✗").trimmingCharacters(in: [" "])))
            }
        }
        func walk(_ transition: Transition, from: String, label: [String]) {
            var label = label
            if let guardCall = transition.guardCall {
                add(from, transition.guardElse ?? .stay(error: .literal(""), transition.location), label + ["[not \(guardCall.name)]"])
                label.append("[\(guardCall.name)]")
            }
            if let match = transition.match {
                let subject = match.references.first.map { $0.joined(separator: ".") } ?? "value"
                for (value, sub) in transition.cases { walk(sub, from: from, label: label + ["\(subject)=\(value)"]) }
                if let otherwise = transition.otherwise { walk(otherwise.value, from: from, label: label + ["\(subject)=other"]) }
                return
            }
            if let call = transition.call {
                for outcome in transition.outcomes {
                    add(from, outcome.target, label + ["/ \(call.method) \(call.service) → \(outcome.outcome)"])
                }
                add(from, transition.to, label + ["/ \(call.method) \(call.service)"])
                return
            }
            if let effect = transition.effect {
                for outcome in transition.outcomes {
                    add(from, outcome.target, label + ["/ \(effect.name) → \(outcome.outcome)"])
                }
                add(from, transition.to, label + ["/ \(effect.name)"])
                return
            }
            add(from, transition.to, label)
        }
        for name in flow.stateOrder {
            guard let state = flow.states[name] else { continue }
            if case .action(let transition) = state.response { walk(transition, from: name, label: []) }
            for event in state.handlerOrder { walk(state.handlers[event]!, from: name, label: [event]) }
        }
        return edges
    }

    public static func render(_ flow: FlowDefinition, format: Format) -> String {
        switch format {
        case .mermaid: return mermaid(flow)
        case .dot: return dot(flow)
        }
    }

    static func kind(_ state: FlowState) -> String {
        switch state.response {
        case .input(let input): return "input (\(input.kind.rawValue))"
        case .screen(let screen): return "screen (\(screen.presentation.rawValue))"
        case .done: return "done"
        case .refresh: return "refresh"
        case .error: return "error"
        case .action: return "action"
        }
    }

    static func mermaidID(_ name: String) -> String { "s_" + name.replacingOccurrences(of: "-", with: "_") }

    static func mermaidText(_ text: String) -> String {
        text.replacingOccurrences(of: "\"", with: "'").replacingOccurrences(of: ":", with: "∶")
    }

    public static func mermaid(_ flow: FlowDefinition) -> String {
        var lines = ["stateDiagram-v2"]
        for name in flow.stateOrder {
            guard let state = flow.states[name] else { continue }
            lines.append("    state \"\(name) · \(kind(state))\" as \(mermaidID(name))")
        }
        lines.append("    [*] --> \(mermaidID(flow.start))")
        for edge in edges(of: flow) {
            let label = edge.label.isEmpty ? "" : ": \(mermaidText(edge.label))"
            lines.append("    \(mermaidID(edge.from)) --> \(mermaidID(edge.to))\(label)")
        }
        for name in flow.stateOrder {
            guard let state = flow.states[name], state.isTerminal else { continue }
            lines.append("    \(mermaidID(name)) --> [*]: \(state.sessionResult.rawValue)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func dotText(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }

    public static func dot(_ flow: FlowDefinition) -> String {
        var lines = ["digraph \"\(dotText(flow.name))\" {", "    rankdir=LR;", "    node [shape=box, style=rounded, fontname=\"Helvetica\"];",
            "    __start [shape=point, label=\"\"];"]
        for name in flow.stateOrder {
            guard let state = flow.states[name] else { continue }
            var attributes = ["label=\"\(dotText(name))\\n\(dotText(kind(state)))\""]
            if state.isTerminal { attributes.append("peripheries=2") }
            if case .action = state.response { attributes.append("shape=diamond") }
            lines.append("    \"\(dotText(name))\" [\(attributes.joined(separator: ", "))];")
        }
        lines.append("    __start -> \"\(dotText(flow.start))\";")
        for edge in edges(of: flow) {
            lines.append("    \"\(dotText(edge.from))\" -> \"\(dotText(edge.to))\" [label=\"\(dotText(edge.label))\"];")
        }
        lines.append("}")
        return lines.joined(separator: "\n") + "\n"
    }
}
