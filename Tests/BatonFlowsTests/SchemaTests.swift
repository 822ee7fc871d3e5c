import BatonFlows
import BatonJSON
import BatonTestSupport
import Foundation
import Testing

/// `Flows/schema/flow.schema.json` is what editors complete against; the loader is what
/// Baton runs. These tests keep them saying the same thing.
@Suite("Flow JSON Schema")
struct SchemaTests {
    static let schemaURL = Fixtures.root.appendingPathComponent("Flows/schema/flow.schema.json")

    func definitions() throws -> JSONObject {
        let schema = try JSONValue.parse(Array(try Data(contentsOf: Self.schemaURL)))
        return try #require(schema["$defs"]?.objectValue)
    }

    func properties(_ name: String) throws -> Set<String> {
        Set(try #require(try definitions()[name]?["properties"]?.objectValue, "no $defs/\(name)").keys)
    }

    @Test("every mapping the loader reads has a schema definition with exactly its keys")
    func keysInSync() throws {
        let pairs: [(String, Set<String>)] = [
            ("flow", FlowLoader.Keys.flow), ("parameter", FlowLoader.Keys.parameter), ("state", FlowLoader.Keys.state),
            ("input", FlowLoader.Keys.input), ("option", FlowLoader.Keys.option), ("optionsFrom", FlowLoader.Keys.optionsFrom),
            ("load", FlowLoader.Keys.load), ("screen", FlowLoader.Keys.screen), ("done", FlowLoader.Keys.done),
            ("error", FlowLoader.Keys.error), ("transition", FlowLoader.Keys.transition), ("guardCall", FlowLoader.Keys.guardCall),
            ("validation", FlowLoader.Keys.validation),
        ]
        for (name, keys) in pairs {
            let schema = try properties(name)
            #expect(schema == keys, "$defs/\(name): schema only \(schema.subtracting(keys).sorted()), loader only \(keys.subtracting(schema).sorted())")
        }
    }

    @Test("enumerations in the schema match the loader's")
    func enumerations() throws {
        let definitions = try definitions()
        let auth = definitions["flow"]?["properties"]?["auth"]?["enum"]?.arrayValue?.compactMap(\.stringValue)
        #expect(Set(auth ?? []) == Set(FlowDefinition.Audience.allCases.map(\.rawValue)))
        let presentation = definitions["screen"]?["properties"]?["presentation"]?["enum"]?.arrayValue?.compactMap(\.stringValue)
        #expect(Set(presentation ?? []) == Set(ScreenSpec.Presentation.allCases.map(\.rawValue)))
    }

    @Test("every flow in Flows/ and in the test fixtures validates against the schema (jsonschema)")
    func filesValidate() async throws {
        let python = Fixtures.root.appendingPathComponent(".build/tools-venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the tools venv is missing: run scripts/bootstrap.sh --test")
            return
        }
        var files: [String] = []
        for directory in ["Flows", "Tests/Fixtures/flows"] {
            let url = Fixtures.root.appendingPathComponent(directory)
            for name in try FileManager.default.contentsOfDirectory(atPath: url.path)
            where name.hasSuffix(".yaml") && !["contract.yaml", "deeplinks.yaml", "services.yaml"].contains(name) {
                files.append(url.appendingPathComponent(name).path)
            }
        }
        // The script passes with no file at all: the test must have the repository's flows.
        #expect(files.count >= 10, "\(files)")
        let (status, text) = try await ExternalTool.run(
            python, [Fixtures.root.appendingPathComponent("scripts/checks/validate_flows_schema.py").path, Self.schemaURL.path] + files)
        #expect(status == 0, "\(text)")
    }

    @Test("the schema rejects what the loader rejects: an unknown key")
    func rejects() async throws {
        let python = Fixtures.root.appendingPathComponent(".build/tools-venv/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            Issue.record("the tools venv is missing: run scripts/bootstrap.sh --test")
            return
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bad-\(UUID().uuidString).yaml")
        try "flow: bad\nstart: a\nstates:\n  a:\n    done: {}\n    colour: blue\n".write(to: file, atomically: true, encoding: .utf8)
        let (status, text) = try await ExternalTool.run(
            python, [Fixtures.root.appendingPathComponent("scripts/checks/validate_flows_schema.py").path, Self.schemaURL.path, file.path])
        #expect(status == 1, "\(text)")
        // The complaint, not a crash (which exits 1 too).
        #expect(text.contains("states/a: Additional properties are not allowed ('colour' was unexpected)"), "\(text)")
    }
}
