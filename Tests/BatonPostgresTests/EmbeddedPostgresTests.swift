@testable import BatonPostgres
import BatonTestSupport
import Foundation
import Testing

@Suite("Embedded PostgreSQL")
struct EmbeddedPostgresTests {
    @Test("a cluster in a directory whose path has a space and a quote starts, answers and stops (pg_ctl runs its options through /bin/sh)")
    func pathWithASpace() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton pg's \(UUID().uuidString.prefix(6))")
        let cluster = EmbeddedPostgres(
            configuration: .init(
                directory: directory, databaseName: "spaced", settings: ["fsync": "off", "synchronous_commit": "off"],
                port: try FreePort.find()))
        defer {
            try? cluster.forceStop()
            try? FileManager.default.removeItem(at: directory)
        }
        let conninfo = try cluster.start()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        #expect(try await pool.query("SELECT current_database()")[0].decode(String.self, at: 0) == "spaced")
        await pool.close()
        // The cluster trusts whoever reaches its socket: only its own account may (it was 0755
        // and 0777, so any local user connected as the superuser).
        for path in [cluster.socketDirectory, cluster.socketDirectory + "/.s.PGSQL.\(cluster.configuration.port)"] {
            var info = stat()
            #expect(stat(path, &info) == 0, "\(path)")
            #expect(info.st_mode & 0o077 == 0, "\(path): \(String(info.st_mode & 0o777, radix: 8))")
        }
    }

    @Test(
        "the cluster stops when its last user stops, whichever started it: a CLI command that ends does not take the database from a server still using it",
        arguments: [true, false])
    func lastUserStops(starterStopsFirst: Bool) async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-users-\(UUID().uuidString.prefix(6))")
        let configuration = EmbeddedPostgres.Configuration(
            directory: directory, databaseName: "shared", settings: ["fsync": "off", "synchronous_commit": "off"], port: try FreePort.find())
        // Two users of one cluster, as two processes are (each has its own lock file descriptions).
        let starter = EmbeddedPostgres(configuration: configuration)
        let joiner = EmbeddedPostgres(configuration: configuration)
        defer {
            try? starter.forceStop()
            try? FileManager.default.removeItem(at: directory)
        }
        let conninfo = try starter.start()
        _ = try joiner.start()
        func answers() async -> Bool {
            let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, acquireTimeout: .seconds(5)))
            defer { Task { await pool.close() } }
            return (try? await pool.query("SELECT 1")) != nil
        }
        let (first, second) = starterStopsFirst ? (starter, joiner) : (joiner, starter)
        try first.stop()
        #expect(await answers(), "the cluster stopped while another user still used it")
        try second.stop()
        #expect(await !answers(), "the last user left the cluster running")
        // A cluster already down (stopped by hand, crashed) is no error to its last user.
        _ = try first.start()
        try second.forceStop()
        #expect(throws: Never.self) { try first.stop() }
    }
}
