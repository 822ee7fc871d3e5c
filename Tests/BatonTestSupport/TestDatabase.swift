import BatonPostgres
import Foundation
import Synchronization

/// Real PostgreSQL for tests: a throwaway cluster in a temporary directory, started once per
/// test process and removed at exit — or the server named by `BATON_TEST_DATABASE_URL`.
/// Each call to ``make(migrated:)`` returns a fresh, empty database on it.
public enum TestDatabase {
    /// The repository root (where `Package.swift`, `Migrations/` and `Flows/` are).
    public static let repositoryRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("Package.swift not found above \(#filePath)")
    }()

    /// The shared test corpora (JSONTestSuite, the naughty strings, …), read from
    /// `../shared/corpora` beside the checkout.
    public static var corpora: URL { repositoryRoot.deletingLastPathComponent().appendingPathComponent("shared/corpora") }

    /// The repository's `Migrations/` directory.
    public static var migrationsDirectory: URL { repositoryRoot.appendingPathComponent("Migrations") }

    /// A new database. With `migrated`, it starts with every migration in `Migrations/` applied
    /// (cloned from a template database that is migrated once per process).
    public static func make(migrated: Bool = false) async throws -> String {
        let server = try await TestServer.shared.start()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        let template = migrated ? try await TestServer.shared.migratedTemplate() : nil
        let admin = PostgresPool(configuration: .administrative(conninfo: server.adminConninfo))
        defer { Task { await admin.close() } }
        try await admin.withConnection { connection in
            try await connection.execute("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \($0)" } ?? ""))
        }
        return try Conninfo.replacing(server.adminConninfo, with: ["dbname": String(name)])
    }

    /// A pool on a fresh database (see ``make(migrated:)``).
    public static func makePool(migrated: Bool = false, maxConnections: Int = 4) async throws -> PostgresPool {
        // Generous deadlines, the wait for a free connection included: the suite runs many
        // tests at once on two cores, and a suite's tests share its pool (a pool of 4 whose
        // holders were starved of CPU left its other tests waiting past the default 5 s).
        // Tests of the timeouts themselves make pools of their own.
        PostgresPool(
            configuration: .init(
                conninfo: try await make(migrated: migrated), maxConnections: maxConnections, acquireTimeout: .seconds(30),
                callTimeout: .seconds(30), limits: .init(statement: .seconds(25))))
    }

    /// The TCP address the test server also listens on (127.0.0.1), for fault tests that put a
    /// proxy between Baton and PostgreSQL.
    public static func tcpAddress() async throws -> (host: String, port: Int) {
        let server = try await TestServer.shared.start()
        guard let port = server.tcpPort else { throw TestFailure("the test database server does not listen on TCP") }
        return ("127.0.0.1", port)
    }

    /// `conninfo` (a database on the test server) reached through `host:port` instead, in
    /// plain text unless told otherwise (the server also offers TLS on TCP). Without the test
    /// cluster's generous connect timeout: as in production, the pool's limits decide (3 s,
    /// 2 s for the pool's recovery probe), since fault tests put a proxy there that can
    /// blackhole a connection being opened.
    public static func conninfo(_ conninfo: String, via host: String, port: Int, sslmode: String = "disable") throws -> String {
        try Conninfo.removing(
            ["connect_timeout"], from: Conninfo.replacing(conninfo, with: ["host": host, "port": String(port), "sslmode": sslmode]))
    }

    /// `conninfo` (a database on the test server) over TCP with TLS required: the throwaway
    /// cluster serves a self-signed certificate (``TestCertificate``).
    public static func tlsConninfo(_ conninfo: String) async throws -> String {
        let server = try await TestServer.shared.start()
        guard server.tls, let port = server.tcpPort else {
            throw TestFailure("the test database server serves no TLS (BATON_TEST_DATABASE_URL names another server, or it failed to start with TLS: see the log)")
        }
        // No proxy between: the generous connect timeout stays (a TLS handshake on a loaded machine).
        return try Conninfo.replacing(conninfo, with: ["host": "127.0.0.1", "port": String(port), "sslmode": "require"])
    }

    /// The conninfo of the server's maintenance database (to run `pg_terminate_backend` etc.).
    public static func adminConninfo() async throws -> String {
        try await TestServer.shared.start().adminConninfo
    }
}

