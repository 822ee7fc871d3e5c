import BatonBuiltinFlows
import BatonJSON
import BatonPostgres
import BatonServer
import BatonTestSupport
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Testing
import Yams

/// The observability kit in `ops/`: the Grafana dashboard and the alert rules checked with
/// promtool and against the metrics Baton really exports, and the Prometheus configuration run
/// for real against the real `baton`.
@Suite("Observability: Prometheus configuration, alert rules, Grafana dashboard")
struct ObservabilityTests {
    static let root = TestDatabase.repositoryRoot
    static let prometheusDirectory = root.appendingPathComponent("ops/prometheus")
    static let dashboardFile = root.appendingPathComponent("ops/grafana/baton.json")
    /// The dashboard's headline (PROTOCOL §5): fallback hits / components rendered, per platform and contract.
    static let headline =
        "sum by (platform, contract) (rate(baton_fallback_hits_total[5m]))"
        + " / sum by (platform, contract) (rate(baton_components_rendered_total[5m]))"

    static func tool(_ name: String) throws -> String {
        guard let path = ExternalTool.find(name) else {
            throw TestFailure("\(name) not found: install the Debian package 'prometheus' (scripts/bootstrap.sh --test does)")
        }
        return path
    }

    // MARK: - The dashboard and the rules as data

    /// A PromQL expression and where it comes from (a dashboard panel's target or an alert).
    struct Query: CustomStringConvertible {
        var origin: String
        var expr: String
        var description: String { "\(origin): \(expr)" }
    }

    static func dashboard() throws -> JSONValue {
        try JSONValue.parse(Array(try Data(contentsOf: dashboardFile)))
    }

    /// Every panel, rows' nested panels (collapsed rows keep theirs inside) included.
    static func panels(_ dashboard: JSONValue) -> [JSONValue] {
        func flatten(_ panels: [JSONValue]) -> [JSONValue] {
            panels.flatMap { [$0] + flatten($0["panels"]?.arrayValue ?? []) }
        }
        return flatten(dashboard["panels"]?.arrayValue ?? [])
    }

    static func dashboardQueries(_ dashboard: JSONValue) -> [Query] {
        panels(dashboard).flatMap { panel -> [Query] in
            let title = "panel \(panel["id"]?.intValue ?? 0) '\(panel["title"]?.stringValue ?? "")'"
            return (panel["targets"]?.arrayValue ?? []).map { target in
                Query(origin: "\(title) \(target["refId"]?.stringValue ?? "?")", expr: target["expr"]?.stringValue ?? "")
            }
        }
    }

    static func alertRules() throws -> [[String: Any]] {
        let text = try String(contentsOf: prometheusDirectory.appendingPathComponent("alerts.yml"), encoding: .utf8)
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        let groups = try #require(document["groups"] as? [[String: Any]])
        return groups.flatMap { $0["rules"] as? [[String: Any]] ?? [] }
    }

    static func alertQueries() throws -> [Query] {
        try alertRules().map { Query(origin: "alert \($0["alert"] as? String ?? "?")", expr: $0["expr"] as? String ?? "") }
    }

    /// Grafana's global variables replaced by a duration, so Prometheus can parse the query.
    static func promQL(_ expr: String) -> String {
        var expr = expr
        for variable in ["$__rate_interval", "$__interval", "$__range"] { expr = expr.replacingOccurrences(of: variable, with: "5m") }
        return expr
    }

    /// `promtool check rules` on a rules file recording each query: it parses every expression.
    static func checkParses(_ queries: [Query]) async throws -> (status: Int32, output: String) {
        let rules: [JSONValue] = queries.enumerated().map { index, query in
            ["record": .string("check:query_\(index)"), "expr": .string(promQL(query.expr))]
        }
        let file = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-queries-\(UUID().uuidString.prefix(8)).yml")
        // JSON is YAML: no quoting of PromQL to get wrong.
        try Data(JSONEncoding.encode(["groups": [["name": "queries", "rules": .array(rules)]]])).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let result = try await ExternalTool.run(try tool("promtool"), ["check", "rules", file.path])
        return (result.status, result.output + "\n" + queries.enumerated().map { "check:query_\($0) = \($1)" }.joined(separator: "\n"))
    }

