import BatonBuiltinFlows
import BatonFlows
import BatonJSON
import BatonPostgres
@testable import BatonRuntime
import Logging
import BatonScenarios
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Synchronization
import Testing

/// Issue 11's scenarios, as a phone produces them: stale screens, retries with other input,
/// retries after expiry, deep links retried with an idempotency key. Over HTTP, against the
/// built-in flows, the demo data and real PostgreSQL.
@Suite("Exactly once: the request is the identity")
struct ExactlyOnceTests {
    static let outOfDate: JSONValue = ["type": "refresh", "message": "This screen was out of date and has been refreshed."]

    func environment(clock: @escaping @Sendable () -> Date = { Date() }) async throws -> BatonEnvironment {
        let environment = try await TestApplication.environment(
            flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry(), clock: clock)
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        return environment
    }

    func count(_ pool: PostgresPool, _ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> Int {
        try await pool.query(sql, parameters)[0].decode(Int.self, at: 0)
    }

    func action(_ answer: JSONValue, titled title: String) throws -> String {
        try #require(ScenarioRunner.payload(titled: title, in: answer), "no action titled \(title) in \(answer)")
    }

    @Test("Home and Playlists both offer New playlist: creating from each creates both, never the other's reply")
    func staleStartScreens() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("alice")
            // Both screens are rendered before anything is created (Home lower in the stack).
            let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
            let playlists = try await client.execute(uri: "/v3/screens/playlists", method: .get, headers: headers).json
            let fromHome = try action(home, titled: "New playlist")
            let fromPlaylists = try action(playlists, titled: "New playlist")
            #expect(fromHome != fromPlaylists, "each rendered start action is its own instance")

            let ask = try await client.command(fromPlaylists, headers: headers).json
            let roadTrip = try await client.command(try action(ask, titled: "submit"), input: ["text": "Road trip"], headers: headers)
            #expect(roadTrip.json == ["type": "done", "message": "Created “Road trip”", "refresh": true])

            let askAgain = try await client.command(fromHome, headers: headers)
            #expect(askAgain.headers[.idempotentReplay] == nil)
            #expect(askAgain.json["type"] == "input")
            let gym = try await client.command(try action(askAgain.json, titled: "submit"), input: ["text": "Gym"], headers: headers)
            #expect(gym.json == ["type": "done", "message": "Created “Gym”", "refresh": true])
            #expect(gym.headers[.idempotentReplay] == nil)
            let names = try await environment.pool.query("SELECT name FROM playlists WHERE owner = 'user:alice' ORDER BY name")
                .map { try $0.decode(String.self, at: 0) }
            #expect(names == ["Gym", "Road trip"])

            // A double tap on one button still finds the one session it started.
            let twice = try await client.command(fromHome, headers: headers)
            #expect(twice.json == Self.outOfDate, "that session has moved past its first answer")
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions WHERE subject = 'user:alice'") == 2)
        }
    }

    @Test("a double tap on one start action starts one session and both taps get its first answer")
    func doubleTapStart() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("bob")
            let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
            let start = try action(home, titled: "New playlist")
            let first = try await client.command(start, headers: headers)
            let second = try await client.command(start, headers: headers)
            #expect(Array(buffer: second.body) == Array(buffer: first.body))
            #expect(second.headers[.idempotentReplay] == "true")
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 1)
        }
    }

    @Test("Scan & Go: drop off parcel 1, leave the receipt open, tap Drop off here again: parcel 2 is registered")
    func scanAndGoSecondParcel() async throws {
        let environment = try await environment()
        let device = "4b5c6d7e-8f90-4a1b-8c2d-3e4f5a6b7c8d"
        var headers = deviceHeaders(device)
        headers[HTTPField.Name("X-Client-Platform")!] = "appclip"
        headers[HTTPField.Name("X-Client-Capabilities")!] = "barcode_scanner"
        let appClip = headers
        try await buildApplication(environment).test(.router) { client in
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: appClip).json
            let dropOffHere = try action(parcels, titled: "Drop off here")
            func dropOff(_ start: String, label: String) async throws -> JSONValue {
                let scan = try await client.command(start, headers: appClip).json
                let confirm = try await client.command(try action(scan, titled: "Use this code"), input: ["barcode": .string(label)], headers: appClip).json
                #expect(confirm["screen"]?["id"] == "confirm", "\(confirm)")
                return try await client.command(try action(confirm, titled: "Confirm drop-off"), headers: appClip).json
            }
            let first = try await dropOff(dropOffHere, label: "3SDEMO0000001")
            #expect(first["screen"]?["id"] == "receipt")
            // The same button again, from the screen still showing: it is out of date, and says so.
            let again = try await client.command(dropOffHere, headers: appClip)
            #expect(again.json == Self.outOfDate)
            #expect(again.headers[.idempotentReplay] == nil)
            // The refreshed screen's button starts a new drop-off; parcel 2 is registered.
            let refreshed = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: appClip).json
            let second = try await dropOff(try action(refreshed, titled: "Drop off here"), label: "3SDEMO0000002")
            #expect(second["screen"]?["id"] == "receipt")
            let labels = try await environment.pool.query("SELECT label FROM dropoffs ORDER BY label").map { try $0.decode(String.self, at: 0) }
            #expect(labels == ["3SDEMO0000001", "3SDEMO0000002"])
        }
    }

    @Test("an old submit payload with another text is stale and changes nothing; the identical request gets the stored bytes")
    func otherInputOnTakenStep() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("carol")
            let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
            let ask = try await client.command(try action(home, titled: "New playlist"), headers: headers).json
            let submit = try action(ask, titled: "submit")
            let created = try await client.command(submit, input: ["text": "Road trip"], headers: headers)
            let other = try await client.command(submit, input: ["text": "Gym"], headers: headers)
            #expect(other.json == Self.outOfDate)
            #expect(other.headers[.idempotentReplay] == nil)
            let same = try await client.command(submit, input: ["text": "Road trip"], headers: headers)
            #expect(Array(buffer: same.body) == Array(buffer: created.body))
            #expect(same.headers[.idempotentReplay] == "true")
            #expect(try await count(environment.pool, "SELECT count(*) FROM playlists WHERE owner = 'user:carol'") == 1)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_commands_total{flow="playlist-create",outcome="stale"} 1"#))
            #expect(metrics.contains(#"baton_commands_total{flow="playlist-create",outcome="replayed"} 1"#))
        }
    }

    @Test("a confirm that committed, retried after its payload expired, gets its receipt; an unprocessed one gets payload_expired")
    func expiredButProcessed() async throws {
        let offset = Mutex<TimeInterval>(0)
        let environment = try await environment(clock: { Date().addingTimeInterval(offset.withLock { $0 }) })
        let device = "5c6d7e8f-9a0b-4c1d-8e2f-3a4b5c6d7e8f"
        let headers = deviceHeaders(device)
        try await buildApplication(environment).test(.router) { client in
            let parcels = try await client.execute(uri: "/v3/screens/send-parcel", method: .get, headers: headers).json
            let scan = try await client.command(try action(parcels, titled: "Drop off here"), headers: headers).json
            let confirm = try await client.command(try action(scan, titled: "Use this code"), input: ["text": "3SDEMO0000003"], headers: headers).json
            let cancel = try action(confirm, titled: "Cancel")
            let confirmPayload = try action(confirm, titled: "Confirm drop-off")
            let receipt = try await client.command(confirmPayload, headers: headers)
            #expect(receipt.json["screen"]?["id"] == "receipt")

            // Two hours on, the session and its payloads have long expired.
            offset.withLock { $0 = 2 * 3600 }
            let retried = try await client.command(confirmPayload, headers: headers)
            #expect(Array(buffer: retried.body) == Array(buffer: receipt.body))
            #expect(retried.headers[.idempotentReplay] == "true")
            let unprocessed = try await client.command(cancel, headers: headers)
            #expect(unprocessed.json["code"] == "payload_expired")
            #expect(try await count(environment.pool, "SELECT count(*) FROM dropoffs WHERE label = '3SDEMO0000003'") == 1)

            // "Start again" keeps the flow's parameters: it opens the scanner at the same location.
            let restart = try action(unprocessed.json, titled: "Start again")
            let restarted = try await client.command(restart, headers: headers)
            #expect(restarted.status == .ok)
            #expect(restarted.json["screen"]?["id"] == "scan", "\(restarted.json)")
        }
    }

    @Test("deep-link resolve with one Idempotency-Key: one session; another body is 422; a key in flight is 409")
    func deepLinkIdempotency() async throws {
        let environment = try await environment()
        let device = "6d7e8f90-a1b2-4c3d-8e4f-5a6b7c8d9e0f"
        var headers = deviceHeaders(device)
        headers[HTTPField.Name("X-Client-Platform")!] = "appclip"
        headers[.contentType] = "application/json"
        let linkHeaders = headers
        try await buildApplication(environment).test(.router) { client in
            func resolve(_ url: String, key: String?) async throws -> TestResponse {
                var withKey = linkHeaders
                if let key { withKey[HTTPField.Name("Idempotency-Key")!] = key }
                return try await client.execute(
                    uri: "/v3/deeplinks/resolve", method: .post, headers: withKey,
                    body: ByteBuffer(bytes: JSONEncoding.encode(["url": .string(url)])))
            }
            let link = "exampleapp://scan-and-go?location=UT-0001"
            let first = try await resolve(link, key: "tap-1")
            #expect(first.json["screen"]?["id"] == "scan")
            let retry = try await resolve(link, key: "tap-1")
            #expect(Array(buffer: retry.body) == Array(buffer: first.body))
            #expect(retry.headers[.idempotentReplay] == "true")
            // The draft sends the key as a structured-field string: `"tap-1"` is the key tap-1.
            let quoted = try await resolve(link, key: #""tap-1""#)
            #expect(Array(buffer: quoted.body) == Array(buffer: first.body))
            #expect(quoted.headers[.idempotentReplay] == "true")
            for malformed in [#""tap-1"#, #""a\zb""#, #""""#, #""a"b""#] {
                #expect(try await resolve(link, key: malformed).status == .badRequest, "\(malformed)")
            }
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 1)

            let reused = try await resolve("exampleapp://scan-and-go?location=UT-0002", key: "tap-1")
            #expect(reused.status == .unprocessableContent)
            #expect(reused.json["error"]?["code"] == "idempotency_key_reused")

            // While the key's first request holds it, a second one is told to come back.
            let holder = PostgresPool(configuration: .init(conninfo: environment.pool.configuration.conninfo, maxConnections: 1))
            try await holder.query("SELECT pg_advisory_lock(hashtextextended($1, 7))", ["device:\(device)\u{1F}tap-2"])
            let busy = try await resolve(link, key: "tap-2")
            #expect(busy.status == .conflict)
            #expect(busy.headers[.retryAfter] == "1")
            #expect(busy.json["error"]?["code"] == "conflict")
            await holder.close()
            // The holder's backend releases its lock when it has processed the disconnect, a
            // moment after the client closed: wait for that, not for a fixed time.
            for _ in 0..<250 where try await count(environment.pool, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") > 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            let free = try await resolve(link, key: "tap-2")
            #expect(free.json["screen"]?["id"] == "scan", "\(free.status) \(free.json)")

            let bad = try await resolve(link, key: String(repeating: "k", count: 300))
            #expect(bad.status == .badRequest)
            // Without a key every resolve is a new session.
            _ = try await resolve(link, key: nil)
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 3)
        }
    }

    @Test("screen ETags ignore the payloads' nonces but not what the screen shows")
    func etagsMaskNonces() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("dave")
            let one = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers)
            let two = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers)
            #expect(one.text != two.text)
            #expect(one.headers[.eTag] == two.headers[.eTag])
            var conditional = headers
            let etag: String = try #require(one.headers[.eTag])
            conditional[.ifNoneMatch] = etag
            #expect(try await client.execute(uri: "/v3/screens/home", method: .get, headers: conditional).status == .notModified)
            let other = try await client.execute(uri: "/v3/screens/home", method: .get, headers: try await userHeaders("erin"))
            #expect(other.headers[.eTag] != one.headers[.eTag], "another subject's payloads differ in more than nonces")
        }
    }

    @Test("HEAD of a screen answers as its GET does, with the same ETag and length, without the body")
    func headOfScreen() async throws {
        let environment = try await environment()
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("dave")
            let get = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers)
            let head = try await client.execute(uri: "/v3/screens/home", method: .head, headers: headers)
            #expect(head.status == .ok)
            #expect(head.headers[.eTag] == get.headers[.eTag])
            #expect(head.headers[.contentLength] == String(get.body.readableBytes))
            #expect(head.body.readableBytes == 0)
            var conditional = headers
            let etag: String = try #require(get.headers[.eTag])
            conditional[.ifNoneMatch] = etag
            #expect(try await client.execute(uri: "/v3/screens/home", method: .head, headers: conditional).status == .notModified)
        }
    }
}

