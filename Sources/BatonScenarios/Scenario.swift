import BatonFlows
import BatonJSON
import BatonRuntime
import Foundation

/// A flow test: a sequence of screens and commands a client would go through, with the answers
/// expected (matched loosely), written as YAML in `Flows/tests/`.
public struct Scenario: Sendable {
    public var name: String
    public var file: String
    public var location: SourceLocation
    /// The subject steps run as unless they say otherwise (`user:<id>` or `device:<uuid>`).
    public var subject: String
    public var client: ClientProfile
    public var steps: [Step]
    /// Canned answers of the backend services the flows call.
    public var services: [ScenarioServices.Stub] = []

    /// One step.
    public struct Step: Sendable {
        public enum Action: Sendable {
            /// GET a screen.
            case screen(String, parameters: JSONObject)
            /// Start a flow with a start action minted as a screen would.
            case start(String, parameters: JSONObject)
            /// POST an action found in the previous answer, by title (or `submit`, `cancel`,
            /// `retry` for the answer's own actions).
            case tap(String)
            /// Send the previous command again, unchanged.
            case again
            /// Follow a `navigate` action found in the previous answer by title (GET its screen).
            case open(String)
            /// Run SQL and compare its rows.
            case sql(String)
        }

        public var action: Action
        public var input: JSONObject?
        /// Overrides the scenario's subject for this step.
        public var subject: String?
        public var expect: JSONValue?
        /// For a refused command: the HTTP status and error code expected.
        public var expectStatus: Int?
        public var expectCode: String?
        /// `true`: the answer must be the stored answer of the previous command, byte for byte.
        public var expectReplay: Bool
        public var location: SourceLocation
    }

    static let keys: Set<String> = ["scenario", "as", "client", "services", "steps"]
    static let stepKeys: Set<String> = [
        "screen", "start", "tap", "open", "again", "sql", "params", "input", "as", "expect", "status", "code", "replay",
    ]
    static let clientKeys: Set<String> = ["contract", "platform", "capabilities", "version"]

    /// Loads one scenario file.
    public static func load(source: String, file: String) -> (Scenario?, [Diagnostic]) {
        var diagnostics: [Diagnostic] = []
        func error(_ message: String, _ location: SourceLocation) { diagnostics.append(.error(message, at: location)) }
        let root: SourceNode
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic): return (nil, [diagnostic])
        case .success(let node): root = node
        }
        guard case .mapping(let pairs, _) = root else {
            return (nil, [.error("a scenario file is a mapping with scenario, as, steps", at: root.location)])
        }
        for (key, _) in pairs where !keys.contains(key.text) { error("unknown key '\(key.text)' in a scenario", key.location) }
        func text(_ node: SourceNode?) -> String? {
            if case .scalar(let scalar)? = node { return scalar.text }
            return nil
        }
        guard let name = text(root["scenario"]) else {
            return (nil, diagnostics + [.error("missing 'scenario: <what it checks>'", at: root.location)])
        }
        let subject = text(root["as"]) ?? ""
        if FlowSubject(subject) == nil { error("'as' must be user:<id> or device:<uuid>", root["as"]?.location ?? root.location) }
        var client = ClientProfile(contract: 3, platform: "ios")
        if let clientNode = root["client"] {
            if case .mapping(let clientPairs, _) = clientNode {
                for (key, _) in clientPairs where !clientKeys.contains(key.text) { error("unknown key '\(key.text)' in client", key.location) }
            }
            if let contract = text(clientNode["contract"]).flatMap(Int.init) { client.contract = contract }
            if let platform = text(clientNode["platform"]) { client.platform = platform }
            if let version = text(clientNode["version"]) { client.appVersion = version }
            if case .sequence(let items, _)? = clientNode["capabilities"] {
                client.capabilities = Set(items.compactMap(text))
            }
        }
        var steps: [Step] = []
        guard case .sequence(let items, _)? = root["steps"] else {
            return (nil, diagnostics + [.error("missing 'steps:' (a list)", at: root.location)])
        }
        for item in items {
            guard case .mapping(let stepPairs, _) = item else {
                error("a step is a mapping (screen:, start:, tap:, again:, sql:)", item.location)
                continue
            }
            for (key, _) in stepPairs where !stepKeys.contains(key.text) {
                let hint = Suggest.closest(key.text, in: stepKeys).map { "; did you mean '\($0)'?" } ?? ""
                error("unknown key '\(key.text)' in a step\(hint)", key.location)
            }
            let parameters = item["params"]?.jsonValue.objectValue ?? [:]
            let action: Step.Action
            if let screen = text(item["screen"]) {
                action = .screen(screen, parameters: parameters)
            } else if let flow = text(item["start"]) {
                action = .start(flow, parameters: parameters)
            } else if let title = text(item["tap"]) {
                action = .tap(title)
            } else if let title = text(item["open"]) {
                action = .open(title)
            } else if item["again"] != nil {
                action = .again
            } else if let sql = text(item["sql"]) {
                action = .sql(sql)
            } else {
                error("a step needs one of screen:, start:, tap:, open:, again:, sql:", item.location)
                continue
            }
            steps.append(
                Step(
                    action: action, input: item["input"]?.jsonValue.objectValue, subject: text(item["as"]),
                    expect: item["expect"]?.jsonValue, expectStatus: text(item["status"]).flatMap(Int.init), expectCode: text(item["code"]),
                    expectReplay: text(item["replay"]) == "true", location: item.location))
        }
        let stubs = root["services"].map { ScenarioServices.stubs($0, error: error) } ?? []
        guard !diagnostics.hasErrors else { return (nil, diagnostics) }
        return (
            Scenario(name: name, file: file, location: root.location, subject: subject, client: client, steps: steps, services: stubs),
            diagnostics
        )
    }

    /// Loads every `*.yaml` in a directory (paths relative to its grandparent: `Flows/tests/x.yaml`).
    public static func loadAll(directory: URL) -> ([Scenario], [Diagnostic]) {
        let base = directory.deletingLastPathComponent().deletingLastPathComponent().path
        var scenarios: [Scenario] = []
        var diagnostics: [Diagnostic] = []
        let files = ((try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? [])
            .filter { $0.pathExtension == "yaml" }.sorted { $0.path < $1.path }
        for url in files {
            let display = url.path.hasPrefix(base + "/") ? String(url.path.dropFirst(base.count + 1)) : url.path
            guard let source = try? String(contentsOf: url, encoding: .utf8) else {
                diagnostics.append(.error("not readable", at: SourceLocation(file: display, line: 1, column: 1)))
                continue
            }
            let (scenario, found) = load(source: source, file: display)
            diagnostics += found
            if let scenario { scenarios.append(scenario) }
        }
        return (scenarios, diagnostics)
    }
}
