import BatonBuiltinFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonScenarios
import BatonServer
import BatonTestSupport
import Foundation
import HTTPTypes
import HummingbirdTesting
import Synchronization
import Testing

/// Many phones against two replicas while connections are cut and PostgreSQL restarts: every
/// acknowledged write is stored exactly once, nothing is stored that no phone was told about
/// (phones retry until answered, as real ones do), and no request ever gets a 500.
///
/// Runs on a PostgreSQL cluster of its own (it restarts it). `BATON_CHAOS_SECONDS` makes the
/// storm longer (the figures in docs/operations.md come from a 60-second run).
@Suite("Chaos: phones, two replicas, cuts and a PostgreSQL restart")
struct ChaosTests {
    /// What the phones saw, for the report.
    final class Tally: Sendable {
        let counts = Mutex<[String: Int]>([:])
        func add(_ key: String, _ amount: Int = 1) { counts.withLock { $0[key, default: 0] += amount } }
        subscript(key: String) -> Int { counts.withLock { $0[key, default: 0] } }
    }

    @Test("every acknowledged playlist is stored exactly once, none unacknowledged, zero 500s")
    func storm() async throws {
        let seconds = Double(ProcessInfo.processInfo.environment["BATON_CHAOS_SECONDS"] ?? "") ?? 15
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-chaos-\(UUID().uuidString.prefix(8))")
        let port = try FreePort.find()
        let cluster = EmbeddedPostgres(
            configuration: .init(
                directory: directory, databaseName: "chaos",
                settings: ["fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "100"],
                port: port, tcpLoopback: true))
        let conninfo = try cluster.start()
        defer {
            try? cluster.forceStop()
            try? FileManager.default.removeItem(at: directory)
        }
        let admin = PostgresPool(configuration: .administrative(conninfo: conninfo))
        try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(on: admin)
        _ = try await admin.withConnection { try await DemoData.seed($0) }

        let proxies = [try await FaultProxy(upstreamHost: "127.0.0.1", upstreamPort: port), try await FaultProxy(upstreamHost: "127.0.0.1", upstreamPort: port)]
        var replicas: [BatonEnvironment] = []
        for proxy in proxies {
            replicas.append(
                try await TestApplication.environment(
                    conninfo: try TestDatabase.conninfo(conninfo, via: "127.0.0.1", port: proxy.port), flows: BuiltinFlowsTests.flows,
                    registry: BuiltinFlowsTests.registry(), configure: FaultTests.productionDeadlines))
        }
        let tally = Tally()
        let acknowledged = Tally()  // "owner/name" → done answers received
        let phones = 24
        let stop = ContinuousClock.now + .milliseconds(Int(seconds * 1000))

        let (a, b) = (replicas[0], replicas[1])
        try await buildApplication(a).test(.router) { first in
            try await buildApplication(b).test(.router) { second in
                let clients: [any TestClientProtocol] = [first, second]
                /// Sends a request to a random replica until it is answered (not 503, not a transport error).
                @Sendable func send(_ build: @Sendable (any TestClientProtocol) async throws -> TestResponse) async throws -> TestResponse {
                    let deadline = ContinuousClock.now + .seconds(60)
                    while true {
                        let client = clients.randomElement()!
                        tally.add("requests")
                        do {
                            let response = try await build(client)
                            if response.status.code >= 500, response.status != .serviceUnavailable { tally.add("500s") }
                            if response.status != .serviceUnavailable { return response }
                            tally.add("503s")
                        } catch {
                            tally.add("transport errors")
                        }
                        guard ContinuousClock.now < deadline else { throw TestFailure("a request was not answered within 60 s") }
                        try await Task.sleep(for: .milliseconds(Int.random(in: 50...250)))
                    }
                }

                // The storm: cuts on either proxy, and one restart of PostgreSQL in the middle.
                let chaos = Task {
                    var restarted = false
                    let begin = ContinuousClock.now
                    while ContinuousClock.now < stop {
                        try await Task.sleep(for: .milliseconds(Int.random(in: 700...1500)))
                        try proxies.randomElement()!.send("cut")
                        tally.add("connection cuts")
                        if !restarted, ContinuousClock.now - begin > .milliseconds(Int(seconds * 400)) {
                            try cluster.forceStop()
                            try await Task.sleep(for: .milliseconds(500))
                            _ = try cluster.start()
                            restarted = true
                            tally.add("PostgreSQL restarts")
                        }
                    }
                }

                try await withThrowingTaskGroup(of: Void.self) { group in
                    for phone in 0..<phones {
                        group.addTask {
                            let user = "phone-\(phone)"
                            let headers = try await userHeaders(user)
                            var index = 0
                            while ContinuousClock.now < stop {
                                index += 1
                                let name = "p\(phone)-\(index)"
                                let home = try await send { try await $0.execute(uri: "/v3/screens/home", method: .get, headers: headers) }
                                let start = try #require(ScenarioRunner.payload(titled: "New playlist", in: home.json))
                                let ask = try await send { try await $0.command(start, headers: headers) }
                                guard let submit = ask.json.payload("submit") else {
                                    Issue.record("no input for \(name): \(ask.text)")
                                    continue
                                }
                                // Every third create is double-tapped: two identical submits at once.
                                let copies = index % 3 == 0 ? 2 : 1
                                let answers = try await withThrowingTaskGroup(of: TestResponse.self) { taps in
                                    for _ in 0..<copies {
                                        taps.addTask { try await send { try await $0.command(submit, input: ["text": .string(name)], headers: headers) } }
                                    }
                                    return try await taps.reduce(into: []) { $0.append($1) }
                                }
                                for answer in answers {
                                    tally.add("commands answered")
                                    if answer.headers[.idempotentReplay] == "true" { tally.add("replays") }
                                    if answer.json == ["type": "done", "message": .string("Created “\(name)”"), "refresh": true] {
                                        acknowledged.add("user:\(user)/\(name)")
                                    } else {
                                        tally.add("other answers")
                                        Issue.record("\(name): \(answer.status) \(answer.text)")
                                    }
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                try await chaos.value
            }
        }

        // What the database holds, against what the phones were told.
        let rows = try await admin.withConnection { connection in
            try await connection.query("SELECT owner, name, count(*) FROM playlists WHERE owner LIKE 'user:phone-%' GROUP BY owner, name")
                .map { ("\(try $0.decode(String.self, at: 0))/\(try $0.decode(String.self, at: 1))", try $0.decode(Int.self, at: 2)) }
        }
        let stored = Dictionary(uniqueKeysWithValues: rows)
        let acks = acknowledged.counts.withLock { $0 }
        #expect(stored.values.allSatisfy { $0 == 1 }, "a playlist stored twice")
        #expect(Set(stored.keys) == Set(acks.keys), "stored but never acknowledged: \(Set(stored.keys).subtracting(acks.keys)); acknowledged but not stored: \(Set(acks.keys).subtracting(stored.keys))")
        #expect(tally["500s"] == 0)
        #expect(tally["PostgreSQL restarts"] == 1)
        let effects = try await admin.query("SELECT count(*) FROM command_log WHERE event = 'submit' AND outcome = 'done'")[0].decode(Int.self, at: 0)
        #expect(effects == stored.count, "one logged submit per playlist")
        let report = [
            "phones": phones, "seconds": Int(seconds), "playlists acknowledged": acks.count, "playlists stored": stored.count,
            "requests": tally["requests"], "503s": tally["503s"], "transport errors": tally["transport errors"],
            "commands answered": tally["commands answered"], "replays": tally["replays"], "500s": tally["500s"],
            "connection cuts": tally["connection cuts"], "PostgreSQL restarts": tally["PostgreSQL restarts"],
        ]
        print("chaos report: " + report.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))
        await admin.close()
    }
}
