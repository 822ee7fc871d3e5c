import Foundation
import BatonFlows
import BatonJSON

extension DeepLinkAllowlist {
    /// Checks the flows against the allowlist and the allowlist against the flows: every link
    /// targets a flow or screen that exists with parameters it declares, and every literal
    /// `openUrl` target in a screen passes the outbound rules.
    public var bundleCheck: FlowBundleCheck {
        { bundle in
            var findings = lint(
                knownFlows: bundle.flows.mapValues { Set($0.parameters.map(\.name)) },
                knownScreens: bundle.screens.mapValues { Set($0.parameters.map(\.name)) })
            var templates: [JSONTemplate] = bundle.screens.values.map(\.content)
            for flow in bundle.flows.values {
                for state in flow.states.values {
                    if case .screen(let screen) = state.response, let inline = screen.inline { templates.append(inline) }
                }
            }
            for template in templates { findings += outboundFindings(template) }
            for entry in entries {
                guard case .flow(let name) = entry.target, let flow = bundle.flows[name],
                    let effect = flow.effectsBeforeFirstAnswer.first
                else { continue }
                findings.append(
                    .error(
                        "entry '\(entry.name)' opens flow '\(name)', which runs effect '\(effect.name)' (\(effect.location)) before the "
                            + "user's first answer; links are retried and opened twice, so a deep-linked flow must answer first "
                            + "(a screen or an input) and change data only on the user's tap",
                        at: entry.targetLocation))
            }
            return findings
        }
    }

    private func outboundFindings(_ template: JSONTemplate) -> [Diagnostic] {
        var findings: [Diagnostic] = []
        func walk(_ node: JSONTemplate) {
            switch node {
            case .array(let items): items.forEach(walk)
            case .object(let pairs, _, _, let location):
                if node["type"]?.literalText == "openUrl", let url = node["url"]?.literalText {
                    if case .blocked(let reason, let detail) = outbound(url) {
                        findings.append(
                            .error(
                                "openUrl target '\(url.prefix(120))' is not allowed by the outbound rules of deeplinks.yaml (\(reason.label): \(detail))",
                                at: location ?? SourceLocation(file: "?", line: 1, column: 1)))
                    }
                }
                pairs.forEach { walk($0.1) }
            default:
                break
            }
        }
        walk(template)
        return findings
    }

    /// Loads `<directory>/deeplinks.yaml` (paths relative to the directory's parent).
    public static func load(directory: URL) -> (DeepLinkAllowlist?, [Diagnostic]) {
        let display = directory.lastPathComponent + "/deeplinks.yaml"
        guard let source = try? String(contentsOf: directory.appendingPathComponent("deeplinks.yaml"), encoding: .utf8) else {
            return (nil, [.error("deeplinks.yaml is missing or unreadable", at: SourceLocation(file: display, line: 1, column: 1))])
        }
        return load(source: source, file: display)
    }
}