    /// The `baton_*` names a query reads.
    static func metricNames(in expr: String) -> Set<String> {
        Set(expr.matches(of: /\bbaton_[A-Za-z0-9_]+/).map { String($0.output) })
    }

    /// Every `baton_*` name the queries read that is not a sample name in `exported`.
    static func unknownMetrics(_ queries: [Query], exported: Set<String>) -> [String] {
        queries.flatMap { query in
            metricNames(in: query.expr).subtracting(exported).sorted().map { "\($0) (\(query.origin))" }
        }
    }

    // MARK: - The Prometheus text format

    /// The sample names a `/metrics` text exposes: counters and gauges by their name, histograms
    /// as `_bucket`, `_sum` and `_count` (the bare histogram name selects nothing in PromQL).
    static func exportedSampleNames(_ exposition: String) -> Set<String> {
        var names: Set<String> = []
        for line in exposition.split(separator: "\n") where line.hasPrefix("# TYPE ") {
            let parts = line.split(separator: " ")
            guard parts.count == 4 else { continue }
            let name = String(parts[2])
            switch parts[3] {
            case "histogram": names.formUnion([name + "_bucket", name + "_sum", name + "_count"])
            case "summary": names.formUnion([name, name + "_sum", name + "_count"])
            default: names.insert(name)
            }
        }
        return names
    }

    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    static func samples(_ exposition: String) -> [Sample] {
        exposition.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                return nil
            }
            let series = line[..<space]
            guard let brace = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            var labels: [String: String] = [:]
            for match in series[brace...].matches(of: /([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"/) {
                labels[String(match.output.1)] = String(match.output.2)
            }
            return Sample(name: String(series[..<brace]), labels: labels, value: value)
        }
    }

    // MARK: - Dashboard

