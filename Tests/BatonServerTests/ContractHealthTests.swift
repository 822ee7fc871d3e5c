import BatonBuiltinFlows
@testable import BatonContract
import BatonJSON
import BatonPostgres
@testable import BatonServer
import BatonTestSupport
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import HTTPTypes
import HummingbirdTesting
import Logging
import ServiceLifecycle
import Testing

/// The daily contract-health rollup: batched, additive from several replicas, nothing lost on
/// shutdown, and the report read from it.
@Suite("Contract health rollup")
struct ContractHealthTests {
    /// Counts every row write to `contract_health_daily`, per bucket, with a trigger.
    static func countWrites(_ pool: PostgresPool) async throws {
        try await pool.withConnection { db in
            try await db.execute(
                """
                CREATE TABLE rollup_writes (day date, platform text, contract integer, app_version text);
                CREATE FUNCTION count_rollup_write() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                    INSERT INTO rollup_writes VALUES (NEW.day, NEW.platform, NEW.contract, NEW.app_version);
                    RETURN NEW;
                END $$;
                CREATE TRIGGER count_rollup_writes AFTER INSERT OR UPDATE ON contract_health_daily
                    FOR EACH ROW EXECUTE FUNCTION count_rollup_write();
                """)
        }
    }

    static func totals(_ pool: PostgresPool) async throws -> [String: [Int]] {
        let rows = try await pool.query(
            """
            SELECT platform || ' ' || contract || ' ' || app_version, sum(requests)::bigint, sum(components_rendered)::bigint,
                   sum(fallback_hits)::bigint, sum(omissions)::bigint, sum(unsupported)::bigint
            FROM contract_health_daily GROUP BY 1
            """)
        var totals: [String: [Int]] = [:]
        for row in rows { totals[try row.decode(String.self, at: 0)] = try (1...5).map { try row.decode(Int.self, at: $0) } }
        return totals
    }

    static func report(rendered: Int, hits: Int = 0, omitted: Int = 0) -> FitReport {
        var report = FitReport()
        report.rendered = rendered
        for _ in 0..<hits { report.hit("richText", "text") }
        for _ in 0..<omitted { report.omit("badge", .capability) }
        return report
    }

