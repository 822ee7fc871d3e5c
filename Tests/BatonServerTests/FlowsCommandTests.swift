import BatonTestSupport
import Foundation
import Testing

@Suite("baton flows lint / graph")
struct FlowsCommandTests {
    func baton(_ arguments: [String]) throws -> (status: Int32, output: String) {
        guard let executable = BatonProcess.executable else { throw TestFailure("build the baton executable first (swift build)") }
        return try ExternalTool.run(executable.path, arguments)
    }

    @Test("lint prints compiler-style diagnostics and exits 1 on errors")
    func lintBroken() throws {
        let result = try baton(["flows", "lint", TestFlows.brokenDirectory.path])
        #expect(result.status == 1)
        #expect(result.output.contains("broken/unknown-state.yaml:7:15: error: unknown state 'finishd'; did you mean 'finished'?"))
        #expect(result.output.contains("error(s)"))
    }

    @Test("lint of the repository's Flows/ is clean (exit 0)")
    func lintRepository() throws {
        let result = try baton(["flows", "lint", TestDatabase.repositoryRoot.appendingPathComponent("Flows").path])
        #expect(result.status == 0, "\(result.output)")
    }

    @Test("docs/flows.md shows the current graph of every built-in flow")
    func documentedGraphs() throws {
        let root = TestDatabase.repositoryRoot
        let guide = try String(contentsOf: root.appendingPathComponent("docs/flows.md"), encoding: .utf8)
        let flows = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Flows").path)
            .filter { $0.hasSuffix(".yaml") && !["contract.yaml", "deeplinks.yaml", "services.yaml"].contains($0) }
        #expect(flows.count >= 8)
        for file in flows {
            let flow = String(file.dropLast(".yaml".count))
            let result = try baton(["flows", "graph", flow, "--flows-dir", root.appendingPathComponent("Flows").path])
            #expect(result.status == 0, "\(result.output)")
            #expect(guide.contains("```mermaid\n" + result.output), "docs/flows.md has an outdated or missing graph of \(flow)")
        }
    }

    @Test("graph draws Mermaid and DOT")
    func graph() throws {
        // The fixtures need the test registry to lint, so draw a repository flow when there is one,
        // else draw from a directory with a self-contained flow.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("graph-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try """
            flow: greet
            auth: any
            start: ask
            states:
              ask:
                input: { title: Your name?, submit: Hi }
                on:
                  submit: hello
                  cancel: bye
              hello:
                done: { message: "Hello {{inputs.ask.text}}" }
              bye:
                refresh: {}
            """.write(to: directory.appendingPathComponent("greet.yaml"), atomically: true, encoding: .utf8)
        let mermaid = try baton(["flows", "graph", "greet", "--flows-dir", directory.path])
        #expect(mermaid.status == 0, "\(mermaid.output)")
        #expect(mermaid.output.hasPrefix("stateDiagram-v2"))
        #expect(mermaid.output.contains("s_ask --> s_hello: submit"))
        #expect(mermaid.output.contains("s_hello --> [*]: completed"))
        let dot = try baton(["flows", "graph", "greet", "--format", "dot", "--flows-dir", directory.path])
        #expect(dot.output.hasPrefix("digraph \"greet\""))
        #expect(dot.output.contains("\"ask\" -> \"bye\" [label=\"cancel\"];"))
        let missing = try baton(["flows", "graph", "nope", "--flows-dir", directory.path])
        #expect(missing.status != 0)
        #expect(missing.output.contains("no flow 'nope'"))
    }
}
