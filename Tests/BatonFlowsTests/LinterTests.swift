import BatonFlows
import Foundation
import Testing

@Suite("Linter diagnostics on purpose-broken flows")
struct LinterTests {
    static let bundle = FlowBundle.load(
        directory: Fixtures.root.appendingPathComponent("Tests/Fixtures/broken"), catalog: Fixtures.catalog)

    func diagnostics(_ file: String) -> [String] {
        Self.bundle.diagnostics.filter { $0.location.file == "broken/\(file)" }.map(\.description)
    }

    func expect(_ file: String, _ expected: [String], sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        let found = diagnostics(file)
        for line in expected where !found.contains(line) {
            Issue.record("missing: \(line)\nfound:\n\(found.joined(separator: "\n"))", sourceLocation: sourceLocation)
        }
        for line in found where !expected.contains(line) {
            Issue.record("unexpected: \(line)", sourceLocation: sourceLocation)
        }
    }

    @Test("YAML syntax errors point at the problem, and at where it began")
    func syntax() {
        // An unclosed quote is found at the end of the file; the quote opened at 5:22.
        #expect(diagnostics("syntax.yaml") == [
            "broken/syntax.yaml:6:1: error: YAML syntax: found unexpected end of stream while scanning a quoted scalar (from line 5, column 22)"
        ])
    }

    @Test("schema: unknown keys with suggestions, bad values, conflicting answers")
    func schema() {
        expect("schema.yaml", [
            "broken/schema.yaml:2:7: error: auth must be user, device or any; found 'everyone'",
            "broken/schema.yaml:3:6: error: ttl must look like 30s, 15m, 2h or 1d; found '15 minutes'",
            "broken/schema.yaml:9:13: error: input kind must be text or choice; found 'txt'",
            "broken/schema.yaml:10:7: error: unknown key 'maxLenght' in input; did you mean 'maxLength'?",
            "broken/schema.yaml:11:18: error: minLength must be a whole number ≥ 0, found 'many'",
            "broken/schema.yaml:15:3: error: state 'done' answers in more than one way (done, refresh); choose one",
        ])
    }

    @Test("unknown states, with suggestions; an unknown start state")
    func unknownState() {
        expect("unknown-state.yaml", [
            "broken/unknown-state.yaml:1:7: error: start state 'begin' does not exist",
            "broken/unknown-state.yaml:7:15: error: unknown state 'finishd'; did you mean 'finished'?",
            "broken/unknown-state.yaml:8:21: error: unknown state 'gone'",
        ])
    }

    @Test("unreachable states")
    func unreachable() {
        expect("unreachable.yaml", [
            "broken/unreachable.yaml:11:3: error: state 'orphan' is unreachable from the start state 'ask'"
        ])
    }

    @Test("dead ends, emitted events without handlers, handlers nothing sends")
    func deadEnds() {
        expect("dead-end.yaml", [
            "broken/dead-end.yaml:4:3: error: state 'look' is a dead end: it does not end the flow and offers no action that leaves it",
            "broken/dead-end.yaml:12:16: warning: no action of state 'look' sends event 'confirm' (it sends no events)",
            "broken/dead-end.yaml:13:3: error: state 'ask' sends event 'submit' but has no handler for it (add on: submit: …)",
            "broken/dead-end.yaml:13:3: error: state 'ask' is unreachable from the start state 'look'",
            "broken/dead-end.yaml:16:15: warning: no action of state 'ask' sends event 'cancel' (it sends 'submit')",
            "broken/dead-end.yaml:20:14: warning: state 'bye' ends the flow, so its handler for 'again' never runs",
        ])
    }

    @Test("unknown effects, guards and loaders; wrong arguments; unknown and unhandled outcomes")
    func calls() {
        expect("calls.yaml", [
            "broken/calls.yaml:6:23: error: unknown loader 'things.al'",
            "broken/calls.yaml:10:24: error: unknown guard 'things.allowed'",
            "broken/calls.yaml:11:13: error: effect 'notes.create' needs argument 'text'",
            "broken/calls.yaml:11:13: error: outcome 'duplicate' of effect 'notes.create' is not handled (add it to outcomes, or add to: <state> for the rest)",
            "broken/calls.yaml:12:17: error: effect 'notes.create' has no argument 'txt'; did you mean 'text'?",
            "broken/calls.yaml:12:40: error: argument 'folder' of 'notes.create' must be string",
            "broken/calls.yaml:15:11: error: effect 'notes.create' has no outcome 'exploded' (it returns created, duplicate)",
            "broken/calls.yaml:17:13: error: unknown effect 'notes.creat'; did you mean 'notes.create'?",
        ])
    }

    @Test("references to names that do not exist")
    func references() {
        expect("references.yaml", [
            "broken/references.yaml:8:14: error: '{{user.name}}' refers to 'user', which does not exist (use one of data, error, index, input, inputs, item, params, result, subject)",
            "broken/references.yaml:8:14: error: '{{params.foldr}}': the flow declares no parameter 'foldr'; did you mean 'folder'?",
            "broken/references.yaml:9:16: error: '{{data.things}}': this state loads no 'things' (declare it under load:)",
            "broken/references.yaml:9:16: error: '{{item.id}}' is only defined inside each: or optionsFrom",
            "broken/references.yaml:10:20: error: '{{inputs.nowhere.text}}': there is no state 'nowhere' whose input it could be",
        ])
    }

    @Test("YAML features Baton refuses: anchors and aliases, duplicate keys")
    func yamlRules() {
        #expect(diagnostics("anchors.yaml") == [
            "broken/anchors.yaml:5:11: error: YAML anchors (&name) are not supported in Baton files; repeat the value instead"
        ])
        #expect(diagnostics("duplicate-keys.yaml") == [
            "broken/duplicate-keys.yaml:4:3: error: duplicate key 'a' in one mapping (YAML keys must be unique)"
        ])
    }

    @Test("every broken fixture produces at least one error, and lint output is sorted file:line:col")
    func everyFileFails() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.root.appendingPathComponent("Tests/Fixtures/broken").path)
            .filter { $0.hasSuffix(".yaml") }
        for file in files {
            #expect(diagnostics(file).contains { $0.contains(": error: ") }, "\(file) lints clean")
        }
        let locations = Self.bundle.diagnostics.map(\.location)
        #expect(locations == locations.sorted())
    }

    @Test("action states that lead only back to each other are an error: no outcome leaves, so every command is refused at run time")
    func closedActionLoop() {
        let catalog = FlowCatalog(
            effects: [CallSignature(name: "marks.add", outcomes: ["added", "already"])], guards: [CallSignature(name: "marks.allowed")])
        func lint(_ yaml: String) -> [Diagnostic] {
            let (flow, loading) = FlowLoader.load(source: yaml, file: "loop.yaml")
            #expect(loading.isEmpty, "\(loading)")
            return flow.map { FlowLinter(catalog: catalog).lint($0).ordered } ?? []
        }
        // Two action states, `a` (its body given) and `b`, which goes back to `a` whatever happens.
        func loop(_ a: String, more: String = "") -> [Diagnostic] {
            lint(
                """
                flow: loop
                start: a
                states:
                  a:
                \(a)
                  b:
                    do: marks.add
                    outcomes: { added: a, already: a }
                \(more)
                """)
        }
        let closed = loop("    do: marks.add\n    outcomes: { added: b, already: b }")
        #expect(closed.map(\.description) == [
            "loop.yaml:4:3: error: action states 'a' → 'b' → 'a' form a loop with no answer between them and no way out: no outcome, case or guard's else leads to another state, so every command that enters is refused after \(FlowEngine.maxHops) action states; give one of them a way to another state"
        ])
        // A guard without `else` is no way out: refused, it would stay in an action state, which
        // has nothing to answer with.
        let guarded = loop("    guard: marks.allowed\n    do: marks.add\n    outcomes: { added: b, already: b }")
        #expect(guarded.contains { $0.severity == .error && $0.message.contains("no way out") }, "\(guarded)")
        // One outcome that leaves makes it a loop that may end: a warning, as before.
        let open = loop("    do: marks.add\n    outcomes: { added: b, already: done }", more: "  done:\n    done: {}")
        #expect(open.map(\.severity) == [.warning], "\(open)")
    }

    @Test("a flows directory that is missing, or a file, says so")
    func flowsDirectoryMissingOrAFile() throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("no-flows-\(UUID().uuidString)")
        #expect(FlowBundle.load(directory: missing, catalog: FlowCatalog()).diagnostics.map(\.message) == ["flows directory does not exist"])
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("flows-file-\(UUID().uuidString)")
        try "x".write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        #expect(FlowBundle.load(directory: file, catalog: FlowCatalog()).diagnostics.map(\.message) == ["the flows directory is a file, not a directory"])
    }
}