    @Test("under load two replicas write at most once per bucket per flush, and their counts add up exactly, the last ones on shutdown")
    func batchedAndLossless() async throws {
        let pool = try await TestDatabase.makePool(migrated: true)
        try await Self.countWrites(pool)
        let replicas = [ContractHealthRollup(), ContractHealthRollup()]
        let platforms = ["ios", "android", "web"]
        let perTask = 1_500
        let tasksPerReplica = 4
        try await withThrowingTaskGroup(of: Void.self) { group in
            var groups: [ServiceGroup] = []
            for rollup in replicas {
                let service = ContractHealthService(rollup: rollup, pool: pool, interval: .milliseconds(100), logger: Logger(label: "test"))
                let serviceGroup = ServiceGroup(services: [service], logger: Logger(label: "test"))
                groups.append(serviceGroup)
                group.addTask { try await serviceGroup.run() }
            }
            // Requests arrive for about a second, across many flush intervals.
            try await withThrowingTaskGroup(of: Void.self) { load in
                for rollup in replicas {
                    for task in 0..<tasksPerReplica {
                        load.addTask {
                            for index in 0..<perTask {
                                rollup.record(
                                    Self.report(rendered: 10, hits: index % 2, omitted: index % 3 == 0 ? 1 : 0),
                                    platform: platforms[(task + index) % 3], contract: "2", appVersion: "4.1")
                                if index % 50 == 0 { try await Task.sleep(for: .milliseconds(25)) }
                            }
                        }
                    }
                }
                try await load.waitForAll()
            }
            // The last counts are written by the graceful shutdown, not lost with the process.
            for serviceGroup in groups { await serviceGroup.triggerGracefulShutdown() }
            try await group.waitForAll()
        }
        for rollup in replicas { #expect(rollup.unflushed.isEmpty) }
        let recorded = 2 * tasksPerReplica * perTask
        let totals = try await Self.totals(pool)
        #expect(totals.count == 3)
        #expect(totals.values.map { $0[0] }.reduce(0, +) == recorded)
        #expect(totals.values.map { $0[1] }.reduce(0, +) == recorded * 10)
        #expect(totals.values.map { $0[2] }.reduce(0, +) == recorded / 2)
        #expect(totals.values.map { $0[3] }.reduce(0, +) == 2 * tasksPerReplica * ((perTask + 2) / 3))
        let flushes = replicas.map(\.flushes).reduce(0, +)
        #expect(flushes >= 4, "the load should span several intervals; flushes: \(flushes)")
        // By bucket, the day included: a run across midnight (UTC) writes each platform's counts
        // under two days, in one flush (it failed so once, at 00:00:20).
        let writes = try await pool.query("SELECT platform || ' ' || day, count(*)::bigint FROM rollup_writes GROUP BY platform, day")
        for row in writes {
            let (bucket, count) = (try row.decode(String.self, at: 0), try row.decode(Int.self, at: 1))
            #expect(count <= flushes, "\(bucket): \(count) writes for \(flushes) flushes")
        }
        #expect(try writes.map { try $0.decode(Int.self, at: 1) }.reduce(0, +) < recorded / 50)
        await pool.close()
    }

    @Test("a flush that fails keeps its counts for the next one")
    func failedFlushKeepsCounts() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let rollup = ContractHealthRollup()
        rollup.record(Self.report(rendered: 7, hits: 2), platform: "ios", contract: "1", appVersion: "3.0")
        let closed = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        await closed.close()
        await #expect(throws: (any Error).self) { try await rollup.flush(to: closed) }
        rollup.recordUnsupported(platform: "ios", contract: "1", appVersion: "3.0")
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        #expect(try await rollup.flush(to: pool) == 1)
        #expect(try await Self.totals(pool) == ["ios 1 3.0": [1, 7, 2, 0, 1]])
        await pool.close()
    }

