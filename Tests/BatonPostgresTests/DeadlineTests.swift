import BatonPostgres
import BatonTestSupport
import Foundation
import Synchronization
import Testing

/// Deadlines, server-side bounds, fail-fast and ambiguous commits, against a real server (and
/// through `../shared/tools/tcp_fault_proxy.py` where the network has to misbehave).
@Suite("Deadlines and a silent database")
struct DeadlineTests {
    @Test("every connection opens with the statement, lock, idle-in-transaction and TCP bounds")
    func limitsAreSet() async throws {
        let pool = PostgresPool(
            configuration: .init(
                conninfo: try await TestDatabase.make(), maxConnections: 1,
                limits: .init(statement: .milliseconds(1500), lock: .seconds(2), idleInTransaction: .seconds(7))))
        let values = try await pool.withConnection { connection in
            var values: [String] = []
            for name in ["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"] {
                values.append(try await connection.query("SELECT current_setting($1)", [name])[0].decode(String.self, at: 0))
            }
            return values
        }
        #expect(values == ["1500ms", "2s", "7s"])
        await pool.close()
    }

    @Test(
        "a call past its deadline answers timedOut at once; the connection is cut and replaced; the pool recovers (also over TLS)",
        arguments: [false, true])
    func deadline(tls: Bool) async throws {
        let database = try await TestDatabase.make()
        let pool = PostgresPool(
            configuration: .init(
                conninfo: tls ? try await TestDatabase.tlsConninfo(database) : database, maxConnections: 2, callTimeout: .seconds(1),
                limits: .init(statement: .seconds(30))))
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT pg_sleep(20)") }
        let took = ContinuousClock.now - started
        #expect(error?.code == .timedOut)
        #expect(error?.isUnavailable == true)
        #expect(took < .seconds(3), "answered after \(took)")
        // The probe finds the server answering and the pool works again, on a fresh connection.
        var answered = false
        for _ in 0..<40 where !answered {
            answered = (try? await pool.query("SELECT 1")) != nil
            if !answered { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered)
        #expect(pool.statistics.deadlineExpiries == 1)
        #expect(pool.statistics.connectionsDiscarded >= 1)
        await pool.close()
    }

    @Test("a body that swallows its cut statement's error still answers timedOut: past the deadline no call succeeds")
    func swallowedCutStillTimesOut() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        // The connection is open before the call, and its deadline outlasts the 500 ms another
        // test may hold a shared database loop for (`lateLoopKeepsAnswer`, when the tests run in
        // parallel, as a plain `swift test` runs them): the body starts, and it is its statement
        // the deadline cuts (with one loop, a connect or a start held up past a 500 ms deadline
        // answered poolTimeout).
        try await pool.query("SELECT 1")
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection(timeout: .seconds(1)) { connection in
                _ = try? await connection.query("SELECT pg_sleep(5)")
                return 1
            }
        }
        #expect(error?.code == .timedOut)
        await pool.close()
    }

    @Test("a database loop held up past a call's deadline does not time out a statement whose answer had come meanwhile")
    func lateLoopKeepsAnswer() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        // Prepared on the pool's one connection, so below it is one round trip.
        try await pool.query("SELECT 42")
        /// Holds the connection's loop for 500 ms once the body waits for its answer (as another
        /// request's long flow step would): the child task runs on the body's executor, the loop —
        /// a database thread, or with `BATON_DB_LOOPS=0` an HTTP event loop.
        func holdingTheLoop<R>(_ statement: () async throws -> R) async throws -> R {
            async let held = usleep(500_000)
            let result = await Result { try await statement() }
            _ = await held
            return try result.get()
        }
        let answer = try await pool.withConnection(timeout: .milliseconds(200)) { connection in
            try await holdingTheLoop { try await connection.query("SELECT 42")[0].decode(Int.self, at: 0) }
        }
        #expect(answer == 42)
        #expect(pool.statistics.deadlineExpiries == 0)
        // A call whose answer has not come by then still times out, a turn of the loop late at most
        // (on the event loops, a few wake-ups of 1 ms).
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection(timeout: .milliseconds(200)) { connection in
                try await holdingTheLoop { try await connection.query("SELECT pg_sleep(2)") }
            }
        }
        #expect(error?.code == .timedOut)
        #expect(pool.statistics.deadlineExpiries == 1)
        await pool.close()
    }

    @Test("closing the pool (SIGTERM) is never held up longer than a call's deadline by a stuck statement")
    func closeIsBounded() async throws {
        let pool = PostgresPool(
            configuration: .init(
                conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: .seconds(2), limits: .init(statement: .seconds(60))))
        let stuck = Task { try await pool.query("SELECT pg_sleep(60)") }
        try await Task.sleep(for: .milliseconds(300))
        let started = ContinuousClock.now
        await pool.close()
        let took = ContinuousClock.now - started
        #expect(took < .seconds(4), "close took \(took)")
        await #expect(throws: PostgresError.self) { try await stuck.value }
    }

    @Test("a lock wait past lock_timeout is 55P03, classified unavailable (503), and leaves the pool working")
    func lockTimeout() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 2, limits: .init(lock: .milliseconds(300))))
        try await pool.query("CREATE TABLE rows (id int PRIMARY KEY)")
        try await pool.query("INSERT INTO rows VALUES (1)")
        let holder = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        let locked = Mutex(false)
        let holding = Task {
            try await holder.withConnection { connection in
                try await connection.execute("BEGIN; SELECT * FROM rows WHERE id = 1 FOR UPDATE")
                locked.withLock { $0 = true }
                try await Task.sleep(for: .milliseconds(1500))
                try await connection.execute("ROLLBACK")
            }
        }
        // Until the row is locked (a fixed 300 ms was too short beside other suites: the holder
        // had not connected yet, and the lock was free).
        let waitingSince = ContinuousClock.now
        while !locked.withLock({ $0 }) {
            try #require(ContinuousClock.now - waitingSince < .seconds(10), "the holder never locked the row")
            try await Task.sleep(for: .milliseconds(20))
        }
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { try await $0.query("SELECT * FROM rows WHERE id = 1 FOR UPDATE") }
        }
        #expect(error?.sqlState == "55P03")
        #expect(error?.isUnavailable == true)
        try await holding.value
        #expect(try await pool.query("SELECT count(*) FROM rows")[0].decode(Int.self, at: 0) == 1)
        await holder.close()
        await pool.close()
    }

    /// A fresh database behind the fault proxy: its connection string through the proxy, the
    /// proxy, and a pool of one straight to the database (for setting up and checking).
    static func behindProxy() async throws -> (conninfo: String, proxy: FaultProxy, direct: PostgresPool) {
        let conninfo = try await TestDatabase.make()
        let address = try await TestDatabase.tcpAddress()
        let proxy = try await FaultProxy(upstreamHost: address.host, upstreamPort: address.port)
        let direct = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        return (try TestDatabase.conninfo(conninfo, via: "127.0.0.1", port: proxy.port), proxy, direct)
    }

    /// A pool of one connection on `conninfo` (by default a fresh database), and the faults a
    /// test injects into it.
    static func poolWithFaults(conninfo: String? = nil) async throws -> (PostgresPool, PostgresFaults) {
        let faults = PostgresFaults()
        let conninfo = if let conninfo { conninfo } else { try await TestDatabase.make() }
        return (PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, faults: faults)), faults)
    }

    /// A holder of `pool`'s one connection, once it holds it; `open` lets it go.
    static func heldConnection(of pool: PostgresPool) async throws -> (holder: Task<Void, any Error>, open: AsyncStream<Void>.Continuation) {
        let (holder, open) = PoolTests.holder(on: pool)
        try await waitFor("the holder to get the connection") { pool.statistics.inUse == 1 }
        return (holder, open)
    }

    /// Callers running `statements` on `pool`, one after the other, each within its timeout,
    /// queued in order (each waits for a connection before the next asks), and a count of the
    /// bodies that started.
    static func queuedCallers(
        on pool: PostgresPool, timeouts: [Duration], _ statements: [String]
    ) async throws -> (callers: [Task<Void, any Error>], runs: Counter) {
        let runs = Counter()
        var callers: [Task<Void, any Error>] = []
        for (index, timeout) in timeouts.enumerated() {
            callers.append(
                Task {
                    try await pool.withConnection(timeout: timeout) { connection in
                        runs.increment()
                        for sql in statements { try await connection.query(sql) }
                    }
                })
            try await waitFor("caller \(index + 1) to wait") { pool.statistics.waiters == index + 1 }
        }
        return (callers, runs)
    }

    /// Expects every one of `callers` to fail with `timedOut`: its deadline cut it.
    static func expectCut(_ callers: [Task<Void, any Error>]) async {
        for caller in callers {
            let error = await #expect(throws: PostgresError.self) { try await caller.value }
            #expect(error?.code == .timedOut, "\(String(describing: error))")
        }
    }

    /// Waits until `condition` holds, for at most 10 s: past that the test fails rather than hangs.
    static func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        let end = ContinuousClock.now + .seconds(10)
        while !condition() {
            try #require(ContinuousClock.now < end, "waited 10 s for \(what)")
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Calls `sql` on `pool` within `timeout`, expecting it to fail: the error, how many times
    /// the body ran, and how long the call took.
    static func countedCall(
        on pool: PostgresPool, timeout: Duration, _ sql: String
    ) async -> (error: PostgresError?, runs: Int, took: Duration) {
        let runs = Counter()
        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withConnection(timeout: timeout) { connection in
                runs.increment()
                return try await connection.query(sql)
            }
        }
        return (error, runs.value, ContinuousClock.now - started)
    }

    /// Callers queued together behind a holder of `pool`'s one connection, running
    /// `statements` within `timeouts`, all expected to be cut: the first gets the connection
    /// 1.4 s after the holder lets it go (with a 2 s deadline, its body starts with less than
    /// `PostgresPool.silenceEvidence` left), each next one when the one before is cut.
    /// `whileQueued` runs before the holder lets go. Returns how many bodies started.
    static func lateCallers(
        on pool: PostgresPool, _ faults: PostgresFaults, timeouts: [Duration], _ statements: [String],
        whileQueued: () throws -> Void = {}
    ) async throws -> Int {
        let (holder, open) = try await heldConnection(of: pool)
        defer { open.yield() }
        faults.holdNextHandOver(for: .milliseconds(1400))
        let (callers, runs) = try await queuedCallers(on: pool, timeouts: timeouts, statements)
        try whileQueued()
        open.yield()
        await expectCut(callers)
        _ = try await holder.value
        return runs.value
    }

    /// One late caller (`lateCallers`) with a 2 s deadline, cut in `pg_sleep`; with
    /// `answerFirst`, after the database answered its first statement.
    static func lateCut(on pool: PostgresPool, _ faults: PostgresFaults, answerFirst: Bool = false) async throws {
        // On the connection the holder opened, `pg_sleep` is prepared first (an answer that does
        // not count), then cut.
        _ = try await lateCallers(
            on: pool, faults, timeouts: [.seconds(2)], answerFirst ? ["SELECT 1", "SELECT pg_sleep(5)"] : ["SELECT pg_sleep(5)"])
    }

    @Test("a connection cut after COMMIT was sent is commitOutcomeUnknown, never retried; the server committed once")
    func ambiguousCommit() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("CREATE TABLE marks (id serial PRIMARY KEY)")
        let runs = Counter()
        faults.cutAfterNextCommit()
        let error = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction { connection in
                runs.increment()
                connection.enqueue("INSERT INTO marks DEFAULT VALUES")
            }
        }
        #expect(error?.code == .commitOutcomeUnknown)
        #expect(error?.isRetryable == false)
        #expect(runs.value == 1, "the body ran once")
        #expect(faults.commitsCut == 1)
        // The server commits what it read before it notices the cut, but in its own time: on a
        // loaded machine the next connection can ask before the old backend has committed (one
        // full-suite run saw 0 here). Wait for the commit to show, up to 5 s; once is all it may be.
        #expect(try await Self.marks(on: pool, moreThan: 0) == 1, "the server committed, once")
        await pool.close()
    }

    /// The rows of table `marks`, once there are more than `count` or after 5 s: a server
    /// commits what it read before it notices a cut, but in its own time.
    static func marks(on pool: PostgresPool, moreThan count: Int) async throws -> Int {
        var marks = 0
        for _ in 0..<50 {
            marks = try await pool.query("SELECT count(*) FROM marks")[0].decode(Int.self, at: 0)
            if marks > count { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        return marks
    }

    // A deadline that cut the wait for COMMIT's answer was reported as `timedOut` ("its
    // statement was cancelled"), while the server may well have committed: a synchronous
    // standby gone, a slow network. The runtime takes its replay path only on
    // commitOutcomeUnknown.
    @Test("a deadline that cuts the wait for COMMIT's answer is commitOutcomeUnknown, never retried: the server may have committed (here it did, once)")
    func commitCutByDeadline() async throws {
        let (conninfo, proxy, direct) = try await Self.behindProxy()
        try await direct.query("CREATE TABLE marks (id serial PRIMARY KEY)")
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        let runs = Counter()
        func mark() async throws {
            try await pool.withTransaction(timeout: .seconds(2)) { connection in
                runs.increment()
                connection.enqueue("INSERT INTO marks DEFAULT VALUES")
            }
        }
        // Warm: the statements are prepared, so BEGIN, the INSERT and COMMIT go in one round trip.
        try await mark()
        // Each way takes 1.5 s: the server commits after 1.5 s, its answer would arrive after 3.
        try proxy.send("latency 1500")
        let error = await #expect(throws: PostgresError.self) { try await mark() }
        try proxy.send("latency 0")
        #expect(error?.code == .commitOutcomeUnknown, "\(String(describing: error))")
        #expect(runs.value == 2, "the body ran once more, not again after the cut")
        #expect(try await Self.marks(on: direct, moreThan: 1) == 2, "the server committed the cut transaction, once")

        // A cut before COMMIT was sent is a plain timeout: nothing was committed. (Once the
        // fail-fast the cut started has ended: the probe gets through.)
        try await Self.waitFor("the fail-fast to end") { !pool.statistics.isFailingFast }
        let before = await #expect(throws: PostgresError.self) {
            try await pool.withTransaction(timeout: .seconds(2)) { connection in
                try await connection.query("INSERT INTO marks DEFAULT VALUES")
                try await connection.query("SELECT pg_sleep(5)")
            }
        }
        #expect(before?.code == .timedOut, "\(String(describing: before))")
        await pool.close()
        await direct.close()
    }

    @Test("a deadline that passes while a new connection is set up: the body never starts, the pool keeps the connection and does not fail fast")
    func deadlineWhileSettingUp() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        // The server accepts the connection at once; setting it up then takes past the deadline.
        faults.holdNextConnection(for: .seconds(3))
        let (error, runs, took) = await Self.countedCall(on: pool, timeout: .seconds(2), "SELECT pg_sleep(5)")
        #expect(error?.code == .poolTimeout)
        #expect(error?.isUnavailable == true)
        #expect(runs == 0, "the body started after its deadline")
        #expect(took < .seconds(4.5), "answered after \(took)")
        // The database answered: no fail-fast, and the connection opened is the one used next.
        #expect(pool.statistics.deadlineExpiries == 0)
        #expect(pool.statistics.acquireTimeouts == 1)
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        #expect(pool.statistics.connectionsOpened == 1)
        await pool.close()
    }

    @Test("a caller handed its connection after its deadline passed answers poolTimeout without running its body; the pool does not fail fast")
    func handedOverTooLate() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("SELECT 1")
        let (holder, open) = try await Self.heldConnection(of: pool)
        // The holder frees the connection once the caller waits, well within its deadline; the
        // caller then takes past its deadline to get to it.
        faults.holdNextHandOver(for: .milliseconds(1500))
        let (callers, runs) = try await Self.queuedCallers(on: pool, timeouts: [.seconds(1)], ["SELECT 1"])
        open.yield()
        let error = await #expect(throws: PostgresError.self) { try await callers[0].value }
        _ = try await holder.value
        #expect(error?.code == .poolTimeout)
        #expect(runs.value == 0, "the body started after its deadline")
        // Queueing used up the deadline, not a silent database: no fail-fast, nothing cut.
        #expect(pool.statistics.deadlineExpiries == 0)
        #expect(pool.statistics.connectionsDiscarded == 0)
        #expect(pool.statistics.acquireTimeouts == 1)
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        await pool.close()
    }

    @Test("a connection counts the round trips the server answered, with rows or with an error, one by one or pipelined, but not a statement's preparation")
    func answersCounted() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        try await pool.withConnection { connection in
            let answers = connection.answers
            try await connection.execute("SELECT 1")
            #expect(connection.answers == answers + 1)
            await #expect(throws: PostgresError.self) { try await connection.execute("SELECT 1/0") }
            #expect(connection.answers == answers + 2, "an error is the server's answer")
            // Two statements new to the connection: each is prepared first (a round trip whose
            // answer is not counted: the server parses and plans, reading no table), then both
            // run in one.
            let trips = connection.roundTrips
            _ = try await connection.pipeline([("SELECT 1", []), ("SELECT 2", [])])
            #expect(connection.roundTrips == trips + 3)
            #expect(connection.answers == answers + 3)
            try await connection.query("SELECT 3")
            #expect(connection.answers == answers + 4)
        }
        await pool.close()
    }

    @Test("a call cut after its time went in the queue does not put the pool into fail-fast; late cuts going on for a second with no call answered do")
    func lateCuts() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("SELECT 1")
        try await Self.lateCut(on: pool, faults)
        #expect(pool.statistics.failFastStarts == 0, "one late cut says the queue was long")
        // The database answers a call: late cuts are judged from the next one on.
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        try await Self.lateCut(on: pool, faults)
        #expect(pool.statistics.failFastStarts == 0, "the database answered since the first late cut")
        try await Self.lateCut(on: pool, faults, answerFirst: true)
        #expect(pool.statistics.failFastStarts == 0, "the cut call itself had an answer")
        // A database that answers connects but no statement: every body starts late, and the
        // late cuts go on (here 2 s) with no call answered.
        try await Self.lateCut(on: pool, faults)
        #expect(pool.statistics.failFastStarts == 1, "late cuts for 2 s with no answer")
        #expect(pool.statistics.deadlineExpiries == 4)
        await pool.close()
    }

    @Test("a late cut long after the last one, with no call in between, starts a new run: a quiet spell is not taken for silence")
    func lateCutsForgotten() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("SELECT 1")
        try await Self.lateCut(on: pool, faults)
        // No call at all for a while (the run is forgotten after two 2 s deadlines and its 1 s
        // window): the next late cut comes about 6 s after the first, with nothing answered since.
        try await Task.sleep(for: .seconds(4))
        try await Self.lateCut(on: pool, faults)
        #expect(pool.statistics.deadlineExpiries == 2)
        #expect(pool.statistics.failFastStarts == 0, "the second late cut started a run of its own")
        // Within the run's window and limits, a third late cut with nothing answered is evidence.
        try await Self.lateCut(on: pool, faults)
        #expect(pool.statistics.failFastStarts == 1)
        await pool.close()
    }

    @Test("two late cuts less than a second apart with nothing answered (waiters queued together, cut together) do not put the pool into fail-fast")
    func lateCutsInABurst() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("SELECT 1")
        // The first waiter gets the connection 1.4 s into its 2 s; the second, queued with it and
        // with 0.5 s more, gets it when the first is cut, with about 0.5 s left.
        let runs = try await Self.lateCallers(on: pool, faults, timeouts: [.seconds(2), .milliseconds(2500)], ["SELECT pg_sleep(5)"])
        #expect(pool.statistics.deadlineExpiries == 2)
        #expect(runs == 2, "both cuts were of statements (the second's connect was not cut)")
        #expect(pool.statistics.failFastStarts == 0, "two late cuts within the window")
        await pool.close()
    }

    @Test("a database host that stops answering while every call starts late: the late connect cuts put the pool into fail-fast after a second")
    func lateConnectCuts() async throws {
        let conninfo = try await TestDatabase.make()
        let address = try await TestDatabase.tcpAddress()
        let proxy = try await FaultProxy(upstreamHost: address.host, upstreamPort: address.port)
        let (pool, faults) = try await Self.poolWithFaults(conninfo: TestDatabase.conninfo(conninfo, via: "127.0.0.1", port: proxy.port))
        try await pool.query("SELECT 1")
        // Three waiters queued together, each handed the connection's place when the one before
        // is cut, with 0.9 s of its deadline left: the first's statement is cut, the next two's
        // connects (the place lost its connection with the cut) get no answer either.
        let runs = try await Self.lateCallers(
            on: pool, faults, timeouts: [.seconds(2), .milliseconds(2900), .milliseconds(3800)], ["SELECT 1"]
        ) { try proxy.send("blackhole") }
        #expect(runs == 1, "only the first reached its body; the others' connects were cut")
        #expect(pool.statistics.deadlineExpiries == 3)
        #expect(pool.statistics.failFastStarts == 1, "late cuts for 1.8 s with nothing answered, connects included")
        try proxy.send("up")
        await pool.close()
    }

    @Test("late connect cuts on a server that answers connects, only slowly: a slot a cut emptied reconnecting under load is not taken for silence")
    func lateConnectCutsAnswered() async throws {
        let (pool, faults) = try await Self.poolWithFaults()
        try await pool.query("SELECT 1")
        // Every connect takes 1.3 s. Three waiters queued together: the first's statement is cut,
        // which empties the place; the second's connect starts with 0.9 s left and is cut, then
        // answered (0.4 s later); the third's starts with 0.8 s left and is cut 1.7 s into the
        // run, after that answer.
        let runs = try await Self.lateCallers(
            on: pool, faults, timeouts: [.seconds(2), .milliseconds(2900), .milliseconds(3700)], ["SELECT pg_sleep(5)"]
        ) { faults.delayConnects(by: .milliseconds(1300)) }
        #expect(runs == 1, "only the first reached its body; the others' connects were cut")
        #expect(pool.statistics.deadlineExpiries == 3)
        #expect(pool.statistics.failFastStarts == 0, "a connect was answered since the run's first cut")
        faults.delayConnects(by: nil)
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        await pool.close()
    }

    @Test("a call cut after the fail-fast it belonged to ended starts no new one")
    func cutAfterFailFastEnded() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 2))
        let (running, ended) = (Counter(), Counter())
        // Two calls whose statements get no answer in time; the first's cut starts fail-fast, and
        // the probe (the database answers it) ends it before the second's cut.
        func stuck(_ timeout: Duration) -> Task<Void, any Error> {
            Task {
                defer { ended.increment() }
                _ = try await pool.withConnection(timeout: timeout) { connection in
                    running.increment()
                    return try await connection.query("SELECT pg_sleep(20)")
                }
            }
        }
        // Deadlines of 2 s or more: a call whose start a loop held up (another test holds one for
        // 500 ms on purpose, when tests run in parallel) still starts with its second of evidence.
        let (first, second) = (stuck(.seconds(2)), stuck(.seconds(4)))
        try await Self.waitFor("both calls to run") { running.value == 2 }
        _ = await #expect(throws: PostgresError.self) { try await first.value }
        #expect(pool.statistics.failFastStarts == 1)
        try await Self.waitFor("the probe to end fail-fast") { !pool.statistics.isFailingFast }
        #expect(ended.value == 1, "the second call still ran when fail-fast ended")
        _ = await #expect(throws: PostgresError.self) { try await second.value }
        #expect(pool.statistics.deadlineExpiries == 2)
        #expect(pool.statistics.failFastStarts == 1, "the second cut belonged to the first episode")
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        await pool.close()
    }

    @Test("callers already waiting for a connection when the pool begins to fail fast fail fast too, without running their bodies")
    func waitersFailFast() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        try await pool.query("SELECT 1")
        let holding = Counter()
        // The one connection's call goes silent past its deadline: the pool then fails fast.
        let holder = Task {
            // 2 s: started with a full second of evidence left, even if a loop held up its start.
            try await pool.withConnection(timeout: .seconds(2)) { connection in
                holding.increment()
                return try await connection.query("SELECT pg_sleep(20)")
            }
        }
        while holding.value == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let (error, runs, took) = await Self.countedCall(on: pool, timeout: .seconds(8), "SELECT 1")
        #expect(error?.code == .unavailable)
        #expect(runs == 0, "a waiter ran its body on a database the pool takes for silent")
        #expect(took < .seconds(4), "answered after \(took)")
        #expect(await #expect(throws: PostgresError.self) { try await holder.value }?.code == .timedOut)
        await pool.close()
    }

    @Test("blackholed network: the call in flight answers within 6 s, new calls fail fast, full service within 5 s after, no row left locked")
    func blackhole() async throws {
        let (conninfo, proxy, direct) = try await Self.behindProxy()
        try await direct.query("CREATE TABLE sessions (id int PRIMARY KEY, step int NOT NULL)")
        try await direct.query("INSERT INTO sessions VALUES (1, 0)")
        // Production defaults: 5 s deadline, 5 s idle-in-transaction and TCP user timeouts.
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 4))
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)

        // A transaction holds the row lock when the network goes silent between two statements.
        let started = ContinuousClock.now
        let inFlight = Task {
            try await pool.withTransaction { connection in
                try await connection.query("SELECT step FROM sessions WHERE id = 1 FOR UPDATE")
                try await Task.sleep(for: .milliseconds(500))
                try await connection.query("UPDATE sessions SET step = step + 1 WHERE id = 1")
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        try proxy.send("blackhole")
        let error = await #expect(throws: PostgresError.self) { try await inFlight.value }
        let took = ContinuousClock.now - started
        #expect(error?.isUnavailable == true)
        #expect(took < .seconds(6), "the call in flight answered after \(took)")

        // While the network stays silent, new calls fail at once.
        for _ in 0..<5 {
            let fast = ContinuousClock.now
            await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            #expect(ContinuousClock.now - fast < .seconds(1))
        }
        #expect(pool.statistics.isFailingFast)

        // The network comes back: full service within 5 s.
        try await Task.sleep(for: .seconds(2))
        try proxy.send("up")
        let back = ContinuousClock.now
        var answered = false
        while !answered, ContinuousClock.now - back < .seconds(5) {
            answered = (try? await pool.query("SELECT 1")) != nil
            if !answered { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(answered, "no answer within 5 s after the network came back")
        // And nothing holds the row: it can be locked at once (NOWAIT), and the update never happened.
        let step = try await pool.withTransaction { connection in
            try await connection.query("SELECT step FROM sessions WHERE id = 1 FOR UPDATE NOWAIT")[0].decode(Int.self, at: 0)
        }
        #expect(step == 0)
        await pool.close()
        await direct.close()
    }
}

/// A thread-safe counter for bodies that run on pool threads.
final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

/// A server that completes PostgreSQL's startup (authentication OK, ready for a query) and then
/// reads and answers nothing (or nothing after the setup): a stuck backend behind a pooler, or a
/// wedged proxy.
final class MuteServer: @unchecked Sendable {
    // Touched only by the test that owns it.
    private let process = Process()
    let port: Int
    private let output = Pipe()

    static let script = FaultProxy.parentWatch + """
        import socket, struct, sys, threading
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        print(server.getsockname()[1], flush=True)
        def serve(client):
            while True:
                head = client.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = client.recv(struct.unpack("!I", head)[0] - 4, socket.MSG_WAITALL)
                if struct.unpack("!I", body[:4])[0] in (80877103, 80877104):
                    client.sendall(b"N")  # no TLS, no GSS
                    continue
                break
            client.sendall(b"R" + struct.pack("!II", 8, 0) + b"Z" + struct.pack("!I", 5) + b"I")
            if sys.argv[1] == "answers-setup":
                # The first query (a connection's SETs) is answered; nothing after it.
                kind = client.recv(1, socket.MSG_WAITALL)
                length = struct.unpack("!I", client.recv(4, socket.MSG_WAITALL))[0]
                client.recv(length - 4, socket.MSG_WAITALL)
                client.sendall(b"C" + struct.pack("!I", 8) + b"SET\\0" + b"Z" + struct.pack("!I", 5) + b"I")
            if sys.argv[1] == "forgets-statements":
                # Answers the setup and every Parse; every Execute of a prepared statement is
                # refused with 26000, as behind a pooler whose backends do not keep them.
                parsed, refused = False, False
                while True:
                    kind = client.recv(1, socket.MSG_WAITALL)
                    if not kind or kind == b"X":
                        return
                    length = struct.unpack("!I", client.recv(4, socket.MSG_WAITALL))[0]
                    client.recv(length - 4, socket.MSG_WAITALL)
                    if kind == b"Q":
                        client.sendall(b"C" + struct.pack("!I", 8) + b"SET\\0" + b"Z" + struct.pack("!I", 5) + b"I")
                    elif kind == b"P":
                        parsed = True
                    elif kind == b"B":
                        refused = True
                    elif kind == b"S":
                        out = b"1" + struct.pack("!I", 4) if parsed else b""
                        if refused:
                            fields = b"SERROR\\0VERROR\\0C26000\\0Mprepared statement does not exist\\0\\0"
                            out += b"E" + struct.pack("!I", 4 + len(fields)) + fields
                        client.sendall(out + b"Z" + struct.pack("!I", 5) + b"I")
                        parsed, refused = False, False
            while client.recv(65536):
                pass
        while True:
            client, _ = server.accept()
            threading.Thread(target=serve, args=(client,), daemon=True).start()
        """

    /// What the server answers after the startup.
    enum Mode: String {
        /// Nothing.
        case mute
        /// The first query of each connection (its setup), then nothing.
        case answersSetup = "answers-setup"
        /// The setup and every Parse; every Execute is refused with 26000 (the prepared
        /// statement does not exist), as behind a pooler whose backends do not keep them.
        case forgetsStatements = "forgets-statements"
    }

    init(_ mode: Mode = .mute) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, mode.rawValue]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = output.fileHandleForReading.availableData
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw TestFailure("the mute server did not start")
        }
        self.port = port
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}

