import BatonContract
import BatonFlows
import Foundation
import Testing

@Suite("Contract lint")
struct ContractLintTests {
    /// Broken screens, linted against the repository's contract (Flows/contract.yaml).
    static let directory = ContractFixtures.root.appendingPathComponent("Tests/Fixtures/broken-contract")
    static let bundle = FlowBundle.load(
        directory: directory, catalog: FlowCatalog(), extraChecks: [ContractLinter(registry: ContractFixtures.registry).check])

    func found(_ file: String) -> [String] {
        Self.bundle.diagnostics.filter { $0.location.file.hasSuffix(file) }.map(\.description)
    }

    @Test("unknown components and fields, missing required fields, duplicate ids, bad values, bad actions")
    func components() {
        let lines = found("screens/bad-components.yaml")
        let expected = [
            "broken-contract/screens/bad-components.yaml:7:11: error: 'hologram' is not a component in contract.yaml",
            "broken-contract/screens/bad-components.yaml:8:11: error: component 'text' has no field 'txt'; did you mean 'text'?",
            "broken-contract/screens/bad-components.yaml:8:11: error: component 'text' needs field 'text'",
            "broken-contract/screens/bad-components.yaml:9:11: error: component 'button' needs field 'action'",
            "broken-contract/screens/bad-components.yaml:10:11: error: component id 't' is used twice in this screen (first at line 8)",
            "broken-contract/screens/bad-components.yaml:11:11: error: field 'style' of 'text' must be one of body, caption, title, headline; found 'shouting'",
            "broken-contract/screens/bad-components.yaml:15:19: error: this screen is served on its own, outside any flow: a command has no session to go to (use startFlow)",
            "broken-contract/screens/bad-components.yaml:19:19: error: startFlow: there is no flow 'nowhere'",
            "broken-contract/screens/bad-components.yaml:23:19: error: action 'openUrl' has no field 'link' here (it takes title, url)",
            "broken-contract/screens/bad-components.yaml:23:19: error: action 'openUrl' needs field 'url'",
        ]
        for line in expected { #expect(lines.contains(line), "missing \(line)\nfound:\n\(lines.joined(separator: "\n"))") }
        #expect(lines.count == expected.count, "\(lines.joined(separator: "\n"))")
    }

    @Test("a screen that renders empty for the oldest version is an error; a newer component without fallback a warning")
    func emptyForOldest() {
        #expect(found("screens/empty-for-v1.yaml") == [
            "broken-contract/screens/empty-for-v1.yaml:3:3: error: screen 'empty-for-v1' would render empty for contract version 1 (the oldest supported): every component is omitted; give the newer ones fallbacks",
            "broken-contract/screens/empty-for-v1.yaml:7:11: warning: 'badge' appeared in contract version 2 and has no fallback: clients on version 1 will not see it",
        ])
    }

    @Test("the contract file itself: fallbacks must be real, older components; bad field types; reserved field names")
    func contractFile() {
        let (_, diagnostics) = ContractLoader.load(
            source: """
                contract: { oldest: 1, newest: 2 }
                components:
                  a: { since: 1, fields: { x: strng } }
                  b: { since: 2, fields: { y: string }, fallback: { type: c, map: { x: y } } }
                  d: { since: 2, fields: { y: string } }
                  e: { since: 1, fields: { y: string }, fallback: { type: a } }
                  f: { since: 1, fields: { id: component, fallback: string } }
                actions:
                  go: { since: 1, fallback: stop }
                  stop: { since: 1, fields: { type: string } }
                """, file: "contract.yaml")
        let lines = diagnostics.map(\.description)
        #expect(lines.contains("contract.yaml:3:31: error: field 'x' has unknown type 'strng' (string, int, bool, url, action, component, components, object, list)"))
        #expect(lines.contains("contract.yaml:4:3: error: fallback of 'b' is 'c', which is not a component"))
        #expect(lines.contains("contract.yaml:5:3: warning: component 'd' is newer than the oldest supported contract (1) and has no fallback: older clients will not see it"))
        #expect(lines.contains("contract.yaml:6:3: error: fallback of 'e' (since 1) must be an older component; 'a' is since 1"))
        #expect(lines.contains { $0.contains("fallback of action 'go' must be an older action") })
        // Member names the pass writes itself cannot be fields.
        #expect(lines.contains { $0.hasPrefix("contract.yaml:7:") && $0.contains("error: field 'id' of") && $0.contains("is reserved") })
        #expect(lines.contains { $0.hasPrefix("contract.yaml:7:") && $0.contains("error: field 'fallback' of") })
        #expect(lines.contains { $0.hasPrefix("contract.yaml:10:") && $0.contains("error: field 'type' of") })
    }

    @Test("the repository's contract and Flows/ lint clean against each other")
    func repository() throws {
        let flows = ContractFixtures.root.appendingPathComponent("Flows")
        let (registry, diagnostics) = ContractLoader.load(directory: flows)
        #expect(diagnostics.filter { $0.severity == .error }.isEmpty, "\(diagnostics)")
        // Every screen and flow in Flows/ against the contract: the contract linter's own findings
        // only (with an empty catalog, the bundle itself reports the effects it does not know).
        let bundle = FlowBundle.load(directory: flows, catalog: FlowCatalog())
        #expect(bundle.flows.count >= 5 && !bundle.screens.isEmpty, "the repository's flows and screens were read")
        let found = ContractLinter(registry: try #require(registry)).lint(bundle)
        #expect(found.isEmpty, "\(found.map(\.description).joined(separator: "\n"))")
    }
}
