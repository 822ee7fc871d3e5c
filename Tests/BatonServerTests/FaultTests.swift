import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import Testing

/// What a phone sees when the database misbehaves: a silent network, a COMMIT whose answer is
/// lost. Real PostgreSQL, real HTTP stack, faults injected on the wire.
@Suite("Faults between Baton and PostgreSQL")
struct FaultTests {
    static let device = "3e4f5a6b-7c8d-4e9f-8a0b-1c2d3e4f5a6b"

    /// Production deadlines (the test defaults are generous for a loaded suite).
    static func productionDeadlines(_ configuration: inout BatonConfiguration) {
        configuration.databaseTimeout = .seconds(5)
        configuration.statementTimeout = .seconds(4)
        configuration.requestTimeout = .seconds(10)
    }

    func count(_ pool: PostgresPool, _ sql: String) async throws -> Int {
        try await pool.query(sql)[0].decode(Int.self, at: 0)
    }

    @Test("blackholed database: a command answers 503 with Retry-After within 6 s, later ones at once; after the network returns the same command succeeds once")
    func blackholedCommand() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let address = try await TestDatabase.tcpAddress()
        let proxy = try await FaultProxy(upstreamHost: address.host, upstreamPort: address.port)
        let direct = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        try await TestFlows.prepare(direct)
        let environment = try await TestApplication.environment(
            conninfo: try TestDatabase.conninfo(conninfo, via: "127.0.0.1", port: proxy.port), flows: TestFlows.directory,
            registry: TestFlows.registry(), configure: Self.productionDeadlines)
        try await buildApplication(environment).test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let ask = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let submit = try #require(ask.json.payload("submit"))

            try proxy.send("blackhole")
            let started = ContinuousClock.now
            let stuck = try await client.command(submit, input: ["text": "during the outage"], headers: headers)
            let took = ContinuousClock.now - started
            #expect(stuck.status == .serviceUnavailable)
            #expect(stuck.headers[.retryAfter] != nil)
            #expect(stuck.json["error"]?["code"] == "unavailable")
            #expect(took < .seconds(6), "answered after \(took)")
            #expect(environment.pool.statistics.isFailingFast, "\(environment.pool.statistics) \(stuck.text)")
            for _ in 0..<3 {
                let fast = ContinuousClock.now
                let again = try await client.command(submit, input: ["text": "during the outage"], headers: headers)
                #expect(again.status == .serviceUnavailable)
                #expect(ContinuousClock.now - fast < .seconds(1), "\(again.text)")
            }
            let ready = try await client.execute(uri: "/readyz", method: .get, headers: [:])
            #expect(ready.status == .serviceUnavailable)
            // What an operator sees: the pool failing fast, once begun, after calls were cut.
            let metrics = try await client.execute(uri: "/metrics", method: .get, headers: [:]).text
            func sample(_ name: String) -> Double? { ObservabilityTests.samples(metrics).first { $0.name == name }?.value }
            #expect(sample("baton_db_pool_failing_fast") == 1, "\(metrics)")
            #expect(sample("baton_db_pool_fail_fast_starts_total") == 1)
            #expect((sample("baton_db_pool_deadline_expiries_total") ?? 0) >= 1)

            try proxy.send("up")
            let back = ContinuousClock.now
            var done: TestResponse?
            while done == nil, ContinuousClock.now - back < .seconds(5) {
                let response = try await client.command(submit, input: ["text": "during the outage"], headers: headers)
                if response.status == .ok { done = response } else { try await Task.sleep(for: .milliseconds(100)) }
            }
            let answer = try #require(done, "no service within 5 s after the network came back")
            // The session row was not left locked, and the note was written exactly once.
            #expect(answer.json["type"] == "done")
            #expect(try await count(direct, "SELECT count(*) FROM test_notes WHERE text = 'during the outage'") == 1)
            #expect(try await count(direct, "SELECT count(*) FROM test_effect_runs WHERE effect = 'notes.create'") == 1)
        }
        await direct.close()
    }

    @Test("a COMMIT whose answer is lost is not run again: the first delivery is not a replay, the effect ran once, counted once")
    func ambiguousCommit() async throws {
        let faults = PostgresFaults()
        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry(), faults: faults)
        try await TestFlows.prepare(environment.pool)
        try await buildApplication(environment).test(.router) { client in
            let headers = deviceHeaders(Self.device)
            let ask = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            let submit = try #require(ask.json.payload("submit"))
            faults.cutAfterNextCommit()
            let first = try await client.command(submit, input: ["text": "lost answer"], headers: headers)
            #expect(faults.commitsCut == 1)
            #expect(first.status == .ok)
            #expect(first.json == ["type": "done", "message": "Saved “lost answer”", "refresh": true])
            #expect(first.headers[.idempotentReplay] == nil, "the first delivery is not a replay")
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_effect_runs WHERE effect = 'notes.create'") == 1)
            #expect(try await count(environment.pool, "SELECT count(*) FROM test_notes") == 1)
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_commands_total{flow="note-create",outcome="done"} 1"#))
            #expect(metrics.contains(#"baton_commands_total{flow="note-create",outcome="replayed"} 0"#))
            #expect(metrics.contains(#"baton_flow_sessions_finished_total{flow="note-create",result="completed"} 1"#))
            // A retry by the client is a replay, as it should be.
            let retry = try await client.command(submit, input: ["text": "lost answer"], headers: headers)
            #expect(Array(buffer: retry.body) == Array(buffer: first.body))
            #expect(retry.headers[.idempotentReplay] == "true")

            // A start whose COMMIT answer is lost: one session, its first answer delivered once.
            faults.cutAfterNextCommit()
            let start = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(Self.device)"), headers: headers)
            #expect(start.json["type"] == "input")
            #expect(start.headers[.idempotentReplay] == nil)
            #expect(try await count(environment.pool, "SELECT count(*) FROM flow_sessions") == 2)
        }
    }
}