extension DeadlineTests {
    // The connection's setup (the SETs of its limits) was a blocking round trip with no bound
    // of its own: against a server that completes the startup and then answers nothing, a
    // connect, and the fail-fast probe, waited for good, and the probe never tried again.
    @Test("a server that completes the startup and then answers nothing: opening a connection fails within its connect timeout")
    func muteAfterStartup() async throws {
        let server = try MuteServer()
        let opened = Mutex<PostgresError??>(nil)
        let conninfo = "host=127.0.0.1 port=\(server.port) user=baton dbname=baton sslmode=disable gssencmode=disable"
        Thread {
            do {
                _ = try PostgresConnection(conninfo: conninfo, limits: .init(connect: .seconds(1)))
                opened.withLock { $0 = .some(nil) }
            } catch {
                opened.withLock { $0 = .some(error as? PostgresError ?? PostgresError(code: .protocolViolation, message: "\(error)")) }
            }
        }.start()
        // Far past the 1 s connect timeout: still nothing means the setup was still waiting.
        let deadline = ContinuousClock.now + .seconds(20)
        while opened.withLock({ $0 }) == nil, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let outcome = try #require(opened.withLock { $0 }, "the setup was still waiting after 20 s")
        let failure = try #require(outcome, "a server that answers no statement gave a working connection")
        #expect(failure.code == .connectionFailed, "\(failure)")
        #expect(failure.message.contains("setup"), "\(failure)")
    }
}

