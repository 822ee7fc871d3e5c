import BatonJSON
import BatonServer
import BatonTestSupport
import Foundation
import Testing

@Suite("The baton executable, end to end", .serialized)
struct ProcessLifecycleTests {
    @Test("serve starts an embedded cluster, answers, and on SIGTERM finishes in-flight requests, stops the cluster and exits 0")
    func serveAndTerminate() async throws {
        // Started under a low soft limit on open files, as systemd's 1 024 would be.
        let baton = try BatonProcess(
            arguments: ["serve", "--log-format", "json"], environment: ["BATON_DIAGNOSTICS": "true"], openFileLimit: 256)
        try await baton.waitUntilReady()

        #expect(try await baton.get("/healthz").status == .ok)
        let metrics = try await baton.get("/metrics")
        #expect(metrics.body.contains("baton_build_info"))
        // It raised the soft limit to the hard one (which the shell did not lower), and says so.
        let raised = ProcessResources.raisedDescriptorLimit(soft: 256, hard: ProcessResources.descriptorLimits.hard) ?? 256
        let maxFDs = metrics.body.split(separator: "\n").first { $0.hasPrefix("process_max_fds ") }
        #expect(maxFDs.flatMap { Double($0.dropFirst("process_max_fds ".count)) } == Double(raised), "\(maxFDs ?? "no process_max_fds")")
        if raised > 256 { #expect(baton.log.contains("open file limit raised"), "\(baton.log)") }
        let openAPI = try await baton.get("/openapi.json")
        #expect(try JSONValue.parse(Array(openAPI.body.utf8))["openapi"] == "3.1.0")
        // A token and a body the logs must not repeat: a refused bearer token, and a command
        // whose payload and input are refused.
        let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0b2tlbi1tYXJrZXIifQ.c2lnbmF0dXJlLW1hcmtlcg"
        #expect(try await baton.get("/v3/screens/home", headers: [("Authorization", "Bearer \(token)")]).status == .unauthorized)
        let command = try await baton.send(
            .POST, "/v3/command", headers: [("Content-Type", "application/json"), ("X-Client-Platform", "ios")],
            body: #"{"payload": "payload-marker-7f3a", "input": {"text": "body-marker-9c2e"}}"#)
        #expect(command.status.code / 100 == 4, "\(command.status)")

        // The cluster runs under the data directory.
        let pidFile = baton.dataDirectory.appendingPathComponent("postgres/data/postmaster.pid")
        #expect(FileManager.default.fileExists(atPath: pidFile.path))

        // A slow request is in flight when SIGTERM arrives; it still completes.
        // SIGTERM goes only once the handler has logged that it started: a request still being
        // read when the signal lands belongs to a connection the server may close as idle.
        let slow = Task { try await baton.get("/diagnostics/sleep?ms=1500") }
        let deadline = ContinuousClock.now + .seconds(30)
        while !baton.log.contains("diagnostics sleep started") {
            guard ContinuousClock.now < deadline else { throw TestFailure("the slow request never started:\n\(baton.log)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        let status = try await baton.stop(signal: SIGTERM)
        let reply = try await slow.value
        #expect(reply.status == .ok)
        #expect(reply.body.contains("1500"))
        #expect(status == 0, "exit status \(status); log:\n\(baton.log)")
        #expect(!FileManager.default.fileExists(atPath: pidFile.path), "the embedded cluster is still running")

        // Logs are one JSON object per line, and carry no request bodies or tokens.
        let lines = baton.log.split(separator: "\n")
        #expect(lines.count > 5)
        for line in lines {
            let entry = try? JSONValue.parse(Array(line.utf8))
            #expect(entry?["level"] != nil && entry?["msg"] != nil && entry?["ts"] != nil, "not a JSON log line: \(line)")
        }
        for secret in [token, "c2lnbmF0dXJlLW1hcmtlcg", "payload-marker-7f3a", "body-marker-9c2e"] {
            #expect(!baton.log.contains(secret), "the log repeats \(secret)")
        }
        #expect(baton.log.contains("stopping the embedded PostgreSQL cluster"))
        // Swift concurrency's jobs ran on the event loops as the generic executor, not through
        // NIO's take-over (whose hops cost every request; docs/benchmarks.md).
        #expect(baton.log.contains(#""executor":"event loops as the generic executor""#), "\(baton.log)")
        try? FileManager.default.removeItem(at: baton.dataDirectory)
    }

    @Test("a server that joined the embedded cluster a CLI command started keeps it when the command ends: the cluster stops with its last user")
    func commandBesideServe() async throws {
        // `flows publish` starts the cluster and waits for replicas to report; a server started
        // meanwhile joins the cluster and reports. Before, the command stopped the cluster it
        // had started on its way out, under the server, which then answered 503 until restarted.
        let migrate = try BatonProcess(arguments: ["migrate"])
        #expect(try await migrate.stop(signal: 0, timeout: .seconds(90)) == 0, "\(migrate.log)")
        let publish = try BatonProcess(arguments: ["flows", "publish", "--wait", "20"], reusing: migrate.dataDirectory)
        let pidFile = publish.dataDirectory.appendingPathComponent("postgres/data/postmaster.pid")
        let deadline = ContinuousClock.now + .seconds(90)
        while !(publish.log.contains("starting PostgreSQL") && FileManager.default.fileExists(atPath: pidFile.path)), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(FileManager.default.fileExists(atPath: pidFile.path), "publish started the cluster: \(publish.log)")
        let baton = try BatonProcess(arguments: ["serve", "--log-format", "json"], reusing: publish.dataDirectory)
        try await baton.waitUntilReady()
        #expect(try await publish.stop(signal: 0, timeout: .seconds(90)) == 0, "\(publish.log)")
        #expect(try await baton.get("/readyz").status == .ok, "the server lost its database: \(baton.log.suffix(2000))")
        #expect(try await baton.stop(signal: SIGTERM) == 0)
        #expect(!FileManager.default.fileExists(atPath: pidFile.path), "the cluster outlived its last user")
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

    @Test("serve on a port another process holds says so plainly, never that it listens, stops its cluster and exits 1")
    func portInUse() async throws {
        try await Loopback.holdingPort { port in
            let baton = try BatonProcess(arguments: ["serve", "--log-format", "json"], port: port)
            let status = try await baton.stop(signal: 0, timeout: .seconds(90))
            #expect(status == 1, "log:\n\(baton.log)")
            #expect(baton.log.contains("error: cannot listen on 127.0.0.1:\(port): the port is in use"), "log:\n\(baton.log)")
            #expect(!baton.log.contains(#""msg":"listening""#), "log:\n\(baton.log)")
            let pidFile = baton.dataDirectory.appendingPathComponent("postgres/data/postmaster.pid")
            #expect(!FileManager.default.fileExists(atPath: pidFile.path), "the embedded cluster is still running")
            try? FileManager.default.removeItem(at: baton.dataDirectory)
        }
    }

    @Test("token prints a token for a user id, and refuses one the server would refuse")
    func tokenCommand() async throws {
        let minted = try BatonProcess(arguments: ["token", "alice"])
        #expect(try await minted.stop(signal: 0, timeout: .seconds(30)) == 0)
        #expect(minted.log.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ".").count == 3, "\(minted.log)")
        // Blank, or with U+FFFD where the shell's bytes were not UTF-8: a user other than the one meant.
        for subject in ["", "a\u{7}b", String(repeating: "u", count: 257), " ", "\u{FFFD}\u{FFFD}"] {
            let refused = try BatonProcess(arguments: ["token", subject])
            #expect(try await refused.stop(signal: 0, timeout: .seconds(30)) != 0)
            #expect(refused.log.contains("the user id must be 1–256 bytes of UTF-8 without control characters, not only spaces"), "\(refused.log)")
            try? FileManager.default.removeItem(at: refused.dataDirectory)
        }
        try? FileManager.default.removeItem(at: minted.dataDirectory)
        // Nor one that outlives what the configuration accepts.
        let long = try BatonProcess(arguments: ["token", "alice"], environment: ["BATON_JWT_MAX_LIFETIME": "600"])
        #expect(try await long.stop(signal: 0, timeout: .seconds(30)) != 0)
        #expect(long.log.contains("the token would live 3600 s; this configuration accepts at most 600 s"), "\(long.log)")
        try? FileManager.default.removeItem(at: long.dataDirectory)
    }

    @Test("client says at once that no server answers at its URL, and exits 1; it refuses a URL that is not one")
    func clientWithoutServer() async throws {
        // A port held without listening: nothing else can take it, and connecting is refused.
        try await Loopback.holdingPort(listening: false) { port in
            let client = try BatonProcess(arguments: ["client", "--user", "alice", "--url", "http://127.0.0.1:\(port)"])
            // HTTPClient.shared retried the refused connection for the request's 30 s.
            // It says so, and exits 1: a script sees that the walk failed.
            #expect(try await client.stop(signal: 0, timeout: .seconds(10)) == 1, "\(client.log)")
            #expect(client.log.contains("cannot reach http://127.0.0.1:\(port) (is Baton running there?"), "\(client.log)")
            #expect(client.log.contains("connection refused"), "\(client.log)")
            try? FileManager.default.removeItem(at: client.dataDirectory)
        }

        let refused = try BatonProcess(arguments: ["client", "--url", "localhost:8080"])
        #expect(try await refused.stop(signal: 0, timeout: .seconds(10)) != 0)
        #expect(refused.log.contains("--url must be the server's base URL, such as http://127.0.0.1:8080"), "\(refused.log)")
        try? FileManager.default.removeItem(at: refused.dataDirectory)
    }

    @Test("serve with a database that cannot be reached says so in one line and exits 1")
    func databaseUnreachable() async throws {
        try await Loopback.holdingPort(listening: false) { port in
            let baton = try BatonProcess(arguments: ["serve"], environment: ["DATABASE_URL": "postgresql://baton@127.0.0.1:\(port)/baton"])
            #expect(try await baton.stop(signal: 0, timeout: .seconds(60)) == 1, "\(baton.log)")
            #expect(
                baton.log.contains("error: cannot connect to the database: connection to server at \"127.0.0.1\", port \(port) failed"), "\(baton.log)")
            #expect(!baton.log.contains("PostgresError"), "\(baton.log)")
            try? FileManager.default.removeItem(at: baton.dataDirectory)
        }
    }

    @Test("bad configuration is reported plainly with a non-zero exit, before anything starts")
    func badConfiguration() async throws {
        let baton = try BatonProcess(arguments: ["serve", "--log-level", "loud"])
        let status = try await baton.stop(signal: 0, timeout: .seconds(30))
        #expect(status != 0)
        #expect(baton.log.contains("log.level (LOG_LEVEL) must be one of"))
        try? FileManager.default.removeItem(at: baton.dataDirectory)
    }

    @Test("serve refuses the public development secrets on a non-loopback address, saying what to set; --dev allows them")
    func developmentSecrets() async throws {
        let developmentJWT = ["BATON_JWT_HS256_SECRET": "development-jwt-secret-not-for-production", "BATON_SIGNING_KEYS": ""]
        let refused = try BatonProcess(arguments: ["serve", "--host", "0.0.0.0"], environment: developmentJWT)
        #expect(try await refused.stop(signal: 0, timeout: .seconds(60)) != 0)
        #expect(refused.log.contains("BATON_JWT_HS256_SECRET is the public development value"), "log:\n\(refused.log)")
        #expect(refused.log.contains("pass --dev (BATON_DEV=true)"))
        // Refused before anything started: no embedded cluster was created.
        #expect(!FileManager.default.fileExists(atPath: refused.dataDirectory.appendingPathComponent("postgres").path))
        try? FileManager.default.removeItem(at: refused.dataDirectory)

        // The development signing key alone, under any key id, is refused too.
        let signing = try BatonProcess(
            arguments: ["serve", "--host", "0.0.0.0"],
            environment: [
                "BATON_JWT_HS256_SECRET": "a-secret-of-our-own-0123456789",
                "BATON_SIGNING_KEYS": "k1:ZGV2ZWxvcG1lbnQtc2lnbmluZy1rZXktbm90LWZvci1wcm9kdWN0aW9u",
            ])
        #expect(try await signing.stop(signal: 0, timeout: .seconds(60)) != 0)
        #expect(signing.log.contains("BATON_SIGNING_KEYS is the public development value"), "log:\n\(signing.log)")
        try? FileManager.default.removeItem(at: signing.dataDirectory)

        let allowed = try BatonProcess(arguments: ["serve", "--host", "0.0.0.0", "--dev"], environment: developmentJWT)
        try await allowed.waitUntilReady()
        #expect(try await allowed.get("/healthz").status == .ok)
        #expect(try await allowed.stop(signal: SIGTERM) == 0, "log:\n\(allowed.log)")
        try? FileManager.default.removeItem(at: allowed.dataDirectory)
    }
}
