import BatonFlows
import BatonTestSupport
import Foundation
import Testing

@Suite("baton flows lint / graph")
struct FlowsCommandTests {
    func baton(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        guard let executable = BatonProcess.executable else { throw TestFailure("build the baton executable first (swift build)") }
        return try await ExternalTool.run(executable.path, arguments)
    }

    @Test("lint prints compiler-style diagnostics and exits 1 on errors")
    func lintBroken() async throws {
        let result = try await baton(["flows", "lint", "--flows-dir", TestFlows.brokenDirectory.path])
        #expect(result.status == 1)
        #expect(result.output.contains("broken/unknown-state.yaml:7:15: error: unknown state 'finishd'; did you mean 'finished'?"))
        #expect(result.output.contains("error(s)"))
        #expect(!result.output.contains("deprecated"))
    }

    @Test("the flows directory as lint's argument still works, with a deprecation note")
    func lintPositional() async throws {
        let result = try await baton(["flows", "lint", TestFlows.brokenDirectory.path])
        #expect(result.status == 1)
        #expect(result.output.contains("broken/unknown-state.yaml:7:15: error: unknown state 'finishd'"))
        #expect(result.output.contains("warning: the flows directory as an argument is deprecated; write `baton flows lint --flows-dir "))
    }

    @Test("lint of the repository's Flows/ is clean: no errors, no warnings (exit 0 with --strict)")
    func lintRepository() async throws {
        let result = try await baton(["flows", "lint", "--strict", "--flows-dir", TestDatabase.repositoryRoot.appendingPathComponent("Flows").path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(": 0 error(s), 0 warning(s)"), "\(result.output)")
    }

    @Test("flows test runs from any working directory: the migrations are found without --migrations-dir")
    func testFromElsewhere() async throws {
        guard let executable = BatonProcess.executable else { throw TestFailure("build the baton executable first (swift build)") }
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("elsewhere-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        var environment = ProcessInfo.processInfo.environment
        environment["BATON_MIGRATIONS_DIR"] = nil
        let (status, text) = try await ExternalTool.run(
            executable.path,
            ["flows", "test", "--flows-dir", TestDatabase.repositoryRoot.appendingPathComponent("Flows").path, "--filter", "Rename a playlist"],
            in: elsewhere, environment: environment)
        #expect(status == 0, "\(text)")
        #expect(text.contains("1 of 1 scenario(s) passed"), "\(text)")
    }

    @Test("docs/catalog.md is the current output of `baton flows catalog --markdown`")
    func documentedCatalog() async throws {
        let result = try await baton(["flows", "catalog", "--markdown"])
        #expect(result.status == 0, "\(result.output)")
        let page = try String(contentsOf: TestDatabase.repositoryRoot.appendingPathComponent("docs/catalog.md"), encoding: .utf8)
        if page != result.output {
            let old = page.split(separator: "\n", omittingEmptySubsequences: false)
            let new = result.output.split(separator: "\n", omittingEmptySubsequences: false)
            let line = zip(old, new).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(old.count, new.count)
            Issue.record(
                """
                docs/catalog.md is out of date with the registered effects, guards and loaders; regenerate it with
                    \(CatalogDocument.regenerateCommand)
                first difference at line \(line + 1):
                    docs/catalog.md: \(line < old.count ? old[line] : "(end)")
                    generated:       \(line < new.count ? new[line] : "(end)")
                """)
        }
    }

    @Test("catalog lists every effect, guard and loader with its arguments, outcomes and fields")
    func catalogText() async throws {
        let result = try await baton(["flows", "catalog"])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.hasPrefix("Effects ("))
        #expect(result.output.contains("  playlists.create\n    arguments: name\n    outcomes: created, name_taken\n    result fields: id, name\n"))
        #expect(result.output.contains("  locations.exists\n    arguments: code\n"))
        #expect(result.output.contains("  playlists.get\n    arguments: id\n    returns: id, name, description, artwork, "))
        #expect(result.output.contains("tracks: list of {id, title, artist, duration}"))
        #expect(result.output.contains("  catalog.list\n    arguments: none\n    returns: list of {id, name, "))
    }

    @Test("docs/flows.md shows the current graph of every built-in flow")
    func documentedGraphs() async throws {
        let root = TestDatabase.repositoryRoot
        let guide = try String(contentsOf: root.appendingPathComponent("docs/flows.md"), encoding: .utf8)
        let flows = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Flows").path)
            .filter { $0.hasSuffix(".yaml") && !["contract.yaml", "deeplinks.yaml", "services.yaml"].contains($0) }
        #expect(flows.count >= 8)
        for file in flows {
            let flow = String(file.dropLast(".yaml".count))
            let result = try await baton(["flows", "graph", flow, "--flows-dir", root.appendingPathComponent("Flows").path])
            #expect(result.status == 0, "\(result.output)")
            #expect(guide.contains("```mermaid\n" + result.output), "docs/flows.md has an outdated or missing graph of \(flow)")
        }
    }

    @Test("graph draws Mermaid and DOT")
    func graph() async throws {
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
        let mermaid = try await baton(["flows", "graph", "greet", "--flows-dir", directory.path])
        #expect(mermaid.status == 0, "\(mermaid.output)")
        #expect(mermaid.output.hasPrefix("stateDiagram-v2"))
        #expect(mermaid.output.contains("s_ask --> s_hello: submit"))
        #expect(mermaid.output.contains("s_hello --> [*]: completed"))
        let dot = try await baton(["flows", "graph", "greet", "--format", "dot", "--flows-dir", directory.path])
        #expect(dot.output.hasPrefix("digraph \"greet\""))
        #expect(dot.output.contains("\"ask\" -> \"bye\" [label=\"cancel\"];"))
        let missing = try await baton(["flows", "graph", "nope", "--flows-dir", directory.path])
        #expect(missing.status != 0)
        #expect(missing.output.contains("no flow 'nope'"))
    }
}

extension FlowsCommandTests {
    // docs/deeplinks.md promised 2 for an allowlist that does not load; it was 1, the same as a
    // rejected link, so a script could not tell a broken allowlist from a refused URL.
    @Test("links check exits 0 for an allowed link, 1 for a rejected one, 2 when the allowlist does not load")
    func linksCheckExitStatus() async throws {
        let flows = TestDatabase.repositoryRoot.appendingPathComponent("Flows").path
        let allowed = try await baton(["links", "check", "https://app.example.com/scan-and-go?location=UT-0001", "--flows-dir", flows])
        #expect(allowed.status == 0, "\(allowed.output)")
        let rejected = try await baton(["links", "check", "https://app.example.com@evil.example/", "--flows-dir", flows])
        #expect(rejected.status == 1, "\(rejected.output)")
        let broken = FileManager.default.temporaryDirectory.appendingPathComponent("links-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: broken, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: broken) }
        try "hosts: [\n".write(to: broken.appendingPathComponent("deeplinks.yaml"), atomically: true, encoding: .utf8)
        let unloadable = try await baton(["links", "check", "https://app.example.com/", "--flows-dir", broken.path])
        #expect(unloadable.status == 2, "\(unloadable.output)")
        #expect(unloadable.output.contains("does not load"), "\(unloadable.output)")
    }
}
