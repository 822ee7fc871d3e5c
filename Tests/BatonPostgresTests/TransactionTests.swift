import BatonPostgres
import BatonTestSupport
import Foundation
import Synchronization
import Testing

struct Boom: Error {}

/// A counter closures can share.
final class AttemptCounter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}

@Suite("Transactions")
struct TransactionTests {
    static let database = Task {
        let pool = try await TestDatabase.makePool(maxConnections: 4)
        try await pool.query("CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL UNIQUE)")
        try await pool.query("CREATE TABLE counters (id int PRIMARY KEY, value int NOT NULL)")
        return pool
    }
    var pool: PostgresPool { get async throws { try await Self.database.value } }

    @Test("a body that throws rolls everything back")
    func rollbackOnThrow() async throws {
        await #expect(throws: Boom.self) {
            try await pool.withTransaction { connection in
                try await connection.query("INSERT INTO items (name) VALUES ($1)", ["rolled-back"])
                connection.enqueue("INSERT INTO items (name) VALUES ($1)", ["queued-then-rolled-back"])
                throw Boom()
            }
        }
        let count = try await pool.query("SELECT count(*) FROM items WHERE name LIKE '%rolled-back'")[0].decode(Int.self, at: 0)
        #expect(count == 0)
    }

    @Test("a failed statement inside the body rolls back, and the connection is usable afterwards")
    func rollbackOnStatementError() async throws {
        try await pool.query("INSERT INTO items (name) VALUES ('dup')")
        await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                try await connection.query("INSERT INTO items (name) VALUES ('first-of-pair')")
                try await connection.query("INSERT INTO items (name) VALUES ('dup')")
            }
        }
        #expect(try await pool.query("SELECT count(*) FROM items WHERE name = 'first-of-pair'")[0].decode(Int.self, at: 0) == 0)
        // Every pooled connection still works (none was returned mid-transaction).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try await pool.query("SELECT 1") } }
            try await group.waitForAll()
        }
    }

    @Test("swallowing a statement error inside the body is refused at commit, not silently rolled back")
    func swallowedError() async throws {
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                try await connection.query("INSERT INTO items (name) VALUES ('swallowed')")
                _ = try? await connection.query("SELECT 1/0")
            }
        }
        #expect(error?.message.contains("rolled back") == true)
        #expect(try await pool.query("SELECT count(*) FROM items WHERE name = 'swallowed'")[0].decode(Int.self, at: 0) == 0)
    }

    @Test("queued statements are committed with the transaction, in order")
    func enqueueCommits() async throws {
        try await pool.withTransaction { connection in
            connection.enqueue("INSERT INTO items (name) VALUES ($1)", ["queued-1"])
            connection.enqueue("INSERT INTO items (name) VALUES ($1)", ["queued-2"])
        }
        let names = try await pool.query("SELECT name FROM items WHERE name LIKE 'queued-%' ORDER BY id").map { try $0.decode(String.self, at: 0) }
        #expect(names == ["queued-1", "queued-2"])
    }

    @Test("an error in a queued statement surfaces at commit and rolls back the whole transaction")
    func enqueueErrorSurfaces() async throws {
        try await pool.query("INSERT INTO items (name) VALUES ('taken')")
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                try await connection.query("INSERT INTO items (name) VALUES ('before-queued-error')")
                connection.enqueue("INSERT INTO items (name) VALUES ($1)", ["taken"])
            }
        }
        #expect(error?.isUniqueViolation == true)
        #expect(try await pool.query("SELECT count(*) FROM items WHERE name = 'before-queued-error'")[0].decode(Int.self, at: 0) == 0)
    }

    /// Inserts `name` with a statement sent ahead and counts it with the next one; returns the
    /// inserted id, the count the next statement saw, and the round trips the body took.
    func insertAhead(_ connection: PostgresConnection, _ name: String) async throws -> (id: Int, seen: Int, trips: Int) {
        let before = connection.roundTrips
        let ahead = connection.sendAhead("INSERT INTO items (name) VALUES ($1) RETURNING id", [name])
        let seen = try await connection.query("SELECT count(*) FROM items WHERE name = $1", [name])[0].decode(Int.self, at: 0)
        let id = try await connection.rows(of: ahead)[0].decode(Int.self, at: 0)
        return (id, seen, connection.roundTrips - before)
    }

    @Test("a statement sent ahead travels with the next one, in order, and its rows are read afterwards")
    func sendAheadTravelsWithNext() async throws {
        let (warm, measured) = try await pool.withConnection { connection in
            // The first run prepares the statements (a round trip each, once per connection).
            (try await connection.transaction { try await insertAhead($0, "ahead-1") },
             try await connection.transaction { try await insertAhead($0, "ahead-2") })
        }
        #expect(warm.seen == 1 && measured.seen == 1, "the statement sent ahead ran before the one it travelled with")
        #expect(measured.id > warm.id)
        #expect(measured.trips == 1, "BEGIN, the INSERT sent ahead and the SELECT share one round trip")
        #expect(try await pool.query("SELECT count(*) FROM items WHERE name LIKE 'ahead-_'")[0].decode(Int.self, at: 0) == 2)
    }

    @Test("rows(of:) sends a statement still queued on its own")
    func sendAheadAlone() async throws {
        let (value, trips) = try await pool.withTransaction { connection in
            _ = try await connection.query("SELECT 1")
            let before = connection.roundTrips
            let ahead = connection.sendAhead("SELECT $1::int * 2", [21])
            return (try await connection.rows(of: ahead)[0].decode(Int.self, at: 0), connection.roundTrips - before)
        }
        #expect(value == 42)
        #expect(trips <= 2, "one round trip, plus one to prepare the statement on a connection that has not seen it")
    }

    @Test("a statement sent ahead that fails: the statement it travelled with and rows(of:) throw its error; nothing commits")
    func sendAheadFailure() async throws {
        try await pool.query("INSERT INTO items (name) VALUES ('ahead-taken')")
        let errors = try await pool.withConnection { connection in
            try await connection.execute("BEGIN")
            let ahead = connection.sendAhead("INSERT INTO items (name) VALUES ('ahead-taken') RETURNING id")
            let carrier = await Result { try await connection.query("INSERT INTO items (name) VALUES ('ahead-carrier')") }
            let own = await Result { try await connection.rows(of: ahead) }
            try await connection.execute("ROLLBACK")
            return [carrier, own].map { result -> String? in
                guard case .failure(let error as PostgresError) = result else { return nil }
                return error.sqlState
            }
        }
        #expect(errors == ["23505", "23505"])
        #expect(try await pool.query("SELECT count(*) FROM items WHERE name = 'ahead-carrier'")[0].decode(Int.self, at: 0) == 0)
    }

    @Test("a guess refuted: a statement sent ahead requiring rows finds none; its carrier and every later statement throw until the restart")
    func refutedGuess() async throws {
        // Twice on one connection: the second run's statements are prepared already.
        let runs = try await pool.withConnection { connection in
            var runs: [(Result<PostgresRows, any Error>, Result<PostgresRows, any Error>, Int, Int)] = []
            for round in 1...2 {
                runs.append(try await connection.transaction { connection in
                    let claim = connection.sendAhead("SELECT id FROM items WHERE name = 'no-such-item'", requiringRows: true)
                    let carrier = await Result { try await connection.query("INSERT INTO items (name) VALUES ('guess-undone')") }
                    let before = connection.roundTrips
                    let later = await Result { try await connection.query("SELECT 1") }
                    let laterTrips = connection.roundTrips - before
                    #expect(try await connection.rows(of: claim).isEmpty, "the statement's own answer is readable")
                    try connection.restartTransaction()
                    try await connection.query("INSERT INTO items (name) VALUES ($1)", ["guess-restarted-\(round)"])
                    return (carrier, later, laterTrips, connection.roundTrips - before)
                })
            }
            return runs
        }
        let (carrier, later, laterTrips, afterRestart) = runs[1]
        for outcome in [carrier.map { _ in () }, later.map { _ in () }] {
            guard case .failure(let error as PostgresError) = outcome else { Issue.record("not refused: \(outcome)"); continue }
            #expect(error.code == .guessRefuted)
        }
        #expect(laterTrips == 0, "a refused statement is not sent")
        #expect(afterRestart == 1, "ROLLBACK and BEGIN travel with the next statement")
        let names = try await pool.query("SELECT name FROM items WHERE name LIKE 'guess-%' ORDER BY name").map { try $0.decode(String.self, at: 0) }
        #expect(names == ["guess-restarted-1", "guess-restarted-2"])
    }

    @Test("restartTransaction undoes what the transaction did, keeps its isolation, and what follows commits")
    func restartTransaction() async throws {
        let level = try await pool.withTransaction(isolation: .serializable) { connection in
            try await connection.query("INSERT INTO items (name) VALUES ('restart-undone')")
            connection.enqueue("INSERT INTO items (name) VALUES ('restart-queued')")
            try connection.restartTransaction()
            try await connection.query("INSERT INTO items (name) VALUES ('restart-kept')")
            return try await connection.query("SHOW transaction_isolation")[0].decode(String.self, at: 0)
        }
        #expect(level == "serializable")
        let names = try await pool.query("SELECT name FROM items WHERE name LIKE 'restart-%' ORDER BY name").map { try $0.decode(String.self, at: 0) }
        #expect(names == ["restart-kept"])
        await #expect(throws: PostgresError.self) {
            try await pool.withConnection { try $0.restartTransaction() }
        }
    }

    @Test("ten concurrent SERIALIZABLE read-modify-writes of one row each land exactly once (retries: serializationBound)")
    func serializationRetry() async throws {
        try await pool.query("INSERT INTO counters VALUES (1, 0) ON CONFLICT DO NOTHING")
        let attempts = AttemptCounter()
        // Ten concurrent SERIALIZABLE read-modify-writes of one row: conflicts are certain,
        // retries make every increment land exactly once.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask {
                    try await pool.withTransaction(isolation: .serializable, maxAttempts: 50) { connection in
                        attempts.increment()
                        let value = try await connection.query("SELECT value FROM counters WHERE id = 1")[0].decode(Int.self, at: 0)
                        try await connection.query("UPDATE counters SET value = $1 WHERE id = 1", [value + 1])
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await pool.query("SELECT value FROM counters WHERE id = 1")[0].decode(Int.self, at: 0) == 10)
        print("ten increments took \(attempts.count) attempts")
    }

    @Test("a serialization failure is retried, and no more than maxAttempts times in all", arguments: [1, 2])
    func serializationBound(maxAttempts: Int) async throws {
        let pool = try await pool
        let id = 100 + maxAttempts
        try await pool.query("INSERT INTO counters VALUES ($1, 0) ON CONFLICT (id) DO UPDATE SET value = 0", [id])
        let attempts = AttemptCounter()
        let read = AttemptCounter()
        // Two read-modify-writes of one row, each reading before either writes: the second
        // UPDATE waits for the first transaction's commit, then fails with 40001.
        let results = await withTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    let first = Atomic<Bool>(true)
                    do {
                        try await pool.withTransaction(isolation: .serializable, maxAttempts: maxAttempts) { connection in
                            attempts.increment()
                            let value = try await connection.query("SELECT value FROM counters WHERE id = $1", [id])[0].decode(Int.self, at: 0)
                            if first.exchange(false, ordering: .relaxed) {
                                read.increment()
                                let end = ContinuousClock.now + .seconds(10)
                                while read.count < 2, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(2)) }
                            }
                            try await connection.query("UPDATE counters SET value = $1 WHERE id = $2", [value + 1, id])
                        }
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        let value = try await pool.query("SELECT value FROM counters WHERE id = $1", [id])[0].decode(Int.self, at: 0)
        #expect(read.count == 2, "both read before either wrote")
        if maxAttempts == 1 {
            let failures = results.compactMap { $0 as? PostgresError }
            #expect(failures.count == 1 && failures.first?.sqlState == "40001", "\(results)")
            #expect(attempts.count == 2, "the conflicting transaction ran once")
            #expect(value == 1)
        } else {
            #expect(results.allSatisfy { $0 == nil }, "\(results)")
            #expect(attempts.count == 3, "the conflicting transaction ran again once")
            #expect(value == 2)
        }
    }

    @Test("a pipeline runs several statements in one round trip and reports the first error")
    func pipeline() async throws {
        let results = try await pool.withConnection { connection in
            try await connection.pipeline([
                ("SELECT $1::int + 1", [.text("41")]),
                ("SELECT $1::text || '!'", [.text("hi")]),
                ("SELECT NULL::text", []),
            ])
        }
        #expect(try results[0][0].decode(Int.self, at: 0) == 42)
        #expect(try results[1][0].decode(String.self, at: 0) == "hi!")
        #expect(try results[2][0].decode(String?.self, at: 0) == nil)
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection { connection in
                try await connection.pipeline([("SELECT 1", []), ("SELECT 1/0", []), ("SELECT 3", [])])
            }
        }
        #expect(error?.sqlState == "22012")
        #expect(try await pool.query("SELECT 5")[0].decode(Int.self, at: 0) == 5)
    }

    @Test("prepared statements survive DEALLOCATE ALL behind the wrapper's back")
    func deallocateAll() async throws {
        try await pool.withConnection { connection in
            #expect(try await connection.query("SELECT $1::int", [7])[0].decode(Int.self, at: 0) == 7)
            try await connection.execute("DEALLOCATE ALL")
            #expect(try await connection.query("SELECT $1::int", [8])[0].decode(Int.self, at: 0) == 8)
        }
    }

    @Test("a NUL byte in a later statement of a pipeline inside a transaction: nothing of the transaction commits, and the connection works after", arguments: [false, true])
    func nulInsideAPipeline(queued: Bool) async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        try await pool.query("CREATE TABLE notes (body text)")
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { db in
                if queued {
                    db.enqueue("INSERT INTO notes VALUES ($1)", ["first"])
                    try await db.query("INSERT INTO notes VALUES ($1)", ["a\u{0}b"])
                } else {
                    _ = try await db.pipeline([
                        ("INSERT INTO notes VALUES ($1)", [.text("first")]), ("INSERT INTO notes VALUES ($1)", [.text("a\u{0}b")]),
                    ])
                }
            }
        }
        #expect(error?.code == .invalidParameter)
        #expect(try await pool.query("SELECT count(*) FROM notes")[0].decode(Int.self, at: 0) == 0)
        try await pool.withTransaction { db in try await db.query("INSERT INTO notes VALUES ($1)", ["next"]) }
        #expect(try await pool.query("SELECT body FROM notes").map { try $0.decode(String.self, at: 0) } == ["next"])
        await pool.close()
    }

    // A parameter refused after the first statement of a pipeline was queued left the
    // connection in pipeline mode: a body that caught the error and went on waited for an
    // answer that never came, until its deadline cut it.
    @Test("a pipeline refused for a later statement's parameter leaves the connection usable for the same body")
    func pipelineRefusedThenUsed() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: .seconds(3)))
        let answer = try await pool.withConnection { db -> Int in
            let refused = await #expect(throws: PostgresError.self) {
                _ = try await db.pipeline([("SELECT 1", []), ("SELECT $1::text", [.text("a\u{0}b")])])
            }
            #expect(refused?.code == .invalidParameter)
            // The same through a statement queued ahead.
            db.enqueue("SELECT 1")
            let queued = await #expect(throws: PostgresError.self) { _ = try await db.query("SELECT $1::text", ["a\u{0}b"]) }
            #expect(queued?.code == .invalidParameter)
            return try await db.query("SELECT 2")[0].decode(Int.self, at: 0)
        }
        #expect(answer == 2)
        #expect(pool.statistics.failFastStarts == 0)
        await pool.close()
    }

    @Test("a pipeline whose new statements reach the connection's limit of prepared statements still runs: the names it collected before the limit's DEALLOCATE ALL are prepared again")
    func pipelineAcrossThePreparedLimit() async throws {
        // A generous deadline: the 1 022 round trips below took more than the default 5 s in a
        // loaded parallel pass.
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: .seconds(60)))
        let results = try await pool.withConnection { connection in
            // One short of the limit: the pipeline's first new statement fills it, its second
            // makes the connection deallocate everything, the first's name included.
            for index in 1..<PostgresConnection.preparedStatementLimit { try await connection.query("SELECT \(index)") }
            return try await connection.pipeline([("SELECT 'first'", []), ("SELECT 'second'", [])])
        }
        #expect(try results.map { try $0[0].decode(String.self, at: 0) } == ["first", "second"])
        await pool.close()
    }
}