@Suite("Errors from every entry point map to 4xx in one place")
struct ErrorMappingTests {
    @Test("guards, loaders and database data errors become 4xx; unavailability and bugs are left to the server")
    func oneMapping() {
        let notFound = FlowRuntime.commandError(FlowCallError.notFound("no such playlist"), flow: "x")
        #expect(notFound?.wire.status == 404)
        #expect(FlowRuntime.commandError(FlowCallError.forbidden("not yours"), flow: nil)?.wire.status == 403)
        for sqlState in ["22P02", "22001", "23505", "23503", "23514"] {
            let error = PostgresError(code: .server, sqlState: sqlState, message: "invalid input syntax for type uuid: \"secret\"")
            let mapped = FlowRuntime.commandError(error, flow: "x")
            #expect(mapped?.wire.code == "invalid_request", "\(sqlState)")
            #expect(mapped?.message.contains("secret") == false, "the client never sees the row value or input")
        }
        #expect(FlowRuntime.commandError(PostgresError(code: .connectionLost, message: "gone"), flow: nil) == nil)
        #expect(FlowRuntime.commandError(FlowEngineError(kind: .definition, message: "bug"), flow: nil) == nil)
    }

    @Test("a deep link whose screen loader refuses its parameter answers 4xx with the envelope, never 500; one its screen's pattern refuses is a refused link")
    func deepLinkLoaderError() async throws {
        let environment = try await TestApplication.environment(flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        var headers = try await userHeaders("frank")
        headers[.contentType] = "application/json"
        headers[HTTPField.Name("X-Client-Platform")!] = "ios"
        let linkHeaders = headers
        try await buildApplication(environment).test(.router) { client in
            func resolve(_ url: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v3/deeplinks/resolve", method: .post, headers: linkHeaders,
                    body: ByteBuffer(bytes: JSONEncoding.encode(["url": .string(url)])))
            }
            // No such playlist: the loader's 404.
            let missing = try await resolve("exampleapp://playlist/11111111-0000-4000-8000-0000000000ff")
            #expect(missing.status == .notFound, "\(missing.status) \(missing.text)")
            #expect(missing.json["error"]?["code"] == "not_found")
            // Not a UUID, which the allowlist's pattern lets through: refused as a link (DeepLinkTests).
            let malformed = try await resolve("exampleapp://playlist/not-a-uuid")
            #expect(malformed.status == .ok, "\(malformed.status) \(malformed.text)")
            #expect(malformed.json["code"] == "link_not_allowed" && malformed.json["reason"] == "parameter_invalid", "\(malformed.text)")
        }
    }
}

