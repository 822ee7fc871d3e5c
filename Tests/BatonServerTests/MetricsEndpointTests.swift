import BatonJSON
import BatonServer
import BatonTestSupport
import Foundation
import HummingbirdTesting
import Testing

@Suite("Metrics endpoint")
struct MetricsEndpointTests {
    @Test("/metrics exposes HTTP, pool and build metrics in Prometheus text format")
    func families() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            _ = try await client.execute(uri: "/readyz", method: .get)
            _ = try await client.execute(uri: "/nope/\(UUID().uuidString)", method: .get)
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                let text = String(buffer: response.body)
                #expect(text.contains(#"baton_http_requests_total{method="GET",route="/readyz",status="200"} 1"#))
                // Route templates, not raw paths: an unknown path lands in one bounded series.
                #expect(text.contains(#"route="unmatched",status="404"} 1"#))
                #expect(!text.contains("/nope/"))
                #expect(text.contains("# HELP baton_db_pool_connections "))
                #expect(text.contains(#"baton_db_pool_connections{state="idle"}"#))
                #expect(text.contains("baton_db_pool_acquire_duration_seconds_count"))
                #expect(text.contains(#"baton_build_info{version=""#))
                // The database loops' working time, per loop: the readiness check above ran on one.
                if ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0" {
                    let busy = text.split(separator: "\n").first { $0.hasPrefix(#"baton_db_loop_busy_seconds_total{loop="baton-db-io-0"}"#) }
                    #expect(busy.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }.map { $0 > 0 } == true, "\(busy ?? "no series")")
                }
            }
        }
    }

    @Test("promtool check metrics passes on /metrics")
    func promtool() async throws {
        guard let promtool = ExternalTool.find("promtool") else {
            Issue.record("promtool not found: install the Debian package 'prometheus' (scripts/bootstrap.sh does)")
            return
        }
        let environment = try await TestApplication.environment()
        try await environment.pool.query("INSERT INTO probe_counters (subject) VALUES ('m')")
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            _ = try await client.execute(uri: "/readyz", method: .get)
            _ = try await client.execute(uri: "/diagnostics/probe/m", method: .post)
            let response = try await client.execute(uri: "/metrics", method: .get)
            let result = try await ExternalTool.run(promtool, ["check", "metrics"], input: Array(buffer: response.body))
            #expect(result.status == 0, "promtool: \(result.output)")
            #expect(result.output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "promtool lint: \(result.output)")
        }
    }
}