    @Test("the dashboard: schema 39, every panel on the provisioned Prometheus by uid, every query parses, the required panels exist")
    func dashboardStructure() async throws {
        let text = try String(contentsOf: Self.dashboardFile, encoding: .utf8)
        #expect(!text.contains("${DS_"), "the dashboard must name the datasource by uid, not by an import-time variable")
        let dashboard = try Self.dashboard()
        #expect(dashboard["schemaVersion"]?.intValue == 39)
        #expect(dashboard["uid"]?.stringValue?.isEmpty == false)

        let provisioning = try String(
            contentsOf: Self.root.appendingPathComponent("ops/grafana/provisioning/datasources/prometheus.yml"), encoding: .utf8)
        let datasources = try #require((try Yams.load(yaml: provisioning) as? [String: Any])?["datasources"] as? [[String: Any]])
        let uid = try #require(datasources.first { $0["type"] as? String == "prometheus" }?["uid"] as? String)
        let reference: JSONValue = ["type": "prometheus", "uid": .string(uid)]

        let panels = Self.panels(dashboard)
        let ids = panels.compactMap { $0["id"]?.intValue }
        #expect(ids.count == panels.count && Set(ids).count == ids.count, "every panel needs a unique id")
        for panel in panels {
            let title = panel["title"]?.stringValue ?? "?"
            #expect(panel["gridPos"]?["w"]?.intValue != nil, "\(title): no gridPos")
            guard panel["type"] != "row" else { continue }
            #expect(panel["datasource"] == reference, "\(title): datasource \(panel["datasource"] ?? .null)")
            let targets = panel["targets"]?.arrayValue ?? []
            #expect(!targets.isEmpty, "\(title): no queries")
            #expect(Set(targets.compactMap { $0["refId"]?.stringValue }).count == targets.count, "\(title): refIds must be unique")
            for target in targets {
                #expect(target["datasource"] == reference, "\(title): a target on \(target["datasource"] ?? .null)")
                let expr = target["expr"]?.stringValue ?? ""
                #expect(!expr.isEmpty, "\(title): an empty query")
                // Only Grafana's global variables: the dashboard defines no template variables.
                #expect(!Self.promQL(expr).contains("$"), "\(title): unknown variable in \(expr)")
            }
        }

        let queries = Self.dashboardQueries(dashboard)
        let check = try await Self.checkParses(queries)
        #expect(check.status == 0, "promtool check rules on the dashboard's queries:\n\(check.output)")

        func normalized(_ expr: String) -> String { expr.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
        #expect(queries.contains { normalized($0.expr) == Self.headline }, "the headline fallback hit rate panel is missing")
        let read = queries.reduce(into: Set<String>()) { $0.formUnion(Self.metricNames(in: $1.expr)) }
        let required = [
            "baton_fallback_hits_total", "baton_components_rendered_total", "baton_components_omitted_total",
            "baton_clients_unsupported_total", "baton_commands_total", "baton_command_duration_seconds_bucket",
            "baton_flow_sessions_started_total", "baton_flow_sessions_finished_total", "baton_deeplinks_total",
            "baton_db_pool_connections", "baton_db_pool_max_connections", "baton_db_pool_waiters",
            "baton_db_pool_acquire_duration_seconds_bucket", "baton_db_loop_busy_seconds_total", "baton_http_requests_total",
            "baton_http_refused_total", "baton_flows_loaded",
        ]
        #expect(Set(required).subtracting(read).isEmpty, "no panel reads \(Set(required).subtracting(read).sorted())")
    }

    /// `/metrics` of an in-process Baton after traffic that makes every family appear: a client
    /// below the oldest contract (the fixture contract's oldest is 2), a screen with fallbacks and
    /// omissions, a command, a rejected deep link.
    func metricsAfterTraffic() async throws -> String {
        let environment = try await TestApplication.environment(
            flows: TestFlows.directory, registry: TestFlows.registry(),
            contract: Self.root.appendingPathComponent("Tests/Fixtures/contract-oldest-2"))
        try await TestFlows.prepare(environment.pool)
        let device = "0d6f1c52-7a3e-4b9d-8c21-5e4f3a2b1c0d"
        var android = deviceHeaders(device)
        android[HTTPField.Name("X-Client-Platform")!] = "android"
        let headers = android
        let exposition = try await buildApplication(environment).test(.router) { client in
            #expect(try await client.execute(uri: "/v1/screens/gallery", method: .get, headers: headers).json["id"] == "update-required")
            #expect(try await client.execute(uri: "/v2/screens/gallery", method: .get, headers: headers).status == .ok)
            let started = try await client.command(TestFlows.startPayload("note-create", subject: "device:\(device)"), headers: headers)
            #expect(started.status == .ok)
            _ = try await client.execute(
                uri: "/v3/deeplinks/resolve", method: .post, headers: headers,
                body: ByteBuffer(bytes: JSONEncoding.encode(["url": "https://elsewhere.example.com/gallery"])))
            return try await client.execute(uri: "/metrics", method: .get).text
        }
        // The application's DatabaseService has closed the pool.
        return exposition
    }

    @Test("every metric the dashboard and the alerts read is one Baton exports; that /metrics passes promtool check metrics")
    func queriedMetricsExist() async throws {
        let exposition = try await metricsAfterTraffic()
        let exported = Self.exportedSampleNames(exposition)
        #expect(exported.contains("baton_fallback_hits_total") && exported.contains("baton_clients_unsupported_total"))

        let lint = try await ExternalTool.run(try Self.tool("promtool"), ["check", "metrics"], input: Array(exposition.utf8))
        #expect(lint.status == 0, "promtool: \(lint.output)")
        #expect(lint.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool lint: \(lint.output)")

        let queries = Self.dashboardQueries(try Self.dashboard()) + (try Self.alertQueries())
        let unknown = Self.unknownMetrics(queries, exported: exported)
        #expect(unknown.isEmpty, "not exported by Baton (after the test's traffic): \(unknown.joined(separator: ", "))")
    }

    @Test("the checks catch what they exist for: an unknown metric, a bare histogram name, a query that does not parse")
    func checksCanFail() async throws {
        let exported = Self.exportedSampleNames(
            """
            # TYPE baton_command_duration_seconds histogram
            # TYPE baton_commands_total counter
            """)
        let unknown = Self.unknownMetrics(
            [
                Query(origin: "a", expr: "sum(rate(baton_commands_total[5m])) / sum(rate(baton_commands_totals[5m]))"),
                Query(origin: "b", expr: "rate(baton_command_duration_seconds[5m])"),
                Query(origin: "c", expr: "histogram_quantile(0.9, sum by (le) (rate(baton_command_duration_seconds_bucket[5m])))"),
            ], exported: exported)
        #expect(unknown == ["baton_commands_totals (a)", "baton_command_duration_seconds (b)"])
        let broken = try await Self.checkParses([Query(origin: "broken", expr: "sum by (platform (rate(baton_commands_total[5m]))")])
        #expect(broken.status != 0, "promtool accepted a broken query:\n\(broken.output)")
    }

    // MARK: - Alert rules

    @Test("alerts.yml: promtool check rules and promtool test rules pass; every alert has a severity, a summary, a description and a test")
    func alertRules() async throws {
        let promtool = try Self.tool("promtool")
        let check = try await ExternalTool.run(promtool, ["check", "rules", Self.prometheusDirectory.appendingPathComponent("alerts.yml").path])
        #expect(check.status == 0, "\(check.output)")

        let rules = try Self.alertRules()
        #expect(rules.count >= 10)
        let testText = try String(contentsOf: Self.prometheusDirectory.appendingPathComponent("alerts_test.yml"), encoding: .utf8)
        let testDocument = try #require(try Yams.load(yaml: testText) as? [String: Any])
        let tested = Set(
            (testDocument["tests"] as? [[String: Any]] ?? []).flatMap { test in
                (test["alert_rule_test"] as? [[String: Any]] ?? []).compactMap { $0["alertname"] as? String }
            })
        for rule in rules {
            let name = try #require(rule["alert"] as? String, "a recording rule in alerts.yml: \(rule)")
            let labels = rule["labels"] as? [String: Any] ?? [:]
            let annotations = rule["annotations"] as? [String: Any] ?? [:]
            #expect(["critical", "warning", "info"].contains(labels["severity"] as? String ?? ""), "\(name): severity")
            #expect((annotations["summary"] as? String)?.isEmpty == false, "\(name): summary")
            #expect(((annotations["description"] as? String)?.count ?? 0) > 40, "\(name): description")
            #expect(tested.contains(name), "\(name) has no case in alerts_test.yml")
        }
        let tests = Self.prometheusDirectory.appendingPathComponent("alerts_test.yml")
        let test = try await ExternalTool.run(promtool, ["test", "rules", tests.path])
        #expect(test.status == 0, "\(test.output)")
    }

    // MARK: - baton_flows_loaded

    @Test("baton_flows_loaded: one series per flow file, labelled with the SHA-256 of its text; loading again retracts old hashes")
    func flowsLoaded() async throws {
        let flows = Self.root.appendingPathComponent("Flows")
        var expected: [String: String] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: flows.path)
        where file.hasSuffix(".yaml") && !["contract.yaml", "deeplinks.yaml", "services.yaml"].contains(file) {
            let text = try String(contentsOf: flows.appendingPathComponent(file), encoding: .utf8)
            let name = try #require(text.split(separator: "\n").first { $0.hasPrefix("flow: ") }?.dropFirst("flow: ".count))
            expected[String(name)] = SHA256.hash(data: Data(text.utf8)).map { String(format: "%02x", $0) }.joined()
        }
        #expect(expected.count >= 8)
        let files = expected

        let environment = try await TestApplication.environment(flows: flows, registry: BuiltinFlowsTests.registry())
        try await buildApplication(environment).test(.router) { client in
            let exposition = try await client.execute(uri: "/metrics", method: .get).text
            let loaded = Self.samples(exposition).filter { $0.name == "baton_flows_loaded" }
            #expect(Dictionary(uniqueKeysWithValues: loaded.map { ($0.labels["flow"] ?? "", $0.labels["hash"] ?? "") }) == files)
            #expect(loaded.allSatisfy { $0.value == 1 })
        }

        let metrics = BatonMetrics()
        metrics.recordLoadedFlows(["a": "1111", "b": "2222"])
        metrics.recordLoadedFlows(["a": "3333"])
        let series = Self.samples(String(decoding: metrics.render(), as: UTF8.self)).filter { $0.name == "baton_flows_loaded" }
        #expect(series.map(\.labels) == [["flow": "a", "hash": "3333"]])
    }