@Suite("FlowDatabase: effects never control the transaction")
struct FlowDatabaseTests {
    @Test("BEGIN, COMMIT, ROLLBACK, SAVEPOINT and session-wide SET are refused, also sent ahead; queries and SET LOCAL pass")
    func refusesTransactionControl() async throws {
        var registry = FlowRegistry()
        let attempts = ["COMMIT", "  rollback", "/* x */ BEGIN", "-- c\nEND", "SAVEPOINT a", "SET statement_timeout = 0", "discard all"]
        registry.effect("probe.control", outcomes: ["refused"]) { call in
            for sql in attempts {
                do {
                    try await call.database.query(sql)
                    throw FlowCallError.invalid("'\(sql)' was allowed")
                } catch let error as FlowCallError where error.message.contains("may not use") {}
                do {
                    _ = try call.database.sendAhead(sql)
                    throw FlowCallError.invalid("'\(sql)' was allowed ahead")
                } catch let error as FlowCallError where error.message.contains("may not use") {}
            }
            try await call.database.query("SET LOCAL statement_timeout = '2s'")
            let inside = try await call.database.savepoint { database in
                try await database.query("SELECT 1")[0].decode(Int.self, at: 0)
            }
            return EffectResult("refused", ["inside": .int(inside)])
        }
        let pool = try await TestDatabase.makePool(migrated: true)
        let effects = registry
        let result = try await pool.withTransaction { connection in
            try await DatabaseFlowHost(registry: effects, connection: connection, logger: Logger(label: "test")).runEffect(
                "probe.control", arguments: [:], call: FlowCall(subject: FlowSubject(kind: .user, id: "t"), flow: "", sessionID: nil))
        }
        #expect(result.outcome == "refused")
        #expect(result.data["inside"] == 1)
        await pool.close()
    }
}