extension DeadlineTests {
    // A statement the server says it does not know (26000: someone ran DISCARD ALL) is prepared
    // again and retried once. It was retried for as long as the answer came, which behind a
    // pooler that does not keep prepared statements is every time: until the deadline cut it.
    @Test("a prepared statement refused as unknown again after it was prepared again is an error at once, not a retry until the deadline")
    func unknownStatementRetriedOnce() async throws {
        let server = try MuteServer(.forgetsStatements)
        let pool = PostgresPool(
            configuration: .init(
                conninfo: "host=127.0.0.1 port=\(server.port) user=baton dbname=baton sslmode=disable gssencmode=disable", maxConnections: 1,
                callTimeout: .seconds(3)))
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.sqlState == SQLState.invalidSQLStatementName, "\(String(describing: error))")
        #expect(pool.statistics.failFastStarts == 0)
        await pool.close()
    }
}

extension DeadlineTests {
    // A place whose connect failed rested (and its caller waited for another connection)
    // whenever another connection was counted open, dead ones included, or being opened: when
    // the database went away under load, every place rested in turn, callers queued behind
    // them until the pool's timeout, and once the database was back the pool served on the
    // few places not resting until each pause (1 s, doubling to 30 s) ran out.
    @Test("a database that goes away under load: calls fail at once and no place rests; once it is back, every place serves at once")
    func outageRestsNoPlace() async throws {
        let (conninfo, proxy, direct) = try await Self.behindProxy()
        await direct.close()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 4, acquireTimeout: .seconds(5), callTimeout: .seconds(5)))
        try await Self.together(4, on: pool, within: .seconds(10))
        #expect(pool.statistics.open == 4, "\(pool.statistics)")

        // The server goes away: its connections end, new ones are refused.
        try proxy.send("down")
        let outcomes = await withTaskGroup(of: [(Duration, PostgresError?)].self) { group in
            let end = ContinuousClock.now + .seconds(3)
            for _ in 0..<16 {
                group.addTask {
                    var outcomes: [(Duration, PostgresError?)] = []
                    while ContinuousClock.now < end {
                        let started = ContinuousClock.now
                        do {
                            _ = try await pool.query("SELECT 1")
                            outcomes.append((ContinuousClock.now - started, nil))
                        } catch {
                            outcomes.append((ContinuousClock.now - started, error as? PostgresError))
                        }
                    }
                    return outcomes
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let slowest = outcomes.map(\.0).max() ?? .zero
        #expect(slowest < .seconds(2), "a call waited \(slowest) for a database that was down")
        #expect(outcomes.allSatisfy { $0.1?.code == .connectionFailed || $0.1?.code == .connectionLost }, "\(outcomes.compactMap(\.1).map(\.code).filter { $0 != .connectionFailed && $0 != .connectionLost }.prefix(3))")
        #expect(pool.statistics.resting == 0, "\(pool.statistics)")

        // It comes back: four callers hold a connection each at the same time within 3 s.
        try proxy.send("up")
        try await Self.together(4, on: pool, within: .seconds(3))
        await pool.close()
    }

    /// `count` callers on `pool` that each, holding a connection, wait for all of them to hold
    /// one: they fail unless the pool gives `count` connections at once within `limit`.
    static func together(_ count: Int, on pool: PostgresPool, within limit: Duration) async throws {
        let inside = Counter()
        let end = ContinuousClock.now + limit
        let seen = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<count {
                group.addTask {
                    while ContinuousClock.now < end {
                        do {
                            return try await pool.withConnection(timeout: end - ContinuousClock.now) { connection in
                                _ = try await connection.query("SELECT 1")
                                inside.increment()
                                while inside.value < count, ContinuousClock.now < end {
                                    try await Task.sleep(for: .milliseconds(5))
                                }
                                return inside.value >= count
                            }
                        } catch let error as PostgresError where error.isUnavailable {
                            try await Task.sleep(for: .milliseconds(50))
                        }
                    }
                    return false
                }
            }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(seen.allSatisfy { $0 }, "\(count) callers did not hold a connection each at once within \(limit): \(pool.statistics)")
    }
}

extension DeadlineTests {
    // A call that started in time and was cut always started fail-fast, though the database had
    // answered its every statement within milliseconds: a long body of quick statements (or one
    // stretched by a busy loop) threw away every caller waiting and answered 503 until the probe.
    @Test("a long body of quick statements cut by its deadline: the connection is replaced, but the pool does not fail fast and the next caller is served")
    func cutWhileAnswered() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: .seconds(2)))
        _ = try await pool.query("SELECT 1")
        let long = Task {
            try await pool.withConnection { connection in
                for _ in 0..<40 {
                    _ = try await connection.query("SELECT 1")
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        try await Task.sleep(for: .milliseconds(1000))
        // Waiting for the connection when the long body is cut: its own deadline has a second left then.
        let next = Task { try await pool.query("SELECT 2")[0].decode(Int.self, at: 0) }
        let cut = await #expect(throws: PostgresError.self) { try await long.value }
        #expect(cut?.code == .timedOut, "\(String(describing: cut))")
        #expect(try await next.value == 2)
        #expect(pool.statistics.failFastStarts == 0, "\(pool.statistics)")
        #expect(pool.statistics.deadlineExpiries == 1 && pool.statistics.connectionsDiscarded == 1, "\(pool.statistics)")
        await pool.close()
    }
}

extension DeadlineTests {
    /// How many threads named `name` run in this process now.
    static func threads(named name: String) -> Int { processThreadNames().count { $0.hasPrefix(name) } }

    /// How many fail-fast probes run in this process now.
    /// The thread ids of the process's probes: a test follows its own probe by id, which a
    /// probe left by an earlier test and ending meanwhile cannot stand in for.
    static func probeThreadIDs() -> Set<String> { Set(processThreads().filter { $0.name == "baton-db-probe" }.map(\.id)) }

    /// Waits, up to 8 s, for the probe threads in `ours` to end; whether they did.
    static func probesEnded(_ ours: Set<String>) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(8)
        while !ours.isDisjoint(with: probeThreadIDs()), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(100)) }
        return ours.isDisjoint(with: probeThreadIDs())
    }

    /// A pool of one on `server` whose first call is cut (the server answers no statement): it
    /// fails fast, and its probe runs.
    static func failingFast(on server: MuteServer) async throws -> PostgresPool {
        let pool = PostgresPool(
            configuration: .init(
                conninfo: "host=127.0.0.1 port=\(server.port) user=baton dbname=baton sslmode=disable gssencmode=disable", maxConnections: 1,
                callTimeout: .seconds(1)))
        await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(pool.statistics.isFailingFast)
        return pool
    }

    // The probe's `SELECT 1` had no bound: against a server that answers connects and no
    // statement it waited for good, so the pool failed fast for as long as the process lived,
    // whatever the server did next, and `close()` did not end it.
    @Test("the fail-fast probe gives up each try within its bound: against a server that answers connects and no statement, closing the pool ends it", .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/task")))
    func probeBounded() async throws {
        let server = try MuteServer(.answersSetup)
        let before = Self.probeThreadIDs()
        let pool = try await Self.failingFast(on: server)
        try await Self.waitFor("the probe to start") { !Self.probeThreadIDs().subtracting(before).isEmpty }
        let ours = Self.probeThreadIDs().subtracting(before)
        await pool.close()
        // A try takes at most its 2 s bound, then the probe sees the pool closed.
        #expect(try await Self.probesEnded(ours), "the probe still runs 8 s after the pool closed")
    }

    @Test("a pool let go of without close() while it fails fast ends its probe", .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/task")))
    func probeOfAPoolLetGo() async throws {
        let server = try MuteServer(.answersSetup)
        let before = Self.probeThreadIDs()
        var pool: PostgresPool? = try await Self.failingFast(on: server)
        try await Self.waitFor("the probe to start") { !Self.probeThreadIDs().subtracting(before).isEmpty }
        let ours = Self.probeThreadIDs().subtracting(before)
        weak let gone = pool
        pool = nil
        let ended = try await Self.probesEnded(ours)
        #expect(gone == nil, "something else holds the pool")
        #expect(ended, "the probe still runs 8 s after the pool was let go of")
    }
}

extension DeadlineTests {
    /// The process's open descriptors, each with what it is open on (the listing's own
    /// descriptor is one of them, and its number is free again once the listing is done).
    static func descriptors() -> [Int32: String] {
        var open: [Int32: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
            guard let descriptor = Int32(name) else { continue }
            open[descriptor] = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)")) ?? ""
        }
        return open
    }

    // On the event loops (BATON_DB_LOOPS=0) a connection's socket is moved with `dup` and
    // `dup2`, which drop the close-on-exec flag libpq set: a child process started while the
    // connection was open (a studio drawing, a test's helper) held the server's socket, so a
    // deadline's cut sent the server no end.
    @Test("every descriptor a pooled connection opens is closed on exec", .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/fd")))
    func descriptorsCloseOnExec() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1))
        let before = Self.descriptors()
        try await pool.withConnection { connection in
            _ = try await connection.query("SELECT 1")
            let opened = Self.descriptors().filter { before[$0.key] != $0.value && $0.value.hasPrefix("socket:") }.keys
            #expect(!opened.isEmpty)
            for descriptor in opened {
                let flags = fcntl(descriptor, F_GETFD)
                #expect(flags >= 0 && flags & FD_CLOEXEC != 0, "descriptor \(descriptor) stays open in a child")
            }
        }
        await pool.close()
    }
}

