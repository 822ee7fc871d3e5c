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
                #expect(text.contains("\nbaton_db_pool_resting 0"), "no place rests while the server grants every connection")
                #expect(text.contains("\nbaton_db_pool_connect_failures_total 0"))
                #expect(text.contains(#"baton_build_info{version=""#))
                // The database loops' working time, per loop: the readiness check above ran on one.
                if ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0" {
                    let busy = text.split(separator: "\n").first { $0.hasPrefix(#"baton_db_loop_busy_seconds_total{loop="baton-db-io-0"}"#) }
                    #expect(busy.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }.map { $0 > 0 } == true, "\(busy ?? "no series")")
                }
            }
        }
    }

    @Test("/metrics exposes the standard process series, and they agree with what the kernel says of the process")
    func processSeries() async throws {
        let app = buildApplication(try await TestApplication.environment())
        try await app.test(.router) { client in
            func scrape() async throws -> [String: Double] {
                let text = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
                var values: [String: Double] = [:]
                for line in text.split(separator: "\n") where line.hasPrefix("process_") {
                    let parts = line.split(separator: " ")
                    if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
                }
                return values
            }
            let cpuBefore = ProcessResources.current().cpuSeconds
            let first = try await scrape()
            let cpuAfter = ProcessResources.current().cpuSeconds
            let cpu = try #require(first["process_cpu_seconds_total"], "\(first)")
            #expect(cpu >= cpuBefore && cpu <= cpuAfter, "\(cpuBefore) ≤ \(cpu) ≤ \(cpuAfter)")
            let open = try #require(first["process_open_fds"], "\(first)")
            let limit = try #require(first["process_max_fds"], "\(first)")
            #expect(open >= 3 && open <= limit)
            #expect(limit == Double(ProcessResources.descriptorLimits.soft))
            let start = try #require(first["process_start_time_seconds"], "\(first)")
            let now = Date().timeIntervalSince1970
            #expect(start <= now && start > now - 86_400, "started \(now - start) s ago")
            #if os(Linux)
            // The kernel's own figures, read the way `ps` reads them.
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            func kilobytes(_ field: String) -> Double? {
                status.split(separator: "\n").first { $0.hasPrefix(field + ":") }
                    .flatMap { $0.split(separator: " ").dropFirst().first.flatMap { Double($0) } }
            }
            let resident = try #require(first["process_resident_memory_bytes"], "\(first)")
            let vmRSS = try #require(kilobytes("VmRSS")) * 1024
            #expect(abs(resident - vmRSS) < vmRSS * 0.3, "resident \(resident), VmRSS \(vmRSS)")
            let virtual = try #require(first["process_virtual_memory_bytes"], "\(first)")
            #expect(virtual >= resident)
            let listed = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count
            #expect(abs(open - Double(listed)) <= max(64, Double(listed) / 2), "open \(open), listed \(listed)")
            #endif

            // The CPU counter moves forward with the process's CPU time.
            var spin = 0.0
            let until = ProcessResources.current().cpuSeconds + 0.05
            while ProcessResources.current().cpuSeconds < until { spin += 1 }
            let second = try await scrape()
            #expect(try #require(second["process_cpu_seconds_total"]) >= cpu + 0.05, "spun \(spin) times")
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
