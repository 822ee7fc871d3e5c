import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Foundation

/// How one scenario went.
public struct ScenarioResult: Sendable {
    public var scenario: Scenario
    /// `file:line:col: message` per failed step; empty when it passed.
    public var failures: [String]
    public var stepsRun: Int
    public var passed: Bool { failures.isEmpty }
}

/// Runs scenarios against a runtime the way a client would: screens are fetched, actions are
/// found in the answers by their titles and sent back with their payloads.
public struct ScenarioRunner: Sendable {
    public let runtime: FlowRuntime
    public let pool: PostgresPool
    /// The stubs the runtime calls services through, if any: a call no stub answers fails the step.
    public let services: ScenarioServices?

    /// - Parameter services: the runtime's service caller when it runs the scenario's stubs
    ///   (``ScenarioServices``; build the runtime with `services: ScenarioServices(stubs: scenario.services)`).
    public init(runtime: FlowRuntime, pool: PostgresPool, services: ScenarioServices? = nil) {
        self.runtime = runtime
        self.pool = pool
        self.services = services
    }

    public func run(_ scenario: Scenario) async -> ScenarioResult {
        var failures: [String] = []
        var last: JSONValue?
        var lastCommand: (payload: String, input: CommandInput, identity: ClientIdentity)?
        var lastBody: [UInt8]?
        var run = 0
        for step in scenario.steps {
            run += 1
            let identity = Self.identity(step.subject ?? scenario.subject)
            func fail(_ message: String) { failures.append("\(step.location): \(message)") }
            do {
                var answer: [UInt8]?
                var replayed = false
                switch step.action {
                case .screen(let name, let parameters):
                    let reply = try await runtime.renderScreen(
                        name, parameters: Self.stringly(parameters), identity: identity, profile: scenario.client)
                    answer = reply.body
                case .start(let flow, let parameters):
                    let payload = try runtime.mintStart(flow: flow, parameters: parameters, identity: identity, profile: scenario.client)
                    let input = try Self.input(step.input, last: last)
                    let reply = try await runtime.execute(payload: payload, input: input, identity: identity, profile: scenario.client)
                    lastCommand = (payload, input, identity)
                    answer = reply.body
                    replayed = reply.replayed
                case .tap(let title):
                    guard let last, let payload = Self.payload(titled: title, in: last) else {
                        fail("no action titled '\(title)' in the previous answer: \(last.map { LooseMatch.short($0) } ?? "none")")
                        break
                    }
                    let input = try Self.input(step.input, last: last)
                    let reply = try await runtime.execute(payload: payload, input: input, identity: identity, profile: scenario.client)
                    lastCommand = (payload, input, identity)
                    answer = reply.body
                    replayed = reply.replayed
                case .open(let title):
                    guard let last, let target = Self.navigation(titled: title, in: last) else {
                        fail("no navigate action titled '\(title)' in the previous answer")
                        break
                    }
                    let reply = try await runtime.renderScreen(
                        target.screen, parameters: Self.stringly(target.parameters), identity: identity, profile: scenario.client)
                    answer = reply.body
                case .again:
                    guard let command = lastCommand else {
                        fail("again: there is no previous command")
                        break
                    }
                    let reply = try await runtime.execute(
                        payload: command.payload, input: command.input, identity: command.identity, profile: scenario.client)
                    answer = reply.body
                    replayed = reply.replayed
                case .sql(let sql):
                    let rows = try await pool.query(sql)
                    let table: JSONValue = .array(
                        try rows.map { row in .array(try (0..<rows.columnCount).map { try row.decode(String?.self, at: $0).map(JSONValue.string) ?? .null }) })
                    if let expected = step.expect, let problem = LooseMatch.mismatch(expected: expected, actual: table) {
                        fail("rows: \(problem)")
                    }
                    continue
                }
                for unmatched in services?.takeUnmatched() ?? [] { fail(unmatched) }
                guard let answer else { continue }
                if let expectedStatus = step.expectStatus {
                    fail("expected a refusal with status \(expectedStatus), got an answer: \(String(decoding: answer.prefix(200), as: UTF8.self))")
                    continue
                }
                let json = try JSONValue.parse(answer)
                if step.expectReplay {
                    if !replayed { fail("expected the stored answer of the previous command (a replay), got a fresh one") }
                    if answer != lastBody { fail("the replayed answer is not byte for byte the earlier one") }
                }
                if let expected = step.expect, let problem = LooseMatch.mismatch(expected: expected, actual: json) {
                    fail(problem)
                }
                last = json
                lastBody = answer
            } catch let error as CommandError {
                let (status, code) = Self.status(error)
                if let expectedStatus = step.expectStatus {
                    if expectedStatus != status { fail("expected status \(expectedStatus), got \(status) \(code): \(error.message)") }
                    if let expectedCode = step.expectCode, expectedCode != code { fail("expected error code \(expectedCode), got \(code)") }
                } else {
                    fail("refused with \(status) \(code): \(error.message)")
                }
            } catch {
                fail("failed: \(error)")
            }
        }
        return ScenarioResult(scenario: scenario, failures: failures, stepsRun: run)
    }