extension DeadlineTests {
    // Before COMMIT the connection asks whether the server spoke first (the FATAL of a
    // terminated backend): then the transaction ended on the server, and the failure is a
    // plain lost connection that `withTransaction` runs again. On the event loops, a FATAL
    // still unread on NIO's side of the socket answered "no", so the failure was taken for an
    // unknown commit outcome, which is never retried.
    @Test(
        "a backend that ended before COMMIT was sent, its end not yet read by any loop: a lost connection, and the transaction runs again",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] == "0", "on the event loops"))
    func endedBeforeCommitUnread() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1))
        try await pool.query("CREATE TABLE marks (id serial PRIMARY KEY)")
        let runs = Counter()
        try await pool.withTransaction { connection in
            runs.increment()
            try await connection.query("INSERT INTO marks DEFAULT VALUES")
            guard runs.value == 1 else { return }
            // The backend is ended while the body holds its loop (a blocking connection of its
            // own), so no loop reads its FATAL before COMMIT.
            try Self.terminate(connection.backendPID, conninfo: conninfo)
        }
        #expect(runs.value == 2, "the transaction ran again on a fresh connection")
        #expect(try await pool.query("SELECT count(*) FROM marks")[0].decode(Int.self, at: 0) == 1)
        await pool.close()
    }

    /// Ends backend `pid` and waits, blocking the calling thread, until it is gone.
    static func terminate(_ pid: Int32, conninfo: String) throws {
        let killer = try PostgresConnection(conninfo: conninfo)
        _ = try killer.query("SELECT pg_terminate_backend($1)", [pid])
        for _ in 0..<200 where try killer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [pid])[0].decode(Int.self, at: 0) > 0 {
            usleep(5_000)
        }
        usleep(50_000)
    }
}