struct StartedServer: Sendable {
    var adminConninfo: String
    /// The loopback TCP port the server also listens on (nil for an external server).
    var tcpPort: Int?
    /// Whether it offers TLS on that port.
    var tls = false
}

/// Starts the throwaway cluster at most once per process.
actor TestServer {
    static let shared = TestServer()

    private var started: StartedServer?
    private var template: Task<String, any Error>?

    func start() throws -> StartedServer {
        if let started { return started }
        let server: StartedServer
        if let url = ProcessInfo.processInfo.environment["BATON_TEST_DATABASE_URL"], !url.isEmpty {
            server = StartedServer(adminConninfo: try Self.patient(url), tcpPort: nil)
        } else {
            let directory = URL(fileURLWithPath: NSTemporaryDirectory())
                .appendingPathComponent("baton-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
            let port = try FreePort.find()
            // Durability buys nothing for a cluster deleted at exit.
            let settings = [
                "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300",
                "shared_buffers": "64MB",
            ]
            func makeCluster(_ extra: [String: String]) -> EmbeddedPostgres {
                EmbeddedPostgres(
                    configuration: .init(
                        directory: directory, databaseName: "postgres", settings: settings.merging(extra) { $1 }, port: port,
                        tcpLoopback: true))
            }
            // TLS on the TCP port, for the tests of encrypted connections (TLSTests). Should it
            // not work here (a server built without it), the cluster starts without, and only
            // those tests fail.
            let cluster: EmbeddedPostgres
            let conninfo: String
            let tls: Bool
            do {
                let files = try TestCertificate.write(into: directory.appendingPathComponent("tls"))
                let encrypted = makeCluster(["ssl": "on", "ssl_cert_file": files.certificate, "ssl_key_file": files.key])
                conninfo = try encrypted.start()
                cluster = encrypted
                tls = true
            } catch {
                FileHandle.standardError.write(Data("the test cluster serves no TLS: \(error)\n".utf8))
                let plain = makeCluster([:])
                conninfo = try plain.start()
                cluster = plain
                tls = false
            }
            ThrowawayCluster.register(cluster, directory: directory)
            // If this process dies without running atexit (a crash, SIGKILL), the watchdog
            // still stops the cluster and deletes it.
            try cluster.stopWhenThisProcessExits(removeDirectory: true)
            server = StartedServer(adminConninfo: try Self.patient(conninfo), tcpPort: port, tls: tls)
        }
        started = server
        return server
    }

    /// `conninfo` with a generous connect timeout for every connection the tests open to the
    /// server (3 s is the default), unless it sets its own: the whole suite's tests create their
    /// databases at once on two cores, and one run saw 17 admin connections time out in the
    /// same second; a fresh-clone CI run, two pools of the parallel pass connecting to the
    /// databases just made.
    private static func patient(_ conninfo: String) throws -> String {
        try Conninfo.parse(conninfo)["connect_timeout"] != nil ? conninfo : Conninfo.replacing(conninfo, with: ["connect_timeout": "20"])
    }

    /// One migrated template per process; concurrent callers share the same task (the actor
    /// is re-entrant across the awaits inside).
    func migratedTemplate() async throws -> String {
        if let template { return try await template.value }
        let server = try start()
        let task = Task { try await Self.createTemplate(server) }
        template = task
        return try await task.value
    }

    private static func createTemplate(_ server: StartedServer) async throws -> String {
        let name = "baton_template_\(getpid())"
        let admin = PostgresPool(configuration: .administrative(conninfo: server.adminConninfo))
        try await admin.withConnection { try await $0.execute("CREATE DATABASE \(name)") }
        await admin.close()
        let pool = PostgresPool(configuration: .administrative(conninfo: try Conninfo.replacing(server.adminConninfo, with: ["dbname": name])))
        try await Migrator(directory: TestDatabase.migrationsDirectory).migrate(on: pool)
        await pool.close()
        return name
    }
}

/// Stops and deletes the throwaway cluster when the test process exits.
enum ThrowawayCluster {
    private static let registered = Mutex<(EmbeddedPostgres, URL)?>(nil)

    static func register(_ cluster: EmbeddedPostgres, directory: URL) {
        registered.withLock { $0 = (cluster, directory) }
        atexit {
            guard let (cluster, directory) = ThrowawayCluster.registered.withLock({ $0 }) else { return }
            try? cluster.forceStop()
            try? FileManager.default.removeItem(at: directory)
        }
    }
}
