import BatonPostgres
import BatonTestSupport
import Foundation
import NIOCore
import NIOPosix
import Testing

@Suite("Connection pool")
struct PoolTests {
    /// No test here is about deadlines (DeadlineTests are): calls get the test suite's generous
    /// one, since the suite runs many tests at once on two cores.
    static let callTimeout = Duration.seconds(30)

    /// A caller that keeps a connection of `pool`, once it has one, until the gate is finished
    /// (no statement runs meanwhile, so a slow machine cannot end it early or late).
    static func holder(on pool: PostgresPool, timeout: Duration? = nil) -> (Task<Void, any Error>, AsyncStream<Void>.Continuation) {
        let (gate, open) = AsyncStream<Void>.makeStream()
        return (Task { try await pool.withConnection(timeout: timeout) { _ in for await _ in gate { break } } }, open)
    }

    /// A caller asking `pool` for a connection: how long it waited, from its own start, and how
    /// it ended. `onEventLoop`: the caller runs on an event loop, as an HTTP request does (with
    /// database threads, it then waits for its connection on one of them).
    static func waiter(on pool: PostgresPool, timeout: Duration?, onEventLoop: Bool = false) -> Task<(Duration, PostgresError?), Never> {
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        return Task(executorPreference: onEventLoop ? LoopExecutor(loop) : nil) {
            let started = ContinuousClock.now
            let error: PostgresError?
            do {
                try await pool.withConnection(timeout: timeout) { _ in }
                error = nil
            } catch let failure {
                error = failure as? PostgresError
            }
            // Served or refused, the caller goes on on its own loop, not on a database thread.
            if onEventLoop { #expect(loop.inEventLoop) }
            return (ContinuousClock.now - started, error)
        }
    }

    @Test(
        "on the event loops (BATON_DB_LOOPS=0), a caller gets a connection driven by its own loop: statements sent and answered there, no hop",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] == "0", "scripts/test.sh runs this suite again with it"))
    func onTheCallersLoop() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 4, callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        // Each loop in turn, three calls each: the first opens a connection, the others reuse it.
        for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
            try await withTaskExecutorPreference(LoopExecutor(loop)) {
                for _ in 0..<3 {
                    let (before, after, value) = try await pool.withConnection { connection in
                        let before = loop.inEventLoop
                        let value = try await connection.query("SELECT 41 + 1")[0].decode(Int.self, at: 0)
                        return (before, loop.inEventLoop, value)
                    }
                    #expect(value == 42)
                    #expect(before && after, "the body ran on the caller's loop, before and after its round trip")
                    #expect(loop.inEventLoop)
                }
            }
        }
        #expect(pool.statistics.connectionsOpened == MultiThreadedEventLoopGroup.singleton.makeIterator().map { $0 }.count)
    }

    @Test(
        "on database threads, a caller on an event loop has its body run on a database thread and goes on on its own loop, after waiting for a connection too",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0", "the database threads"))
    func backOnTheCallersLoop() async throws {
        let pool = PostgresPool(
            configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, acquireTimeout: .seconds(60), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        // Four callers on each loop at once, on a pool of one: most wait for the connection a
        // database thread hands over.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for loop in MultiThreadedEventLoopGroup.singleton.makeIterator() {
                for _ in 0..<4 {
                    group.addTask {
                        let executor = LoopExecutor(loop)
                        try await withTaskExecutorPreference(executor) {
                            let handedIn = executor.fromElsewhere.load(ordering: .relaxed)
                            let (onLoop, value) = try await pool.withConnection { connection in
                                (loop.inEventLoop, try await connection.query("SELECT 41 + 1")[0].decode(Int.self, at: 0))
                            }
                            #expect(value == 42)
                            #expect(!onLoop, "the body ran on its connection's database thread")
                            #expect(loop.inEventLoop, "the caller went on on its own loop")
                            // The way home (and a waiter's wake-up) is the pool's, on the caller's
                            // loop: nothing came back through the caller's own executor from
                            // another thread, as leaving the database thread's preference would.
                            #expect(executor.fromElsewhere.load(ordering: .relaxed) == handedIn)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(pool.statistics.inUse == 0 && pool.statistics.waiters == 0)
    }

    @Test(
        "callers on event loops that are handed another database thread's connection than the one they waited on run their whole body on that connection's thread",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0" && PostgresEventLoop.shared.count >= 2, "two database threads"))
    func waitersRunOnTheirConnectionsThread() async throws {
        // A pool of two, with two database threads (scripts/test.sh runs this suite with
        // BATON_DB_LOOPS=2) one connection on each. Two holders take both; callers on the event
        // loops queue, each waiting on the thread of a slot in turn; then only the holder on the
        // second thread lets go, so that connection serves every caller, half of them waiting on
        // the first thread. Each body must move to the second thread and stay there across its
        // round trips, or two threads would drive one libpq connection.
        let pool = PostgresPool(
            configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 2, acquireTimeout: .seconds(60), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        let (named, name) = AsyncStream<(Int, String)>.makeStream()
        let gates = (0..<2).map { _ in AsyncStream<Void>.makeStream() }
        // Released however the test ends (a failed expectation that throws included).
        defer { for gate in gates { gate.continuation.finish() } }
        let holders = (0..<2).map { index in
            Task {
                // A holder that cannot get its connection ends the names, so the test fails, not hangs.
                defer { name.finish() }
                try await pool.withConnection { _ in
                    name.yield((index, currentThreadName()))
                    for await _ in gates[index].stream { break }
                }
            }
        }
        var holderThreads: [Int: String] = [:]
        for await (index, thread) in named {
            holderThreads[index] = thread
            if holderThreads.count == 2 { break }
        }
        try #require(holderThreads.count == 2 && holderThreads.values.allSatisfy { $0.hasPrefix("baton-db-io-") }, "\(holderThreads)")
        try #require(Set(holderThreads.values).count == 2, "one connection on each thread, or nothing can move: \(holderThreads)")
        let callers = MultiThreadedEventLoopGroup.singleton.makeIterator().flatMap { loop in
            (0..<4).map { _ in
                Task(executorPreference: LoopExecutor(loop)) {
                    try await pool.withConnection { connection in
                        var seen = [currentThreadName()]
                        for round in 0..<3 {
                            let value = try await connection.query("SELECT $1::int + 1", [round])[0].decode(Int.self, at: 0)
                            #expect(value == round + 1)
                            seen.append(currentThreadName())
                        }
                        return seen
                    }
                }
            }
        }
        for _ in 0..<1000 where pool.statistics.waiters < callers.count { try await Task.sleep(for: .milliseconds(10)) }
        #expect(pool.statistics.waiters == callers.count)
        // The holder on the last thread (by name) lets go; the other keeps its connection.
        let released = try #require(holderThreads.max { $0.value < $1.value })
        gates[released.key].continuation.finish()
        for caller in callers {
            let seen = try await caller.value
            #expect(seen == Array(repeating: released.value, count: 4), "one body's threads, before and after each round trip")
        }
        for gate in gates { gate.continuation.finish() }
        for holder in holders { try await holder.value }
        #expect(pool.statistics.inUse == 0 && pool.statistics.waiters == 0)
    }

    @Test(
        "with several database threads, callers on event loops do not wait on the thread of a resting place, and the caller whose place rests keeps its turn: a freed connection serves them in their order",
        .enabled(if: ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] != "0" && PostgresEventLoop.shared.count >= 2, "two database threads"))
    func waitersSkipRestingThreads() async throws {
        // A pool of two on two threads, for a role the server lets open one connection. A holder
        // keeps the first place's; a caller takes the second place, is refused, rests it and
        // waits at the head of the queue. Callers on the event loops then queue one by one.
        // Waiting on the resting place's thread, every other one would be passed over by the
        // next that waits on the open connection's thread (`release` serves, among the first
        // four, a waiter on the freeing thread first), and they would be served out of order.
        // The caller at the head waits on no thread (it runs on none): it may be passed over
        // three times, not until the queue empties.
        // The refused place rests longer than the test, whatever the machine's load: were it
        // tried again while callers wait, it would be refused again and the order would prove
        // nothing.
        let limited = try await LimitedRole(connectionLimit: 1, maxConnections: 2, acquireTimeout: .seconds(60), rest: .seconds(120))
        defer { limited.dispose() }
        let pool = limited.pool
        let (holder, gate) = Self.holder(on: pool)
        defer { gate.finish() }
        for _ in 0..<1000 where pool.statistics.open < 1 || pool.statistics.inUse < 1 { try await Task.sleep(for: .milliseconds(10)) }
        let (served, serve) = AsyncStream<Int>.makeStream()
        let refused = Task { try await pool.withConnection { _ in _ = serve.yield(-1) } }
        for _ in 0..<1000 where pool.statistics.resting < 1 || pool.statistics.waiters < 1 { try await Task.sleep(for: .milliseconds(10)) }
        try #require(pool.statistics.resting == 1 && pool.statistics.waiters == 1, "\(pool.statistics)")
        var callers: [Task<Void, any Error>] = []
        for index in 0..<8 {
            callers.append(
                Task(executorPreference: LoopExecutor(MultiThreadedEventLoopGroup.singleton.next())) {
                    try await pool.withConnection { _ in _ = serve.yield(index) }
                })
            for _ in 0..<1000 where pool.statistics.waiters < index + 2 { try await Task.sleep(for: .milliseconds(1)) }
        }
        #expect(pool.statistics.waiters == 9, "\(pool.statistics)")
        gate.finish()
        try await holder.value
        for caller in callers { try await caller.value }
        try await refused.value
        serve.finish()
        let order = await served.reduce(into: [Int]()) { $0.append($1) }
        #expect(pool.statistics.connectFailures == 1, "the resting place was not tried again: \(pool.statistics)")
        #expect(order == [0, 1, 2, -1, 3, 4, 5, 6, 7])
    }

    #if os(Linux)
    @Test("the database loops' threads carry their own names, as top -H and perf show them")
    func threadNames() async throws {
        let loops = PostgresEventLoop.shared.count
        let names = Set(processThreadNames())
        for index in 0..<loops {
            #expect(names.contains("baton-db-io-\(index)"), "threads: \(names.sorted())")
        }
        // A name longer than the kernel keeps is cut to its first 15 bytes, not dropped.
        let seen: String = await withCheckedContinuation { continuation in
            startThread(named: "baton-test-name-too-long") { continuation.resume(returning: currentThreadName()) }
        }
        #expect(seen == "baton-test-name")
    }
    #endif

    @Test("an exhausted pool makes callers wait, then times out with a clear error")
    func exhaustion() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 2, acquireTimeout: .milliseconds(300), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        // Two holders occupy both connections until their gates open. (They held them for a
        // fixed 1.5 s once: in a loaded CI run the two were never seen in use at once, and the
        // pool was never exhausted.)
        let holders = (0..<2).map { _ in Self.holder(on: pool) }
        // Released however the test ends (a failed expectation that throws included).
        defer { for (_, open) in holders { open.finish() } }
        // Until both holders run, their connections open (a loaded machine may start their
        // tasks late, and open connections slowly: a CI run saw more than a second).
        for _ in 0..<1000 where pool.statistics.inUse < 2 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(pool.statistics.inUse == 2)

        let started = ContinuousClock.now
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        let waited = ContinuousClock.now - started
        #expect(error?.code == .poolTimeout)
        #expect(error?.message.contains("no database connection became free") == true)
        #expect(error?.isUnavailable == true)
        #expect(waited >= .milliseconds(250))
        #expect(pool.statistics.acquireTimeouts == 1)

        // A waiter with a longer budget is served as soon as a holder finishes.
        let patient = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, acquireTimeout: .seconds(10), callTimeout: Self.callTimeout))
        defer { Task { await patient.close() } }
        let holder = Task { try await patient.withConnection { try await $0.query("SELECT pg_sleep(0.3)") } }
        try await Task.sleep(for: .milliseconds(50))
        #expect(try await patient.query("SELECT 2")[0].decode(Int.self, at: 0) == 2)
        _ = try await holder.value
        for (holder, open) in holders {
            open.finish()
            try await holder.value
        }
        #expect(pool.statistics.inUse == 0)
    }

    @Test(
        "each waiter gives up at its own time: a later one with a shorter deadline first, not with the waiter queued before it",
        arguments: [false, true])
    func waitersExpireInDeadlineOrder(onEventLoop: Bool) async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, acquireTimeout: .seconds(2), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        // The holder keeps the one connection until the gate closes.
        let (holder, open) = Self.holder(on: pool)
        for _ in 0..<500 where pool.statistics.inUse < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // Queued first, it gives up at the acquire timeout (2 s).
        let patient = Self.waiter(on: pool, timeout: nil, onEventLoop: onEventLoop)
        for _ in 0..<500 where pool.statistics.waiters < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // Queued after it with a deadline of 300 ms: it must not wait for the first one's timer.
        let hurried = Self.waiter(on: pool, timeout: .milliseconds(300), onEventLoop: onEventLoop)
        let (hurriedWaited, hurriedError) = await hurried.value
        #expect(hurriedError?.code == .poolTimeout)
        #expect(hurriedError?.message.contains("within the call's deadline") == true)
        // Decided by order, not by the clock (the whole suite shares two cores): the first
        // waiter is still queued when the second gives up.
        #expect(pool.statistics.waiters == 1, "the second waiter waited for the first one's timer")
        let (patientWaited, patientError) = await patient.value
        #expect(patientError?.code == .poolTimeout)
        #expect(patientError?.message.contains("within 2.0 seconds") == true)
        #expect(patientWaited >= .milliseconds(1900))
        #expect(hurriedWaited < patientWaited)
        #expect(pool.statistics.acquireTimeouts == 2)
        #expect(pool.statistics.waiters == 0)
        open.finish()
        _ = try await holder.value
    }

    @Test("waiters expire through one timer: served before its time, the first waiter's expiry still comes for the next", .timeLimit(.minutes(1)))
    func oneTimerServesEveryWaiter() async throws {
        // 2 s to be served in: with 400 ms, a fresh-clone CI run on a loaded machine let the
        // first waiter expire too before the holder let go.
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, acquireTimeout: .seconds(2), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        let (holder, openFirst) = Self.holder(on: pool)
        for _ in 0..<500 where pool.statistics.inUse < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // The first waiter arms the pool's timer; once served, it keeps the connection.
        let (served, openSecond) = Self.holder(on: pool, timeout: .seconds(30))
        for _ in 0..<500 where pool.statistics.waiters < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // Queued behind it, with a later expiry: no timer of its own.
        let next = Self.waiter(on: pool, timeout: nil)
        for _ in 0..<500 where pool.statistics.waiters < 2 { try await Task.sleep(for: .milliseconds(10)) }
        openFirst.finish()
        _ = try await holder.value
        // The timer armed for the first waiter finds nobody due and arms itself for the second.
        let (waited, error) = await next.value
        #expect(error?.code == .poolTimeout)
        #expect(waited >= .milliseconds(1950))
        #expect(pool.statistics.acquireTimeouts == 1)
        #expect(pool.statistics.waiters == 0)
        openSecond.finish()
        _ = try await served.value
    }

    @Test("a read-only snapshot ends with the next caller's first statements, or on its own when nobody comes")
    func snapshotEndsWithTheNextLease() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, acquireTimeout: .seconds(10), callTimeout: Self.callTimeout))
        let writer = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await pool.close(); await writer.close() } }
        try await pool.query("CREATE TABLE counters (id int PRIMARY KEY, value int NOT NULL)")
        try await pool.query("INSERT INTO counters VALUES (1, 1)")
        let read = "SELECT value FROM counters WHERE id = 1"
        let pid = try await pool.withConnection { $0.backendPID }
        /// What the server says the pool's connection is doing.
        func serverState() async throws -> String {
            let rows = try await writer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [Int(pid)])
            return rows.isEmpty ? "gone" : try rows[0].decode(String.self, at: 0)
        }

        // Every statement prepared once (preparing takes a round trip of its own, once per connection).
        _ = try await pool.withTransaction(isolation: .readOnlySnapshot) { try await $0.query(read) }
        _ = try await pool.withTransaction { try await $0.query(read) }

        // Nobody leasing the connection next: the snapshot is ended on its own, soon.
        let before = try await pool.withConnection { $0.roundTrips }
        let alone = try await pool.withTransaction(isolation: .readOnlySnapshot) { try await $0.query(read)[0].decode(Int.self, at: 0) }
        #expect(alone == 1)
        for _ in 0..<500 where try await serverState() != "idle" { try await Task.sleep(for: .milliseconds(10)) }
        #expect(try await serverState() == "idle", "an idle connection does not keep a snapshot open")
        #expect(try await pool.withConnection { $0.roundTrips } - before == 2, "BEGIN with the read, then the end on its own")

        // A caller waiting: the snapshot's end travels with its first statements.
        let (gate, open) = AsyncStream<Void>.makeStream()
        let (reached, reach) = AsyncStream<Void>.makeStream()
        let (values, trips) = try await pool.countingRoundTrips {
            let reader = Task {
                try await pool.withTransaction(isolation: .readOnlySnapshot) { db in
                    let value = try await db.query(read)[0].decode(Int.self, at: 0)
                    reach.yield()
                    for await _ in gate { break }
                    return value
                }
            }
            for await _ in reached { break }
            // Changed by another connection while the snapshot is open.
            try await writer.query("UPDATE counters SET value = 2 WHERE id = 1")
            let next = Task { try await pool.withTransaction { try await $0.query(read)[0].decode(Int.self, at: 0) } }
            for _ in 0..<500 where pool.statistics.waiters < 1 { try await Task.sleep(for: .milliseconds(10)) }
            #expect(pool.statistics.waiters == 1)
            open.finish()
            return (try await reader.value, try await next.value)
        }
        #expect(values.0 == 1, "the snapshot read what was there when it began")
        #expect(values.1 == 2, "the next caller ran in a transaction of its own, not inside the snapshot")
        #expect(trips == 3, "the reader's BEGIN with its read; the waiter's ROLLBACK, BEGIN and read; its COMMIT")
        #expect(try await serverState() == "idle")
        #expect(pool.statistics.connectionsDiscarded == 0)
    }

    @Test("a caller handed a connection with an open snapshot after its deadline leaves the snapshot to end on its own")
    func lateCallerLeavesSnapshotToEnd() async throws {
        let conninfo = try await TestDatabase.make()
        let faults = PostgresFaults()
        // The server leaves an idle transaction alone for a minute, not the default 5 s: the
        // snapshot must be ended by the pool. Under ThreadSanitizer, in a parallel pass, the late
        // caller came back 4.9 s after it was handed the connection, and the server's own
        // timeout ended the session first.
        let pool = PostgresPool(configuration: .init(
            conninfo: conninfo, maxConnections: 1, callTimeout: Self.callTimeout, limits: .init(idleInTransaction: .seconds(60)), faults: faults))
        let watcher = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await pool.close(); await watcher.close() } }
        let pid = try await pool.withConnection { $0.backendPID }
        func serverState() async throws -> String {
            let rows = try await watcher.query("SELECT state FROM pg_stat_activity WHERE pid = $1", [Int(pid)])
            return rows.isEmpty ? "gone" : try rows[0].decode(String.self, at: 0)
        }
        // A reader leaves its snapshot open for the next lease; a caller waits for the connection
        // meanwhile, and takes past its deadline to get to it (its thread busy).
        let (gate, open) = AsyncStream<Void>.makeStream()
        let reading = Counter()
        let reader = Task {
            try await pool.withTransaction(isolation: .readOnlySnapshot) { db in
                let value = try await db.query("SELECT 1")[0].decode(Int.self, at: 0)
                reading.increment()
                for await _ in gate { break }
                return value
            }
        }
        // Every wait here is bounded: a scenario that did not come about fails the test rather
        // than hanging the pass (a CI pass hung here once, for 340 s, in one of these loops).
        let noLater = ContinuousClock.now + .seconds(30)
        while reading.value == 0 {
            guard ContinuousClock.now < noLater else {
                Issue.record("the reader never read")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        // The caller must still be waiting when the loop below sees it: 3 s to be seen (a busy
        // parallel pass has kept this task from running for over a second), then handed the
        // connection 1.5 s after that.
        faults.holdNextHandOver(for: .milliseconds(4500))
        let caller = Task { try await pool.withConnection(timeout: .seconds(3)) { try await $0.query("SELECT 1") } }
        while pool.statistics.waiters == 0 {
            guard ContinuousClock.now < noLater else {
                Issue.record("the caller never waited for the connection")
                return
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        open.yield()
        #expect(try await reader.value == 1)
        #expect(await #expect(throws: PostgresError.self) { try await caller.value }?.code == .poolTimeout)
        // The snapshot's own timer ran while the connection was on its way to the late caller;
        // the snapshot still ends, with nobody leasing the connection, once the late caller has
        // given it back (within 20 s, on a starved machine too; it is not the server's timeout).
        let ends = ContinuousClock.now + .seconds(20)
        while try await serverState() != "idle", ContinuousClock.now < ends { try await Task.sleep(for: .milliseconds(10)) }
        let state = try await serverState()
        #expect(state == "idle", "an idle connection kept its snapshot open: \(state), \(pool.statistics)")
    }

    @Test("a connection killed while its snapshot waits to end is replaced; the next caller gets its answer")
    func snapshotOnAKilledConnection() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, callTimeout: Self.callTimeout))
        let killer = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await pool.close(); await killer.close() } }
        let pid = try await pool.withTransaction(isolation: .readOnlySnapshot) { try await $0.query("SELECT pg_backend_pid()")[0].decode(Int.self, at: 0) }
        // Killed within the snapshot's grace or just after its end: either way the next lease
        // must find it dead, not send into it.
        #expect(try await killer.query("SELECT pg_terminate_backend($1)", [pid])[0].decode(Bool.self, at: 0))
        for _ in 0..<200 where try await killer.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [pid])[0].decode(Int.self, at: 0) > 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await pool.query("SELECT 42")[0].decode(Int.self, at: 0) == 42)
        #expect(pool.statistics.connectionsDiscarded == 1)
        #expect(pool.statistics.open == 1)
    }

    @Test("closing a pool twice, or from several tasks at once, returns; queries after it fail clearly", .timeLimit(.minutes(1)))
    func closeTwice() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 3, callTimeout: Self.callTimeout))
        #expect(try await pool.query("SELECT 1")[0].decode(Int.self, at: 0) == 1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 { group.addTask { await pool.close() } }
        }
        await pool.close()
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .poolClosed)
    }

    @Test(
        "a call that outlives close() (its own deadline is longer than the pool's) closes its connection when it ends, opened or still being opened when close() returns",
        .timeLimit(.minutes(1)), arguments: [false, true])
    func callOutlivingClose(stillOpening: Bool) async throws {
        let faults = PostgresFaults()
        // The connect waits until the test lets it go, past close()'s wait (the pool's call
        // deadline and a second). A 4 s delay was not enough under ThreadSanitizer.
        if stillOpening { faults.holdConnects() }
        defer { faults.releaseConnects() }
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: .milliseconds(300), faults: faults))
        let (call, open) = Self.holder(on: pool, timeout: .seconds(20))
        // A leased slot counts as in use from its lease until its connection is being opened,
        // and again once it is open: wait for the state each case needs, not for "in use" (a
        // fresh-clone CI run closed the pool while the connection was still being opened).
        if stillOpening {
            while pool.statistics.connecting == 0 { try await Task.sleep(for: .milliseconds(5)) }
        } else {
            while pool.statistics.open == 0 || pool.statistics.inUse == 0 { try await Task.sleep(for: .milliseconds(5)) }
        }
        await pool.close()
        if stillOpening {
            #expect(pool.statistics.connecting == 1 && pool.statistics.open == 0, "the call still waits for its connection")
            faults.releaseConnects()
        } else {
            #expect(pool.statistics.open == 1, "the call still runs")
        }
        open.yield()
        _ = try await call.value
        #expect(pool.statistics.connectionsOpened == 1)
        #expect(pool.statistics.open == 0, "a connection outlived its closed pool")
    }

    @Test("a cancelled waiter leaves the queue and does not leak a connection", arguments: [false, true])
    func cancellation(onEventLoop: Bool) async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, acquireTimeout: .seconds(30), callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        // Long enough that the waiter is still queued when checked, on a loaded machine too.
        let holder = Task { try await pool.withConnection { try await $0.query("SELECT pg_sleep(3)") } }
        for _ in 0..<1000 where pool.statistics.inUse < 1 { try await Task.sleep(for: .milliseconds(10)) }
        let waiter = Task(executorPreference: onEventLoop ? LoopExecutor(MultiThreadedEventLoopGroup.singleton.next()) : nil) {
            try await pool.query("SELECT 1")
        }
        for _ in 0..<200 where pool.statistics.waiters < 1 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(pool.statistics.waiters == 1)
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(pool.statistics.waiters == 0)
        // Cancelled before it asks: refused, never queued (its cancellation handler ran before
        // there was a waiter to remove, so a queued one would be served once the holder is done).
        let early = Task(executorPreference: onEventLoop ? LoopExecutor(MultiThreadedEventLoopGroup.singleton.next()) : nil) {
            while !Task.isCancelled { await Task.yield() }
            return try await pool.query("SELECT 1")
        }
        early.cancel()
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(pool.statistics.waiters == 0)
        _ = try await holder.value
        #expect(try await pool.query("SELECT 3")[0].decode(Int.self, at: 0) == 3)
        #expect(pool.statistics.open == 1)
    }

    @Test("a connection killed with pg_terminate_backend is replaced, and the next query succeeds")
    func killedConnection() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        let pid = try await pool.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0)
        let admin = PostgresPool(configuration: .init(conninfo: try await TestDatabase.adminConninfo(), maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await admin.close() } }
        #expect(try await admin.query("SELECT pg_terminate_backend($1)", [pid])[0].decode(Bool.self, at: 0))
        // Wait until the server has really let go of the backend.
        for _ in 0..<100 {
            let alive = try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [pid])[0].decode(Int.self, at: 0)
            if alive == 0 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let newPID = try await pool.query("SELECT pg_backend_pid()")[0].decode(Int32.self, at: 0)
        #expect(newPID != pid)
        #expect(pool.statistics.connectionsDiscarded == 1)
        #expect(pool.statistics.connectionsOpened == 2)
    }

    @Test("a connection that dies mid-transaction is retried on a fresh connection by withTransaction")
    func retryAfterConnectionLoss() async throws {
        let conninfo = try await TestDatabase.make()
        let pool = PostgresPool(configuration: .init(conninfo: conninfo, maxConnections: 2, callTimeout: Self.callTimeout))
        defer { Task { await pool.close() } }
        try await pool.query("CREATE TABLE marks (attempt int)")
        let admin = PostgresPool(configuration: .init(conninfo: try await TestDatabase.adminConninfo(), maxConnections: 1, callTimeout: Self.callTimeout))
        defer { Task { await admin.close() } }
        let firstAttempt = Mutex(true)
        try await pool.withTransaction { connection in
            try await connection.query("INSERT INTO marks VALUES (1)")
            if firstAttempt.withLock({ first in defer { first = false }; return first }) {
                // Kill our own backend from the inside: the next statement finds it gone.
                _ = try? await connection.query("SELECT pg_terminate_backend(pg_backend_pid())")
            }
        }
        #expect(try await pool.query("SELECT count(*) FROM marks")[0].decode(Int.self, at: 0) == 1)
        // The broken connection's place was given back once: nothing is counted as held, and
        // both places still serve calls at once.
        let statistics = pool.statistics
        #expect(statistics.inUse == 0 && statistics.waiters == 0, "\(statistics)")
        #expect(statistics.connectionsDiscarded == 1)
        async let first = pool.query("SELECT pg_sleep(0.2)")
        async let second = pool.query("SELECT pg_sleep(0.2)")
        _ = try await (first, second)
        #expect(pool.statistics.open <= 2, "\(pool.statistics)")
    }

    @Test("a connection that opens ends the rests of the places the server refused: the pool is not left short once the server takes connections again")
    func restsEndWhenAConnectionOpens() async throws {
        // The refused place rests longer than the test: only the connection that opens can end it.
        let limited = try await LimitedRole(connectionLimit: 1, maxConnections: 2, acquireTimeout: .seconds(30), rest: .seconds(120))
        defer { limited.dispose() }
        let (role, admin, pool) = (limited.role, limited.admin, limited.pool)
        let (holder, gate) = Self.holder(on: pool)
        defer { gate.finish() }
        for _ in 0..<1000 where pool.statistics.open < 1 || pool.statistics.inUse < 1 { try await Task.sleep(for: .milliseconds(10)) }
        // A second caller is refused (the role may hold one connection): its place rests.
        let refused = Task { try await pool.query("SELECT 1") }
        for _ in 0..<1000 where pool.statistics.resting < 1 { try await Task.sleep(for: .milliseconds(5)) }
        try #require(pool.statistics.resting == 1, "\(pool.statistics)")
        // The server takes two now; the held connection ends, so the caller that gets it next
        // opens a new one.
        try await admin.withConnection { connection in
            try await connection.execute("ALTER ROLE \(role) CONNECTION LIMIT 2")
            _ = try await connection.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", [role])
            for _ in 0..<200 where try await connection.query("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", [role])[0].decode(Int.self, at: 0) > 0 {
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        gate.finish()
        _ = try? await holder.value
        _ = try await refused.value
        #expect(pool.statistics.connectionsOpened == 2, "\(pool.statistics)")
        #expect(pool.statistics.resting == 0, "the opened connection ended the rest: \(pool.statistics)")
    }

    @Test("a place rests only after the server answered and refused its connection: not when it is not there, or starting up")
    func refusalByServer() {
        func failed(_ reason: String) -> PostgresError {
            PostgresError(code: .connectionFailed, message: "connection to server at \"127.0.0.1\", port 5432 failed: " + reason)
        }
        // Refusals: the server answered, in any language.
        #expect(failed("FATAL:  sorry, too many clients already").isRefusalByServer)
        #expect(failed("FATAL:  too many connections for role \"app\"").isRefusalByServer)
        #expect(failed("FATAL:  password authentication failed for user \"app\"").isRefusalByServer)
        #expect(failed("FATAL:  Passwort-Authentifizierung für Benutzer »app« fehlgeschlagen").isRefusalByServer)
        #expect(PostgresError(code: .server, sqlState: SQLState.tooManyConnections, message: "too many").isRefusalByServer)
        // A server that is not there, or not yet.
        #expect(!failed("Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?").isRefusalByServer)
        #expect(
            !failed("server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally\n\tbefore or while processing the request.")
                .isRefusalByServer)
        #expect(!failed("timeout expired").isRefusalByServer)
        #expect(!failed("FATAL:  the database system is starting up").isRefusalByServer)
        #expect(!failed("FATAL:  the database system is shutting down").isRefusalByServer)
        #expect(!failed("ERROR:  pgbouncer cannot connect to server").isRefusalByServer)
        #expect(!PostgresError(code: .server, sqlState: SQLState.cannotConnectNow, message: "starting up").isRefusalByServer)
        #expect(!PostgresError(code: .connectionLost, message: "FATAL:  terminating connection due to administrator command").isRefusalByServer)
    }

    @Test("an unreachable server fails fast with connectionFailed, classified as unavailable")
    func unreachable() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: "host=127.0.0.1 port=1 connect_timeout=2 dbname=nothing", maxConnections: 1))
        defer { Task { await pool.close() } }
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.isUnavailable == true)
        #expect(error?.isRefusalByServer == false, "\(String(describing: error))")
        // The slot is given back: the pool is not left thinking a connection is open.
        #expect(pool.statistics.open == 0)
    }

    @Test("a pool larger than the server allows serves every caller on the connections it gets; the places it cannot open rest, then are tried again")
    func moreConnectionsThanTheServerAllows() async throws {
        // The server refuses a third connection of this role ("too many connections for role",
        // SQLSTATE 53300), as it refuses any past max_connections.
        let limited = try await LimitedRole(connectionLimit: 2, maxConnections: 6, acquireTimeout: .seconds(30))
        defer { limited.dispose() }
        let (conninfo, role, admin, pool) = (limited.conninfo, limited.role, limited.admin, limited.pool)
        // What the server allows each: the role's limit; a superuser, max_connections.
        let allowance = try await pool.withConnection { try await ConnectionAllowance.read(on: $0) }
        #expect(allowance.allowed == 2 && allowance.limit == "the role's CONNECTION LIMIT 2", "\(allowance)")
        let superuser = try await admin.withConnection { try await ConnectionAllowance.read(on: $0) }
        let maxConnections = try await admin.query("SHOW max_connections")[0].decode(String.self, at: 0)
        #expect(superuser.allowed == Int(maxConnections) && superuser.limit.contains("superuser"), "\(superuser)")
        // One connection first: PostgreSQL counts a role's connections loosely, and backends
        // starting at the same moment may all be refused. With one open, every refusal rests.
        _ = try await pool.query("SELECT 1")
        // Callers at once, each holding its connection a moment: more than the two connections.
        let burst = ContinuousClock.now
        let failures = await withTaskGroup(of: String?.self) { group in
            for _ in 0..<24 {
                group.addTask {
                    do {
                        _ = try await pool.query("SELECT pg_sleep(0.02)")
                        return nil
                    } catch {
                        return "\(error)"
                    }
                }
            }
            return await group.reduce(into: [String]()) { if let failure = $1 { $0.append(failure) } }
        }
        #expect(failures.isEmpty, "\(failures.count) of 24 failed: \(failures.first ?? "")")
        #expect((1...2).contains(pool.statistics.open), "the pool holds what the server granted: \(pool.statistics)")
        #expect(pool.statistics.connectFailures > 0, "\(pool.statistics)")
        // The refused places rest 1 s at first: if the burst took less, some still do.
        if ContinuousClock.now - burst < .milliseconds(900) { #expect(pool.statistics.resting > 0, "\(pool.statistics)") }
        // A place freed on the server is taken again once a resting place is tried: here, the
        // limit raised while the pool is busy.
        try await admin.withConnection { try await $0.execute("ALTER ROLE \(role) CONNECTION LIMIT 6") }
        let raised = ContinuousClock.now
        while pool.statistics.open <= 2, ContinuousClock.now - raised < .seconds(40) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<24 { group.addTask { _ = try? await pool.query("SELECT pg_sleep(0.05)") } }
            }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(pool.statistics.open > 2, "places that rested were opened again: \(pool.statistics)")
        // With no connection at all to wait for, a refusal still fails fast.
        let alone = PostgresPool(
            configuration: .init(conninfo: try Conninfo.replacing(conninfo, with: ["user": "no_such_role_here"]), maxConnections: 2))
        defer { Task { await alone.close() } }
        let error = await #expect(throws: PostgresError.self) { try await alone.query("SELECT 1") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains("no_such_role_here") == true, "\(error?.message ?? "")")
        await pool.close()
        try await admin.withConnection { try await $0.execute("DROP ROLE \(role)") }
    }

    @Test("a closed pool refuses work with poolClosed")
    func closed() async throws {
        let pool = PostgresPool(configuration: .init(conninfo: try await TestDatabase.make(), maxConnections: 1, callTimeout: Self.callTimeout))
        try await pool.query("SELECT 1")
        await pool.close()
        let error = await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
        #expect(error?.code == .poolClosed)
    }

    @Test("conninfo: URIs and key=value pairs parse, passwords are redacted, dbname can be replaced")
    func conninfo() throws {
        let parsed = try Conninfo.parse("postgresql://baton:s3cret@db.example:6543/app?sslmode=disable")
        #expect(parsed["host"] == "db.example")
        #expect(parsed["port"] == "6543")
        #expect(parsed["dbname"] == "app")
        #expect(!Conninfo.redacted("postgresql://baton:s3cret@db.example/app").contains("s3cret"))
        #expect(!Conninfo.redacted("host=db sslkey=/k sslpassword=k3ysecret").contains("k3ysecret"))
        let replaced = try Conninfo.replacing("host=/tmp port=5432 dbname=a", with: ["dbname": "b"])
        #expect(try Conninfo.parse(replaced)["dbname"] == "b")
        let removed = try Conninfo.removing(["connect_timeout", "nothing"], from: "postgresql://baton@db.example/app?connect_timeout=20&sslmode=require")
        #expect(try Conninfo.parse(removed) == ["user": "baton", "host": "db.example", "dbname": "app", "sslmode": "require"])
        #expect(throws: PostgresError.self) { try Conninfo.parse("host='unterminated") }
    }
}