@Suite("FlowDatabase: what counts as transaction control")
struct TransactionControlTests {
    @Test("read as PostgreSQL's lexer reads it: nested comments, CR LF, SET LOCAL only as a word, non-ASCII words no keyword")
    func lexesLikePostgreSQL() {
        let refused: [(String, String)] = [
            ("COMMIT", "COMMIT"), ("  rollback;", "ROLLBACK"), ("\t\r\n\u{0B}\u{0C}begin", "BEGIN"),
            ("-- c\r\nEND", "END"), ("-- a comment ends at a CR too\rCOMMIT", "COMMIT"), ("/* a */ /* b */ savepoint x", "SAVEPOINT"),
            // The comment nests: "SELECT" is inside it, COMMIT is the statement.
            ("/* outer /* inner */ SELECT */ COMMIT", "COMMIT"),
            ("SET statement_timeout = 0", "SET"), ("SET LOCALS = 1", "SET"), ("set session x = 1", "SET"),
            ("DISCARD ALL", "DISCARD"), ("deallocate all", "DEALLOCATE"), ("LISTEN x", "LISTEN"),
        ]
        for (sql, keyword) in refused {
            #expect(FlowDatabase.transactionControl(sql) == keyword, "\(sql.debugDescription)")
        }
        let passed = [
            "SELECT 1", "", "   ", "-- only a comment", "/* unterminated BEGIN", "SET LOCAL statement_timeout = '2s'",
            "set /* c */ local lock_timeout = 1", "BEGIN_WORK", "\"BEGIN\"", "1BEGIN", "BEGINé", "\u{A0}BEGIN",
            "with x as (select 1) select * from x", "INSERT INTO t VALUES ('COMMIT')",
        ]
        for sql in passed {
            #expect(FlowDatabase.transactionControl(sql) == nil, "\(sql.debugDescription)")
        }
    }
}
