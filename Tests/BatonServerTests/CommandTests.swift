import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Synchronization
import Testing

@Suite("POST /v{N}/command")
struct CommandTests {
    static let device = "8d3f6c2e-5b1a-4e7f-9c0d-2a4b6c8d0e1f"
    static let otherDevice = "1a2b3c4d-5e6f-4a8b-9c0d-e1f2a3b4c5d6"

    func environment(clock: @escaping @Sendable () -> Date = { Date() }) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry(), clock: clock)
        try await TestFlows.prepare(environment.pool)
        return environment
    }

    func count(_ pool: PostgresPool, _ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int {
        try await pool.query(sql, parameters)[0].decode(Int.self, at: 0)
    }

    @Test("a flow walked start to finish: input, submit, effect, done; the row is written")
    func walk() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let start = TestFlows.startPayload("note-create", subject: "device:\(Self.device)", parameters: ["folder": "home"])
            let first = try await client.command(start, headers: headers)
            #expect(first.status == .ok)
            let input = first.json
            #expect(input["type"] == "input")
            #expect(input["title"] == "Write a note")
            #expect(input["message"] == "Folder: home")
            #expect(input["input"] == ["kind": "text", "placeholder": "Something to remember", "value": "", "minLength": 1, "maxLength": 50])
            #expect(input["submit"]?["url"] == "/v3/command")
            #expect(input["submit"]?["title"] == "Save")
            #expect(input["cancel"]?["title"] == "Cancel")
            let submit = try #require(input.payload("submit"))

            let done = try await client.command(submit, input: ["text": "  Buy bread  "], headers: headers)
            #expect(done.status == .ok)
            #expect(done.json == ["type": "done", "message": "Saved “Buy bread”", "refresh": true])
            #expect(done.headers[.idempotentReplay] == nil)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes WHERE text = 'Buy bread' AND folder = 'home'") == 1)
            let status = try await environment.pool.query("SELECT status, step FROM flow_sessions")
            #expect(try status[0].decode(String.self, at: 0) == "completed")
            #expect(try status[0].decode(Int.self, at: 1) == 2)
        }
    }

    // Every member of a command's input was stored in the session (and readable by templates as
    // {{inputs.<state>.…}}), validated or not: a stray member's NUL made jsonb refuse a valid
    // command (400), and text nobody checked (bidi controls, 60 KB) was kept.
    @Test("only what the flow validated is kept of a command's input: another member, a NUL in it included, is neither stored nor a reason to refuse")
    func unvalidatedInputMembers() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let start = TestFlows.startPayload("note-create", subject: "device:\(Self.device)", parameters: ["folder": "home"])
            let submit = try #require(try await client.command(start, headers: headers).json.payload("submit"))
            let done = try await client.command(
                submit, input: ["text": "  Buy bread  ", "barcode": "\u{0}", "choice": .string("\u{202E}" + String(repeating: "x", count: 30_000))],
                headers: headers)
            #expect(done.status == .ok, "\(done.text)")
            #expect(done.json == ["type": "done", "message": "Saved “Buy bread”", "refresh": true])
            let context = try JSONValue.parse(Array(try await environment.pool.query("SELECT context::text FROM flow_sessions")[0].decode(String.self, at: 0).utf8))
            #expect(context["inputs"]?["write"] == ["text": "Buy bread", "value": "Buy bread"], "\(context)")
            #expect(context["input"] == ["text": "Buy bread", "value": "Buy bread"], "\(context)")

            // An event that takes no input keeps none.
            let again = TestFlows.startPayload("note-create", subject: "device:\(Self.device)", parameters: ["folder": "work"])
            let cancel = try #require(try await client.command(again, headers: headers).json.payload("cancel"))
            let cancelled = try await client.command(cancel, input: ["text": "\u{202E}kept?", "barcode": "\u{0}"], headers: headers)
            #expect(cancelled.status == .ok, "\(cancelled.text)")
            let stored = try await environment.pool.query("SELECT context::text FROM flow_sessions WHERE context->'params'->>'folder' = 'work'")
            let second = try JSONValue.parse(Array(try stored[0].decode(String.self, at: 0).utf8))
            #expect(second["inputs"]?["write"] == [:], "\(second)")
        }
    }

    @Test("a retried command returns the stored response byte for byte, with Idempotent-Replay, and runs no effect; another input is stale")
    func replay() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let start = TestFlows.startPayload("note-create", subject: "device:\(Self.device)")
            let first = try await client.command(start, headers: headers)
            let again = try await client.command(start, headers: headers)
            #expect(again.text == first.text)
            #expect(again.headers[.idempotentReplay] == "true")
            let submit = try #require(first.json.payload("submit"))
            let done = try await client.command(submit, input: ["text": "eggs"], headers: headers)
            let repeated = try await client.command(submit, input: ["text": "eggs"], headers: headers)
            #expect(Array(buffer: repeated.body) == Array(buffer: done.body))
            #expect(repeated.headers[.idempotentReplay] == "true")
            // The same payload with another input is not the request that ran: it never gets
            // that request's reply, and changes nothing.
            let other = try await client.command(submit, input: ["text": "something else entirely"], headers: headers)
            #expect(other.json == ["type": "refresh", "message": "This screen was out of date and has been refreshed."])
            #expect(other.headers[.idempotentReplay] == nil)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_effect_runs WHERE effect = 'notes.create'") == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes") == 1)
        }
    }

    @Test("ten copies of one command at the same moment run the effect once and all get the same answer")
    func concurrentDuplicates() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        let headers = try await userHeaders("carol")
        try await app.test(.router) { client in
            let start = TestFlows.startPayload("counter", subject: "user:carol", parameters: ["name": "taps"])
            let bodies = try await withThrowingTaskGroup(of: (String, Bool).self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        let response = try await client.command(start, headers: headers)
                        return (response.text, response.headers[.idempotentReplay] == "true")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(bodies.map(\.0)).count == 1, "different answers: \(Set(bodies.map(\.0)))")
            #expect(bodies.filter { !$0.1 }.count == 1, "exactly one copy ran, the rest replayed")
            #expect(try JSONValue.parse(Array(bodies[0].0.utf8)) == ["type": "done", "message": "Count is 1", "refresh": ["counts"]])
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_effect_runs WHERE effect = 'counter.increment'") == 1)
            #expect(try await count(environment.pool, "SELECT value FROM test_counters WHERE name = 'taps'") == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 1)
        }
    }

    @Test("a one-step start takes three round trips (the session claim rides with the effect's first statement); a repeat undoes its guess")
    func startRoundTrips() async throws {
        let environment = try await TestApplication.environment(poolSize: 1, flows: TestFlows.directory, registry: TestFlows.registry())
        try await TestFlows.prepare(environment.pool)
        let headers = try await userHeaders("dora")
        try await buildApplication(environment).test(.router) { client in
            // A first command and its repeat prepare their statements on the pool's one connection.
            let warm = TestFlows.startPayload("counter", subject: "user:dora", parameters: ["name": "warm"])
            _ = try await client.command(warm, headers: headers)
            _ = try await client.command(warm, headers: headers)
            let start = TestFlows.startPayload("counter", subject: "user:dora", parameters: ["name": "trips"])
            let (first, firstTrips) = try await environment.pool.countingRoundTrips { try await client.command(start, headers: headers) }
            #expect(first.json == ["type": "done", "message": "Count is 1", "refresh": ["counts"]])
            // [BEGIN, claim, effect's INSERT] · [effect's upsert] · [session, log, COMMIT]
            #expect(firstTrips == 3)
            // The repeat runs the effect on its guess, learns the session exists, rolls back and
            // answers from the log: nothing of its guess stays.
            let (again, againTrips) = try await environment.pool.countingRoundTrips { try await client.command(start, headers: headers) }
            // [BEGIN, claim, effect's INSERT: refuted] · [ROLLBACK, BEGIN, lock] · [COMMIT]
            #expect(againTrips == 3)
            #expect(Array(buffer: again.body) == Array(buffer: first.body))
            #expect(again.headers[.idempotentReplay] == "true")
            #expect(try await count(environment.pool, "SELECT value FROM test_counters WHERE name = 'trips'") == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_effect_runs WHERE effect = 'counter.increment'") == 2)
        }
    }

    @Test("ten copies of one step command at once: one effect, one answer")
    func concurrentStep() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let first = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let submit = try #require(first.json.payload("submit"))
            let answers = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<10 { group.addTask { try await client.command(submit, input: ["text": "once"], headers: headers).text } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(Set(answers).count == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_effect_runs WHERE effect = 'notes.create'") == 1)
        }
    }

    @Test("a command for a step that is no longer current answers refresh and changes nothing")
    func stale() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let first = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let submit = try #require(first.json.payload("submit"))
            let cancel = try #require(first.json.payload("cancel"))
            let cancelled = try await client.command(cancel, headers: headers)
            #expect(cancelled.json == ["type": "refresh"])
            let late = try await client.command(submit, input: ["text": "too late"], headers: headers)
            #expect(late.status == .ok)
            #expect(late.json == ["type": "refresh", "message": "This screen was out of date and has been refreshed."])
            #expect(late.headers[.idempotentReplay] == nil)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes") == 0)
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions WHERE status = 'cancelled'") == 1)
        }
    }

    @Test("validation errors re-send the input with error set; the session stays in its state")
    func validationError() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let first = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let tooLong = try await client.command(
                try #require(first.json.payload("submit")), input: ["text": .string(String(repeating: "x", count: 60))], headers: headers)
            #expect(tooLong.json["type"] == "input")
            #expect(tooLong.json["error"] == "Use at most 50 characters (this has 60).")
            #expect(tooLong.json["title"] == "Write a note")
            let duplicateSetup = try await client.command(try #require(tooLong.json.payload("submit")), input: ["text": "dup"], headers: headers)
            #expect(duplicateSetup.json["type"] == "done")
            // A second note flow: the same text is refused with the effect's message.
            let second = try await client.command(
                TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let refused = try await client.command(try #require(second.json.payload("submit")), input: ["text": "dup"], headers: headers)
            #expect(refused.json["error"] == "You already wrote “dup”.")
            #expect(refused.json["input"]?["value"] == "dup")
        }
    }

    @Test("a tampered, unsigned, truncated or garbage payload is 400 invalid_payload")
    func tampered() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let genuine = TestFlows.startPayload("note-create", subject: "device:\(Self.device)")
            let parts = genuine.split(separator: ".").map(String.init)
            // Re-encode the claims with another subject, keep the old signature.
            var claims = try JSONValue.parse(Array(Data(base64URLEncoded: parts[0])!)).objectValue!
            claims["s"] = .string("device:\(Self.otherDevice)")
            let forgedBody = Data(JSONEncoding.encode(.object(claims))).base64URLEncoded
            var flipped = Array(parts[1])
            flipped[5] = flipped[5] == "A" ? "B" : "A"
            for payload in [
                forgedBody + "." + parts[1], parts[0] + "." + String(flipped), parts[0], "not-a-payload", "", "a.b.c",
                parts[0] + ".", String(repeating: "A", count: 5000), genuine + "x",
            ] {
                let response = try await client.command(payload, headers: headers)
                if payload.isEmpty {
                    #expect(response.status == .badRequest)
                    #expect(response.json["error"]?["code"] == "invalid_request")
                } else {
                    #expect(response.status == .badRequest, "\(payload.prefix(40))")
                    #expect(response.json["error"]?["code"] == "invalid_payload", "\(payload.prefix(40))")
                }
            }
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 0)
        }
    }

    @Test("a payload minted for another subject is 403; no identity at all is 401")
    func foreignPayload() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let start = TestFlows.startPayload("note-create", subject: "device:\(Self.device)")
            let foreign = try await client.command(start, headers: deviceHeaders(Self.otherDevice))
            #expect(foreign.status == .forbidden)
            #expect(foreign.json["error"]?["code"] == "forbidden")
            let anonymous = try await client.command(start)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.json["error"]?["code"] == "unauthenticated")
            // A step payload of one session used by someone else.
            let own = try await client.command(start, headers: deviceHeaders(Self.device))
            let submit = try #require(own.json.payload("submit"))
            let stolen = try await client.command(submit, input: ["text": "mine now"], headers: try await userHeaders("mallory"))
            #expect(stolen.status == .forbidden)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes") == 0)
        }
    }

    @Test("an expired payload answers 200 error with a restart action that works")
    func expired() async throws {
        let offset = TimeOffset()
        let environment = try await environment(clock: { Date().addingTimeInterval(offset.seconds) })
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let first = try await client.command(
                TestFlows.startPayload("note-create", subject: "device:\(Self.device)", parameters: ["folder": "work"]), headers: headers)
            let submit = try #require(first.json.payload("submit"))
            offset.seconds = 11 * 60  // the flow's ttl is 10m
            let late = try await client.command(submit, input: ["text": "late"], headers: headers)
            #expect(late.status == .ok)
            #expect(late.json["type"] == "error")
            #expect(late.json["code"] == "payload_expired")
            #expect(late.json["retry"]?["type"] == "startFlow")
            let restart = try #require(late.json.payload("retry"))
            let fresh = try await client.command(restart, headers: headers)
            #expect(fresh.json["type"] == "input")
            #expect(fresh.json["message"] == "Folder: work", "the restart keeps the flow's parameters")
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions WHERE status = 'expired'") == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes") == 0)
        }
    }

    @Test("a screen state's actions carry payloads per event; the flow continues through them")
    func screenActions() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let choose = try await client.command(TestFlows.startPayload("pick", subject: "device:\(Self.device)"), headers: headers)
            #expect(choose.json["input"]?["options"]?.arrayValue?.count == 4)
            let screen = try await client.command(try #require(choose.json.payload("submit")), input: ["choice": "red"], headers: headers)
            #expect(screen.json["type"] == "screen")
            #expect(screen.json["presentation"] == "modal")
            let components = screen.json["screen"]?["sections"]?.arrayValue?.first?["components"]?.arrayValue ?? []
            let ok = try #require(components.first { $0["id"] == "ok" }?["action"])
            #expect(ok["type"] == "command")
            #expect(ok["event"] == nil, "events are inside the signed payload, not beside it")
            let done = try await client.command(try #require(ok["payload"]?.stringValue), headers: headers)
            #expect(done.json == ["type": "done", "message": "Ordered red", "refresh": false])
        }
    }

    @Test("the flow's audience: a device-only flow refuses a user; a user flow refuses a device")
    func audience() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let user = try await client.command(
                TestFlows.startPayload("device-only", subject: "user:dan"), headers: try await userHeaders("dan"))
            #expect(user.status == .forbidden)
            let device = try await client.command(
                TestFlows.startPayload("counter", subject: "device:\(Self.device)"), headers: deviceHeaders(Self.device))
            #expect(device.status == .forbidden)
            let ok = try await client.command(TestFlows.startPayload("device-only", subject: "device:\(Self.device)"), headers: deviceHeaders(Self.device))
            #expect(ok.json["message"] == .string("Hello, device \(Self.device)"))
        }
    }

    @Test("bearer tokens: expired, not yet valid, wrong key and malformed are 401; X-Device-Id must be a UUID")
    func tokens() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let start = TestFlows.startPayload("counter", subject: "user:erin")
            let cases: [String] = [
                "Bearer " + (try await TestTokens.token("erin", expires: Date().addingTimeInterval(-300))),
                "Bearer " + (try await TestTokens.token("erin", notBefore: Date().addingTimeInterval(600))),
                "Bearer " + (try await TestTokens.token("erin", secret: "a-different-secret-entirely-0123")),
                "Bearer not.a.jwt", "Basic ZXJpbjpwdw==", "Bearer",
            ]
            for authorization in cases {
                let response = try await client.command(start, headers: [.authorization: authorization])
                #expect(response.status == .unauthorized, "\(authorization.prefix(30))")
                #expect(response.json["error"]?["code"] == "unauthenticated")
                #expect(response.headers[.wwwAuthenticate] == "Bearer")
            }
            let badDevice = try await client.command(start, headers: deviceHeaders("not-a-uuid"))
            #expect(badDevice.status == .badRequest)
            let good = try await client.command(start, headers: try await userHeaders("erin"))
            #expect(good.status == .ok)
            // Spaces and tabs around the token are HTTP's optional whitespace, not the token's.
            let spaced = try await client.command(start, headers: [.authorization: "Bearer \t " + (try await TestTokens.token("erin")) + "\t"])
            #expect(spaced.status == .ok)
        }
    }

    @Test("commands are counted by flow and outcome; sessions started and finished")
    func metrics() async throws {
        let environment = try await environment()
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let start = TestFlows.startPayload("note-create", subject: "device:\(Self.device)")
            let first = try await client.command(start, headers: headers)
            _ = try await client.command(start, headers: headers)
            _ = try await client.command(try #require(first.json.payload("cancel")), headers: headers)
            _ = try await client.command("garbage", headers: headers)
            let text = try await client.execute(uri: "/metrics", method: .get).text
            #expect(text.contains(#"baton_commands_total{flow="note-create",outcome="input"} 1"#))
            #expect(text.contains(#"baton_commands_total{flow="note-create",outcome="replayed"} 1"#))
            #expect(text.contains(#"baton_commands_total{flow="note-create",outcome="refresh"} 1"#))
            #expect(text.contains(#"baton_commands_total{flow="unknown",outcome="invalid"} 1"#))
            #expect(text.contains(#"baton_flow_sessions_started_total{flow="note-create"} 1"#))
            #expect(text.contains(#"baton_flow_sessions_finished_total{flow="note-create",result="cancelled"} 1"#))
            #expect(text.contains(#"baton_command_duration_seconds_count{flow="note-create"} 3"#))
        }
    }
}

/// A clock offset tests can move.
final class TimeOffset: Sendable {
    private let value = Mutex<TimeInterval>(0)
    var seconds: TimeInterval {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

extension Data {
    init?(base64URLEncoded text: String) {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        self.init(base64Encoded: base64)
    }

    var base64URLEncoded: String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