    // MARK: - End to end

    @Test("a real Prometheus on ops/prometheus/prometheus.yml scrapes the real baton; fallback hit rates per platform and contract are exact")
    func prometheusEndToEnd() async throws {
        let prometheusExecutable = try Self.tool("prometheus")
        let database = try await TestDatabase.make(migrated: true)
        // Seeding is one long transaction: the administrative deadline, not a request's 5 s (the
        // whole suite shares two cores meanwhile).
        let pool = PostgresPool(configuration: .administrative(conninfo: database))
        _ = try await pool.withConnection { try await DemoData.seed($0) }
        await pool.close()

        let baton = try BatonProcess(
            arguments: ["serve", "--log-format", "json"],
            environment: [
                "DATABASE_URL": database, "BATON_SIGNING_KEYS": TestApplication.signingKeys,
                "BATON_JWT_HS256_SECRET": TestApplication.jwtSecret,
            ])
        var prometheus: PrometheusServer?
        do {
            // The repository's file with only the target and the intervals changed: what compose runs is what is tested.
            var configuration = try String(contentsOf: Self.prometheusDirectory.appendingPathComponent("prometheus.yml"), encoding: .utf8)
            for (from, to) in [
                ("baton:8080", "127.0.0.1:\(baton.port)"), ("scrape_interval: 15s", "scrape_interval: 1s"),
                ("evaluation_interval: 15s", "evaluation_interval: 1s"),
            ] {
                #expect(configuration.contains(from), "ops/prometheus/prometheus.yml no longer contains '\(from)'; update this test")
                configuration = configuration.replacingOccurrences(of: from, with: to)
            }
            // Its rule files, beside it as in the container, so the relative paths resolve.
            let ruleFiles = (try Yams.load(yaml: configuration) as? [String: Any])?["rule_files"] as? [String] ?? []
            #expect(!ruleFiles.isEmpty)
            var files: [String: String] = [:]
            for file in ruleFiles {
                files[file] = try String(contentsOf: Self.prometheusDirectory.appendingPathComponent(file), encoding: .utf8)
            }
            prometheus = try PrometheusServer(executable: prometheusExecutable, configuration: configuration, files: files)
            try await endToEnd(baton: baton, prometheus: prometheus!)
        } catch {
            await prometheus?.stop()
            _ = try? await baton.stop()
            throw error
        }
        await prometheus?.stop()
        #expect(try await baton.stop() == 0, "baton log:\n\(baton.log)")
        try? FileManager.default.removeItem(at: baton.dataDirectory)
        if let prometheus { try? FileManager.default.removeItem(at: prometheus.directory) }
    }

