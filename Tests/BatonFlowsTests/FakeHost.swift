import BatonFlows
import BatonJSON
import Foundation
import Synchronization

/// An in-memory host: effects, guards and loaders as closures, every call recorded.
final class FakeHost: FlowHost, Sendable {
    let effects: [String: @Sendable (JSONObject) -> EffectResult]
    let guards: [String: @Sendable (JSONObject) -> Bool]
    let loaders: [String: @Sendable (JSONObject) -> JSONValue]
    let calls = Mutex<[String]>([])

    init(
        effects: [String: @Sendable (JSONObject) -> EffectResult] = [:], guards: [String: @Sendable (JSONObject) -> Bool] = [:],
        loaders: [String: @Sendable (JSONObject) -> JSONValue] = [:]
    ) {
        self.effects = effects
        self.guards = guards
        self.loaders = loaders
    }

    func runGuard(_ name: String, arguments: JSONObject, call: FlowCall) throws -> Bool {
        calls.withLock { $0.append("guard \(name) \(JSONValue.object(arguments))") }
        guard let run = guards[name] else { throw FlowCallError.invalid("no guard \(name)") }
        return run(arguments)
    }

    func runEffect(_ name: String, arguments: JSONObject, call: FlowCall) throws -> EffectResult {
        calls.withLock { $0.append("effect \(name) \(JSONValue.object(arguments))") }
        guard let run = effects[name] else { throw FlowCallError.invalid("no effect \(name)") }
        return run(arguments)
    }

    func runLoader(_ name: String, arguments: JSONObject, call: FlowCall) throws -> JSONValue {
        calls.withLock { $0.append("loader \(name) \(JSONValue.object(arguments))") }
        guard let run = loaders[name] else { throw FlowCallError.invalid("no loader \(name)") }
        return run(arguments)
    }

    var recorded: [String] { calls.withLock { $0 } }

    /// The host for the fixture flows: notes remember their texts, colour blue fails.
    static func fixtures(existingNotes: Set<String> = []) -> FakeHost {
        FakeHost(
            effects: [
                "notes.create": { arguments in
                    let text = arguments["text"]?.stringValue ?? ""
                    return existingNotes.contains(text) ? EffectResult("duplicate") : EffectResult("created", ["text": .string(text)])
                },
                "counter.increment": { _ in EffectResult("incremented", ["value": 7]) },
                "colours.order": { arguments in
                    arguments["colour"] == "blue" ? EffectResult("failed") : EffectResult("ordered", ["colour": arguments["colour"] ?? .null])
                },
            ],
            guards: ["colours.available": { $0["id"] != "green" }],
            loaders: [
                "colours.list": { _ in [["id": "red", "name": "Red"], ["id": "blue", "name": "Blue"], ["id": "green", "name": "Green"]] }
            ])
    }
}

/// The fixture bundle, loaded once.
enum Fixtures {
    static let root: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no package root")
    }()

    static let catalog = FlowCatalog(
        effects: [
            CallSignature(name: "notes.create", arguments: [ArgumentSpec("text"), ArgumentSpec("folder", required: false)], outcomes: ["created", "duplicate"]),
            CallSignature(name: "counter.increment", arguments: [ArgumentSpec("name", required: false)], outcomes: ["incremented"]),
            CallSignature(name: "colours.order", arguments: [ArgumentSpec("colour")], outcomes: ["ordered", "failed"]),
        ],
        guards: [CallSignature(name: "colours.available", arguments: [ArgumentSpec("id")])],
        loaders: [
            CallSignature(name: "colours.list", returnsList: true), CallSignature(name: "notes.mine", returnsList: true),
            CallSignature(name: "notes.search", arguments: [ArgumentSpec("q", required: false)], returnsList: true),
        ])

    static let bundle = FlowBundle.load(directory: root.appendingPathComponent("Tests/Fixtures/flows"), catalog: catalog)

    static func engine(_ flow: String) -> FlowEngine { bundle.engines[flow]! }

    static let user = FlowCall(subject: FlowSubject(kind: .user, id: "alice"), flow: "", sessionID: "s1")
}