    // MARK: - Helpers

    static func identity(_ subject: String) -> ClientIdentity {
        guard let parsed = FlowSubject(subject) else { return .anonymous }
        switch parsed.kind {
        case .user: return ClientIdentity(user: parsed.id)
        case .device: return ClientIdentity(device: parsed.id)
        }
    }

    /// The HTTP status and error code the server answers a refused command with.
    static func status(_ error: CommandError) -> (Int, String) { error.wire }

    /// Query parameters are text.
    static func stringly(_ parameters: JSONObject) -> JSONObject {
        var copy = JSONObject()
        for (key, value) in parameters { copy[key] = .string(value.interpolationText) }
        return copy
    }

    /// The step's input; `choiceTitle` names an option of the previous input answer by title.
    static func input(_ object: JSONObject?, last: JSONValue?) throws -> CommandInput {
        guard let object else { return .none }
        var input = CommandInput(
            text: object["text"]?.interpolationText, choice: object["choice"]?.interpolationText,
            choices: object["choices"]?.arrayValue?.map(\.interpolationText), barcode: object["barcode"]?.interpolationText)
        if let title = object["choiceTitle"]?.stringValue {
            let options = last?["input"]?["options"]?.arrayValue ?? []
            guard let id = options.first(where: { $0["title"]?.stringValue == title })?["id"]?.stringValue else {
                throw ScenarioError("no option titled '\(title)' (options: \(options.compactMap { $0["title"]?.stringValue }.joined(separator: ", ")))")
            }
            input.choice = id
        }
        return input
    }

    /// The screen and parameters of the navigate action titled `title` (or carried by the
    /// component or menu item with that title).
    static func navigation(titled title: String, in answer: JSONValue) -> (screen: String, parameters: JSONObject)? {
        first(titled: title, in: answer) { object in
            guard let action = object["action"], action["type"] == "navigate", let screen = action["screen"]?.stringValue else {
                return nil
            }
            return (screen, action["params"]?.objectValue ?? [:])
        }
    }

    /// The payload of the action titled `title`: a menu item, a component, or an action with
    /// that title; `submit`, `cancel` and `retry` name an answer's own actions.
    public static func payload(titled title: String, in answer: JSONValue) -> String? {
        if ["submit", "cancel", "retry"].contains(title), let payload = answer[title]?["payload"]?.stringValue { return payload }
        return first(titled: title, in: answer) { object in
            object["action"]?["payload"]?.stringValue ?? object["payload"]?.stringValue
        }
    }

    /// Depth first, the first object titled `title` (or whose action is) that `pick` accepts.
    private static func first<Found>(titled title: String, in answer: JSONValue, _ pick: (JSONObject) -> Found?) -> Found? {
        switch answer {
        case .object(let object):
            if object["title"]?.stringValue == title || object["action"]?["title"]?.stringValue == title, let found = pick(object) {
                return found
            }
            for (_, member) in object { if let found = first(titled: title, in: member, pick) { return found } }
        case .array(let items):
            for item in items { if let found = first(titled: title, in: item, pick) { return found } }
        default:
            break
        }
        return nil
    }
}

/// A scenario that cannot go on.
public struct ScenarioError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}