    /// A metric's client labels.
    struct Client: Hashable, CustomStringConvertible {
        var platform: String
        var contract: String
        var description: String { "\(platform)/v\(contract)" }

        init(platform: String, contract: String) {
            self.platform = platform
            self.contract = contract
        }

        init(_ labels: [String: String]) { self.init(platform: labels["platform"] ?? "", contract: labels["contract"] ?? "") }
    }

    func endToEnd(baton: BatonProcess, prometheus: PrometheusServer) async throws {
        try await baton.waitUntilReady()
        try await prometheus.waitUntilReady()

        // iOS devices have a scanner, Android ones (here) do not. Every contract version walks
        // home, the catalog (artwork: version 2), the parcels screen (startFlow: version 2) and
        // starts Scan & Go, whose first screen holds a barcode scanner (version 3 + capability).
        let devices = [
            ("ios", "1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", "barcode_scanner"), ("android", "6fa459ea-ee8a-4ca4-894e-db77e160355e", ""),
        ]
        for (platform, device, capabilities) in devices {
            var headers = [("X-Device-Id", device), ("X-Client-Platform", platform)]
            if !capabilities.isEmpty { headers.append(("X-Client-Capabilities", capabilities)) }
            for version in 1...3 {
                var parcels = JSONValue.null
                for screen in ["home", "catalog", "send-parcel"] {
                    let reply = try await baton.get("/v\(version)/screens/\(screen)", headers: headers)
                    #expect(reply.status == .ok, "\(platform) v\(version) \(screen): \(reply.body.prefix(300))")
                    parcels = try JSONValue.parse(Array(reply.body.utf8))
                }
                let location = parcels["sections"]?.arrayValue?.first?["components"]?.arrayValue?.first
                let start = try #require(location?["action"]?["payload"]?.stringValue)
                let body = String(decoding: JSONEncoding.encode(["payload": .string(start)]), as: UTF8.self)
                let scan = try await baton.send(
                    .POST, "/v\(version)/command", headers: headers + [("Content-Type", "application/json")], body: body)
                #expect(
                    scan.status == .ok && scan.body.contains("Scan the parcel label"),
                    "\(platform) v\(version) Scan & Go: \(scan.body.prefix(300))")
            }
        }
        let refused = try await baton.send(
            .POST, "/v3/deeplinks/resolve", headers: [("X-Client-Platform", "ios"), ("Content-Type", "application/json")],
            body: #"{"url": "https://elsewhere.example.com/scan-and-go?location=UT-0001"}"#)
        #expect(refused.status == .ok && refused.body.contains("link_not_allowed"), "\(refused.status) \(refused.body)")

        // What Baton counted, from its own /metrics.
        let exposition = try await baton.get("/metrics").body
        let lint = try await ExternalTool.run(try Self.tool("promtool"), ["check", "metrics"], input: Array(exposition.utf8))
        #expect(lint.status == 0 && lint.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool: \(lint.output)")
        let counted = Self.samples(exposition)
        func sums(_ name: String) -> [Client: Double] {
            counted.filter { $0.name == name }.reduce(into: [:]) { sums, sample in
                sums[Client(sample.labels), default: 0] += sample.value
            }
        }
        let rendered = sums("baton_components_rendered_total")
        let hits = sums("baton_fallback_hits_total")
        let clients = Set(devices.flatMap { device in (1...3).map { Client(platform: device.0, contract: String($0)) } })
        #expect(Set(rendered.keys) == clients, "\(rendered)")
        for client in clients where client.contract != "3" {
            #expect((hits[client] ?? 0) > 0, "\(client) should get fallbacks: \(hits)")
        }
        #expect(hits[Client(platform: "ios", contract: "3")] == nil, "the newest contract with the capability needs no fallback: \(hits)")
        let androidNewest = counted.filter {
            $0.name == "baton_fallback_hits_total" && Client($0.labels) == Client(platform: "android", contract: "3")
        }
        #expect(!androidNewest.isEmpty && androidNewest.allSatisfy { $0.labels["component"] == "barcodeScanner" }, "\(androidNewest)")

        // Prometheus has scraped once the counters it holds are the ones Baton shows — all of
        // them: a scrape between the last screen and the deep link has the screens' counts but
        // not the rejected link's.
        let deadline = ContinuousClock.now + .seconds(30)
        var seen: [Client: Double] = [:]
        while ContinuousClock.now < deadline {
            seen = try await Self.byClient(prometheus.query("sum by (platform, contract) (baton_components_rendered_total)"))
            let links = try await prometheus.query(#"sum(baton_deeplinks_total{result="rejected"})"#)
            if seen == rendered, links.first?.value == 1 { break }
            try await Task.sleep(for: .milliseconds(250))
        }
        let targets = try await prometheus.api("targets")["activeTargets"]?.arrayValue ?? []
        #expect(seen == rendered, "Prometheus never saw Baton's counters; targets: \(targets)\n\(prometheus.log)")
        #expect(targets.count == 1)
        #expect(targets.first?["labels"]?["job"] == "baton" && targets.first?["health"] == "up", "\(targets)")
        #expect(targets.first?["scrapeUrl"]?.stringValue == "\(baton.baseURL)/metrics")

        // The headline, on instant counters so it is exact: a client with no fallback has no ratio.
        let rate = try await Self.byClient(
            prometheus.query(
                "sum by (platform, contract) (baton_fallback_hits_total) / sum by (platform, contract) (baton_components_rendered_total)"))
        #expect(Set(rate.keys) == Set(hits.keys))
        for (client, count) in hits {
            let expected = count / (rendered[client] ?? .nan)
            #expect(abs((rate[client] ?? .nan) - expected) < 1e-12, "\(client): Prometheus \(rate[client] ?? .nan), Baton \(expected)")
        }
        let flowCount = counted.filter { $0.name == "baton_flows_loaded" }.count
        #expect(try await prometheus.query("count(baton_flows_loaded)").first?.value == Double(flowCount))
        let rejected = try await prometheus.query(#"sum(baton_deeplinks_total{result="rejected"})"#)
        #expect(rejected.first?.value == 1, "\(rejected); Baton says \(exposition.split(separator: "\n").filter { $0.hasPrefix("baton_deeplinks_total") })")

        // Every dashboard query runs on real data, and every alert rule loads and evaluates cleanly.
        for query in Self.dashboardQueries(try Self.dashboard()) {
            do { _ = try await prometheus.api("query", [("query", Self.promQL(query.expr))]) } catch { Issue.record("\(query): \(error)") }
        }
        let alertNames = Set(try Self.alertRules().compactMap { $0["alert"] as? String })
        var health: [String: String] = [:]
        let rulesDeadline = ContinuousClock.now + .seconds(20)
        repeat {
            let groups = try await prometheus.api("rules")["groups"]?.arrayValue ?? []
            health = [:]
            for rule in groups.flatMap({ $0["rules"]?.arrayValue ?? [] }) {
                let state = (rule["health"]?.stringValue ?? "?") + " " + (rule["lastError"]?.stringValue ?? "")
                health[rule["name"]?.stringValue ?? "?"] = state
            }
            if Set(health.keys) == alertNames, health.values.allSatisfy({ $0.hasPrefix("ok") }) { break }
            try await Task.sleep(for: .milliseconds(250))
        } while ContinuousClock.now < rulesDeadline
        #expect(Set(health.keys) == alertNames)
        #expect(health.values.allSatisfy { $0.hasPrefix("ok") }, "\(health)")
    }

    static func byClient(_ samples: [PrometheusServer.Sample]) -> [Client: Double] {
        Dictionary(samples.map { (Client($0.labels), $0.value) }, uniquingKeysWith: +)
    }
}