import Synchronization

/// Runs a task's jobs on one NIO event loop, as Baton's server runs its requests.
private final class LoopExecutor: TaskExecutor, Sendable {
    let loop: any EventLoop
    /// Jobs handed in from a thread other than the loop's.
    let fromElsewhere = Atomic<Int>(0)
    init(_ loop: any EventLoop) { self.loop = loop }
    func enqueue(_ job: consuming ExecutorJob) {
        if !loop.inEventLoop { fromElsewhere.add(1, ordering: .relaxed) }
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// A new role the server lets open `connectionLimit` connections, and a pool of
/// `maxConnections` for it, in a new test database; `admin` is a superuser's pool there.
private struct LimitedRole {
    let conninfo: String
    let role: String
    let admin: PostgresPool
    let pool: PostgresPool

    /// `rest`: how long a place the server refused rests (`PostgresFaults.rest(for:)`); the
    /// pool's own pause when nil.
    init(connectionLimit: Int, maxConnections: Int, acquireTimeout: Duration, rest: Duration? = nil) async throws {
        conninfo = try await TestDatabase.make()
        role = "limited_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        admin = PostgresPool(configuration: .administrative(conninfo: conninfo))
        try await admin.withConnection { [role] in try await $0.execute("CREATE ROLE \(role) LOGIN CONNECTION LIMIT \(connectionLimit)") }
        pool = PostgresPool(
            configuration: .init(
                conninfo: try Conninfo.replacing(conninfo, with: ["user": role]), maxConnections: maxConnections,
                acquireTimeout: acquireTimeout, callTimeout: PoolTests.callTimeout,
                faults: rest.map { rest in
                    let faults = PostgresFaults()
                    faults.rest(for: rest)
                    return faults
                }))
    }

    /// However the test ends: the role is the cluster's, not the test database's.
    func dispose() {
        Task { [pool, admin, role] in
            await pool.close()
            _ = try? await admin.withConnection { try await $0.execute("DROP ROLE IF EXISTS \(role)") }
            await admin.close()
        }
    }
}

/// The process's threads, by id, with their names as the kernel keeps them (Linux: none
/// elsewhere).
func processThreads() -> [(id: String, name: String)] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)).map { (task, $0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }
}

/// The names of the process's threads (``processThreads()``).
func processThreadNames() -> [String] { processThreads().map(\.name) }

/// The calling thread's name, as the kernel keeps it (the database loops name theirs).
private func currentThreadName() -> String {
    #if os(Linux)
    let name = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
    return name.trimmingCharacters(in: .whitespacesAndNewlines)
    #else
    var name = [CChar](repeating: 0, count: 64)
    pthread_getname_np(pthread_self(), &name, name.count)
    return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    #endif
}