extension DeadlineTests {
    // Each cut asked the server to cancel on a thread of its own, and libpq's PQcancel has no
    // timeout: behind a silent network every cut call held a thread until the network answered.
    @Test("cut calls behind a silent network hold at most 16 cancel requests' threads", .enabled(if: FileManager.default.fileExists(atPath: "/proc/self/task")))
    func cancelThreadsBounded() async throws {
        let (conninfo, proxy, direct) = try await Self.behindProxy()
        await direct.close()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 20, acquireTimeout: .seconds(20), callTimeout: .seconds(20)))
        try await Self.together(20, on: pool, within: .seconds(20))
        let before = Self.threads(named: "baton-db-cancel")
        try proxy.send("blackhole")
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<20 { group.addTask { _ = try? await pool.withConnection(timeout: .seconds(1)) { try await $0.query("SELECT 1") } } }
        }
        try await Task.sleep(for: .milliseconds(300))
        let cancelling = Self.threads(named: "baton-db-cancel") - before
        try proxy.send("up")
        #expect(cancelling > 0 && cancelling <= 16, "\(cancelling) cancel requests' threads")
        await pool.close()
    }
}

extension DeadlineTests {
    // A connect that failed with no refusal from the server (a proxy in front closing new
    // connections, a name that did not resolve for a moment) while another connection worked
    // failed its caller, and its empty place went back where the next caller took it first:
    // every caller then met the failing connect, while the working connection sat idle.
    @Test("a place whose connects fail while another connection answers: callers are served by the working connection, at once or after waiting for it")
    func failingConnectBesideAWorkingOne() async throws {
        let faults = PostgresFaults()
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 2, faults: faults))
        _ = try await pool.query("SELECT 1")
        faults.failConnects(true)
        defer { faults.failConnects(false) }
        // Two at once: the second needs the other place, whose connect fails; it waits for the
        // first's connection.
        async let first = pool.query("SELECT pg_sleep(0.1)")
        async let second = pool.query("SELECT pg_sleep(0.1)")
        _ = try await (first, second)
        // One at a time: each is served by the working connection.
        for _ in 0..<20 { _ = try await pool.query("SELECT 1") }
        #expect(pool.statistics.open == 1, "\(pool.statistics)")
        await pool.close()
    }
}
