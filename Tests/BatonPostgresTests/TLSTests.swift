import BatonPostgres
import BatonTestSupport
import Foundation
import Testing

/// Connections encrypted with TLS (`sslmode=require`, the test cluster's self-signed
/// certificate). libpq does the TLS itself; what these show is that Baton's way of driving its
/// socket works when what libpq reads and writes is not what crosses the network: on the
/// database threads (the default) and, in `scripts/test.sh`'s pass with `BATON_DB_LOOPS=0`,
/// through the relay between the event loops and the socket pair, where libpq may hold
/// decrypted bytes the socket no longer shows. Large values and a deadline over TLS are in
/// ValueTests and DeadlineTests, beside the same tests without it.
@Suite("TLS to the database")
struct TLSTests {
    /// A pool of two encrypted connections to a fresh database. No test here is about how
    /// long a caller queues (64 callers queue on two connections while the whole suite runs on
    /// two cores; one fresh-clone CI run timed out at the default 5 s), so the queue is patient.
    static func pool(callTimeout: Duration = .seconds(30)) async throws -> PostgresPool {
        PostgresPool(
            configuration: .init(
                conninfo: try await TestDatabase.tlsConninfo(try await TestDatabase.make()), maxConnections: 2,
                acquireTimeout: .seconds(60), callTimeout: callTimeout, limits: .init(statement: .seconds(25))))
    }

    @Test("the connection is encrypted; statements, a pipeline, a transaction and many callers at once get their answers")
    func statements() async throws {
        let pool = try await Self.pool()
        defer { Task { await pool.close() } }
        let row = try await pool.query("SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()")[0]
        #expect(try row.decode(Bool.self, at: 0), "pg_stat_ssl says the connection is not encrypted")
        #expect(try row.decode(String?.self, at: 1)?.hasPrefix("TLS") == true)

        let results = try await pool.withConnection { connection in
            try await connection.pipeline([("SELECT $1::int + 1", [.text("41")]), ("SELECT repeat('x', 100000)", []), ("SELECT 3", [])])
        }
        #expect(try results[0][0].decode(Int.self, at: 0) == 42)
        #expect(try results[1][0].decode(String.self, at: 0).utf8.count == 100_000)
        #expect(try results[2][0].decode(Int.self, at: 0) == 3)

        try await pool.withTransaction { connection in
            try await connection.execute("CREATE TABLE items (id int PRIMARY KEY)")
            connection.enqueue("INSERT INTO items VALUES ($1)", ["1"])
            connection.enqueue("INSERT INTO items VALUES ($1)", ["2"])
        }
        #expect(try await pool.query("SELECT count(*) FROM items")[0].decode(Int.self, at: 0) == 2)

        // More callers than connections, each answer checked against its own question.
        let answers = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                group.addTask { try await pool.query("SELECT $1::int * 2", [String(index)])[0].decode(Int.self, at: 0) == index * 2 }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(answers.count == 64 && answers.allSatisfy { $0 })
    }

    @Test("many small TLS records in one delivery (a notice is flushed as its own record): libpq decrypts one at a time, and the rest is not lost")
    func smallRecords() async throws {
        let pool = try await Self.pool(callTimeout: .seconds(10))
        defer { Task { await pool.close() } }
        // Without the TLS rule in the relay, the statement waited for the server after the
        // first record and ran into its deadline (checked by removing the rule).
        for round in 0..<20 {
            try await pool.withConnection { connection in
                try await connection.execute("DO $$ BEGIN FOR i IN 1..200 LOOP RAISE NOTICE 'notice % of round \(round)', i; END LOOP; END $$")
                #expect(try await connection.query("SELECT 'after the notices'")[0].decode(String.self, at: 0) == "after the notices")
            }
        }
    }

    @Test("LISTEN over TLS: notifications arrive", .timeLimit(.minutes(1)))
    func listen() async throws {
        let conninfo = try await TestDatabase.tlsConninfo(try await TestDatabase.make())
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        defer { Task { await pool.close() } }
        let events = ListenerTests.Events()
        let listener = PostgresListener(conninfo: conninfo, channel: "baton_tls") { events.record($0) }
        listener.start()
        try await events.wait { $0 == .connected }
        for payload in ["one", "two", String(repeating: "p", count: 7000)] {
            try await pool.query("SELECT pg_notify('baton_tls', $1)", [payload])
            try await events.wait { $0 == .notification(payload) }
        }
        await listener.stop()
    }
}
