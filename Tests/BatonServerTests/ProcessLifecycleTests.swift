import BatonJSON
import BatonTestSupport
import Foundation
import Testing

@Suite("The baton executable, end to end", .serialized)
struct ProcessLifecycleTests {
    @Test("serve starts an embedded cluster, answers, and on SIGTERM finishes in-flight requests, stops the cluster and exits 0")
    func serveAndTerminate() async throws {
        let baton = try BatonProcess(arguments: ["serve", "--log-format", "json"], environment: ["BATON_DIAGNOSTICS": "true"])
        try await baton.waitUntilReady()

        #expect(try await baton.get("/healthz").status == .ok)
        let metrics = try await baton.get("/metrics")
        #expect(metrics.body.contains("baton_build_info"))
        let openAPI = try await baton.get("/openapi.json")
        #expect(try JSONValue.parse(Array(openAPI.body.utf8))["openapi"] == "3.1.0")

        // The cluster runs under the data directory.
        let pidFile = baton.dataDirectory.appendingPathComponent("postgres/data/postmaster.pid")
        #expect(FileManager.default.fileExists(atPath: pidFile.path))

        // A slow request is in flight when SIGTERM arrives; it still completes.
        let slow = Task { try await baton.get("/diagnostics/sleep?ms=1500") }
        try await Task.sleep(for: .milliseconds(300))
        let status = try await baton.stop(signal: SIGTERM)
        let reply = try await slow.value
        #expect(reply.status == .ok)
        #expect(reply.body.contains("1500"))
        #expect(status == 0, "exit status \(status); log:\n\(baton.log)")
        #expect(!FileManager.default.fileExists(atPath: pidFile.path), "the embedded cluster is still running")

        // Logs are one JSON object per line, and carry no request bodies or tokens.
        let lines = baton.log.split(separator: "\n").filter { $0.hasPrefix("{") }
        #expect(!lines.isEmpty)
        for line in lines {
            let entry = try JSONValue.parse(Array(line.utf8))
            #expect(entry["level"] != nil && entry["msg"] != nil && entry["ts"] != nil)
        }
        #expect(baton.log.contains("stopping the embedded PostgreSQL cluster"))
        try? FileManager.default.removeItem(at: baton.dataDirectory)
    }

    @Test("migrate --status lists migrations; migrate applies them once")
    func migrateCommand() async throws {
        let first = try BatonProcess(arguments: ["migrate", "--status"])
        #expect(try await first.stop(signal: 0, timeout: .seconds(90)) == 0)
        #expect(first.log.contains("pending   0001_baseline"))

        let apply = try BatonProcess(arguments: ["migrate"], reusing: first.dataDirectory)
        #expect(try await apply.stop(signal: 0, timeout: .seconds(90)) == 0)
        let count = try FileManager.default.contentsOfDirectory(atPath: TestDatabase.migrationsDirectory.path).filter { $0.hasSuffix(".sql") }.count
        #expect(apply.log.contains("applied \(count) migration"))

        let again = try BatonProcess(arguments: ["migrate"], reusing: first.dataDirectory)
        #expect(try await again.stop(signal: 0, timeout: .seconds(90)) == 0)
        #expect(again.log.contains("up to date"))
        try? FileManager.default.removeItem(at: first.dataDirectory)
    }

    @Test("bad configuration is reported plainly with a non-zero exit, before anything starts")
    func badConfiguration() async throws {
        let baton = try BatonProcess(arguments: ["serve", "--log-level", "loud"])
        let status = try await baton.stop(signal: 0, timeout: .seconds(30))
        #expect(status != 0)
        #expect(baton.log.contains("log.level (LOG_LEVEL) must be one of"))
        try? FileManager.default.removeItem(at: baton.dataDirectory)
    }
}