    @Test("screens served over HTTP land in the rollup with the same figures as the Prometheus counters")
    func matchesCounters() async throws {
        let flows = TestDatabase.repositoryRoot.appendingPathComponent("Flows")
        let environment = try await TestApplication.environment(flows: flows, registry: BuiltinFlowsTests.registry())
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            for (platform, contract, version) in [("ios", 1, "2.0.1"), ("ios", 3, "3.4.0"), ("android", 2, "3.1.9")] {
                var headers = deviceHeaders("6f1e2d3c-4b5a-4987-8654-3210fedcba98")
                headers[HTTPField.Name("X-Client-Platform")!] = platform
                headers[HTTPField.Name("X-Client-Version")!] = version
                for screen in ["catalog", "send-parcel", "home"] {
                    let response = try await client.execute(uri: "/v\(contract)/screens/\(screen)", method: .get, headers: headers)
                    #expect(response.status == .ok)
                }
            }
            try await environment.metrics.contractHealth.flush(to: environment.pool)
            try await expectRollupMatchesCounters(environment)
        }
    }

    /// Each bucket's rollup row equals the sum of its Prometheus series.
    func expectRollupMatchesCounters(_ environment: BatonEnvironment) async throws {
        let metrics = String(decoding: environment.metrics.render(), as: UTF8.self)
        func counter(_ family: String, platform: String, contract: Int) -> Int {
            metrics.split(separator: "\n").filter {
                $0.hasPrefix(family + "{") && $0.contains("platform=\"\(platform)\"") && $0.contains("contract=\"\(contract)\"")
            }.compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
        }
        let totals = try await Self.totals(environment.pool)
        #expect(Set(totals.keys) == ["ios 1 2.0", "ios 3 3.4", "android 2 3.1"])
        for (key, values) in totals {
            let parts = key.split(separator: " ")
            let platform = String(parts[0])
            let contract = Int(parts[1])!
            #expect(values[0] == 3, "\(key): requests")
            #expect(values[1] == counter("baton_components_rendered_total", platform: platform, contract: contract), "\(key): rendered")
            #expect(values[2] == counter("baton_fallback_hits_total", platform: platform, contract: contract), "\(key): fallback hits")
            #expect(values[3] == counter("baton_components_omitted_total", platform: platform, contract: contract), "\(key): omissions")
        }
        #expect(totals["ios 1 2.0"]![2] > 0)
        #expect(totals["ios 3 3.4"]![2] == 0)
    }

    @Test("baton report contract prints the expected figures from known traffic, as a table, CSV and SVG")
    func report() async throws {
        let conninfo = try await TestDatabase.make(migrated: true)
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        try await pool.query(
            """
            INSERT INTO contract_health_daily (day, platform, contract, app_version, requests, components_rendered, fallback_hits, omissions, unsupported)
            VALUES (current_date, 'ios', 3, '3.4', 100, 1000, 0, 0, 0),
                   (current_date - 1, 'ios', 3, '3.4', 50, 500, 0, 0, 0),
                   (current_date - 6, 'ios', 3, '3.4', 1, 10, 0, 0, 0),
                   (current_date - 7, 'ios', 3, '3.4', 1000, 10000, 0, 0, 0),
                   (current_date, 'ios', 1, '2.0', 40, 400, 100, 4, 0),
                   (current_date - 3, 'ios', 1, '2.0', 10, 100, 25, 1, 0),
                   (current_date - 10, 'ios', 1, '2.0', 999, 9999, 9999, 0, 0),
                   (current_date, 'android', 2, '3.1', 20, 200, 10, 0, 0),
                   (current_date, 'android', 0, '1.2', 0, 0, 0, 0, 7)
            """)
        await pool.close()
        guard let executable = BatonProcess.executable else { throw TestFailure("build the baton executable first (swift build)") }
        let flows = TestDatabase.repositoryRoot.appendingPathComponent("Flows").path
        // --days 7 is today and the six days before it: the row 7 days back stays out.
        let csv = try await ExternalTool.run(
            executable.path, ["report", "contract", "--days", "7", "--csv", "--database-url", conninfo, "--flows-dir", flows])
        #expect(csv.status == 0, "\(csv.output)")
        #expect(
            csv.output == """
                platform,app_version,contract,requests,components_rendered,fallback_hits,omissions,unsupported,share_without_fallback,renders_fully\r
                android,3.1,2,20,200,10,0,0,0.9500,false\r
                android,1.2,0,0,0,0,0,7,,\r
                ios,3.4,3,151,1510,0,0,0,1.0000,true\r
                ios,2.0,1,50,500,125,5,0,0.7500,false\r

                """)
        let svgFile = FileManager.default.temporaryDirectory.appendingPathComponent("contract-\(UUID().uuidString).svg")
        let table = try await ExternalTool.run(
            executable.path, ["report", "contract", "--database-url", conninfo, "--flows-dir", flows, "--svg", svgFile.path])
        #expect(table.status == 0, "\(table.output)")
        #expect(table.output.contains("ios       3.4         3      1151       11510              0        0            100.0%            0  render fully"), "\(table.output)")
        #expect(table.output.contains("ios       2.0         1      1049       10499          10124        5              3.6%            0  fall back"))
        #expect(table.output.contains("android   1.2         0         0           0              0        0                 –            7  update required"))
        #expect(table.output.contains("Contract 1: the current flows fall back (with every capability) in"))
        #expect(table.output.contains("flow 'scan-and-go' state 'scan': barcodeScanner → textField"))
        let svg = try String(contentsOf: svgFile, encoding: .utf8)
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.components(separatedBy: "<rect ").count - 1 == 1 + 2 * 4)
        #expect(svg.contains(">ios 2.0 · contract 1</text>"))
        // The chart is well-formed XML.
        _ = try XMLDocument(data: Data(svg.utf8))
    }
}
