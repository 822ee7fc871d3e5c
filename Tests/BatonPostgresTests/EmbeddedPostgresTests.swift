import BatonPostgres
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
    }
}
