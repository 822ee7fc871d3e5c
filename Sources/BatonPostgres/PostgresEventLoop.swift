import DequeModule
import Foundation
import NIOCore
import Synchronization

/// A thread that drives libpq connections without blocking: it runs Swift jobs and waits for
/// sockets in one `poll(2)` loop, the way pgbench drives its connections from one thread.
///
/// Pools use these unless `BATON_DB_LOOPS=0` puts their connections on NIO's event loops
/// (``EventLoopDatabaseLoop``; docs/benchmarks.md compares the two).
///
/// A body that uses a connection runs with this loop as its task executor (see
/// ``PostgresPool/withConnection(timeout:_:)``). Sending a statement is a non-blocking libpq
/// call; waiting for the answer registers the socket here and suspends the task; when the
/// socket is ready the loop resumes it on this same thread. Waiting holds no blocked thread
/// and hands nothing between threads, a deadline can end a wait at once (``wake(socket:)``),
/// and with several connections on a loop one wake-up serves every one that became ready.
///
/// Everything the loop owns (waiters, timers, the idle sockets it watches) is touched only on
/// its thread; other threads
/// reach it through ``execute(_:)``, which wakes it through a pipe only when it sleeps.
public final class PostgresEventLoop: TaskExecutor, @unchecked Sendable {
    /// The loops every pool shares: `BATON_DB_LOOPS` of them (1–64), else ``defaultCount``.
    public static let shared: [PostgresEventLoop] = {
        let configured = ProcessInfo.processInfo.environment["BATON_DB_LOOPS"].flatMap { Int($0) }
        let count = min(64, max(1, configured ?? defaultCount))
        return (0..<count).map { PostgresEventLoop(name: "baton-db-io-\($0)") }
    }()

    /// Half the cores (NIO's count, which heeds a container's CPU quota), at least one: a loop
    /// drives many connections, the way pgbench drives all of its from one thread, and a loop
    /// that serves several connections sleeps and wakes once for several answers. On 2 cores
    /// one loop served commands and screens at 7–33 % less CPU than eight, at about the same
    /// throughput, with a p99 within about 15 % either way at 2 connections and lower at 8
    /// (docs/benchmarks.md, "One database loop, measured again").
    ///
    /// A body's own CPU work (a flow step between its statements) runs on its connection's loop
    /// and holds up the loop's other connections meanwhile, which is why a larger machine gets
    /// more than one; `baton_db_loop_busy_seconds_total` shows whether a loop is saturated, and
    /// `BATON_DB_LOOPS` sets the count. A busy loop does not mistake its own lateness for a
    /// silent database (a deadline fires only after what had come by then was handled), and
    /// listeners have a loop of their own (``listening``).
    public static var defaultCount: Int { max(1, System.coreCount / 2) }

    /// The loop ``PostgresListener``s use: a thread of their own, so a notification (and a
    /// listener's stop) never waits behind the pools' work. It starts with the first listener.
    static let listening = PostgresEventLoop(name: "baton-db-listen")

    /// Every loop started in this process (the pools', the listeners').
    private static let all = Mutex<[PostgresEventLoop]>([])

    private enum Work {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    private struct Inbox: ~Copyable {
        var work = Deque<Work>()
        /// The loop is (about to be) inside `poll` with nothing to run.
        var sleeping = false
        /// A byte is in the pipe already: a second one would wake nobody.
        var woken = false
    }

    /// Socket readiness a task waits for.
    private struct Waiter {
        var events: Int16
        var continuation: UnsafeContinuation<Int16, Never>
    }

    /// The thread's name (`baton-db-io-0`, `baton-db-listen`).
    public let name: String
    /// Nanoseconds the thread has spent working (everything but waiting in `poll`).
    private let busyNanoseconds = Atomic<Int64>(0)
    private let inbox = Mutex(Inbox())
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private var thread: pthread_t?
    private let started = DispatchSemaphore(value: 0)
    // Loop-thread only:
    private var waiters: [Int32: Waiter] = [:]
    private var timers = LoopTimers()
    /// Every bound connection's driver, by socket: while nobody waits on its socket, `poll`
    /// watches it for what the server sends unprompted (``PollDriver/spoke``).
    private var quiet: [Int32: PollDriver] = [:]
    /// What the idle sockets' marks are worth now: the loop runs the first batch of work after a
    /// `poll`, and every idle socket fitted in that `poll`. Later batches ran after it, so a mark
    /// that is not set may be stale by then (see ``PollDriver/serverSpoke(exactly:)``).
    private(set) var marksAreFresh = false

    private init(name: String) {
        self.name = name
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fatalError("baton: cannot create the database loop's wake-up pipe (errno \(errno))") }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        (wakeRead, wakeWrite) = (fds[0], fds[1])
        // Flow steps, templates and JSON run here: the same stack as an event loop's thread.
        startThread(named: name, stackSize: 8 << 20) { [self] in
            self.thread = pthread_self()
            started.signal()
            run()
        }
        started.wait()
        Self.all.withLock { $0.append(self) }
    }

    /// Whether the calling thread is this loop's.
    public var inLoop: Bool {
        guard let thread else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// How long a loop's thread has worked since it started: what it has to spare shows whether
    /// `BATON_DB_LOOPS` should be raised (a loop busy nearly all the time holds up its calls).
    public struct Usage: Sendable {
        public let name: String
        public let busy: Duration
    }

    /// Every database loop started in this process, with the time its thread has worked.
    public static var usage: [Usage] {
        all.withLock { $0.map { Usage(name: $0.name, busy: .nanoseconds($0.busyNanoseconds.load(ordering: .relaxed))) } }
    }

    /// Whether the calling thread is any database loop's: blocking libpq calls are refused there.
    static var onAnyLoop: Bool { all.withLock { $0.contains { $0.inLoop } } }

    // MARK: - Executor

    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    /// Runs `body` on the loop's thread, after what is queued already.
    public func execute(_ body: @escaping @Sendable () -> Void) {
        submit(.closure(body))
    }

    private func submit(_ work: Work) {
        let wake = inbox.withLock { inbox -> Bool in
            inbox.work.append(work)
            guard inbox.sleeping, !inbox.woken else { return false }
            inbox.woken = true
            return true
        }
        if wake {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
    }

    // MARK: - Sockets and timers (on the loop's thread)

    /// Suspends the calling task until `socket` is ready for `events` (`POLLIN`, `POLLOUT`) or
    /// ``wake(socket:)`` ends the wait; returns what `poll` reported (0 when woken).
    /// Must be called on the loop's thread; one waiter per socket.
    func wait(socket: Int32, for events: Int16) async -> Int16 {
        precondition(inLoop, "a database socket is waited for on its own loop")
        return await withUnsafeContinuation { continuation in
            precondition(waiters[socket] == nil, "two waits on one database socket")
            waiters[socket] = Waiter(events: events, continuation: continuation)
        }
    }

    /// Ends a wait on `socket` at once (a deadline passed; the caller checks why).
    func wake(socket: Int32) {
        precondition(inLoop)
        if let waiter = waiters.removeValue(forKey: socket) { waiter.continuation.resume(returning: 0) }
    }

    /// Runs `action` on the loop after `delay`, unless cancelled first. Loop thread only.
    func schedule(after delay: Duration, _ action: @escaping () -> Void) -> Int {
        precondition(inLoop)
        return timers.add(due: .now + delay, action)
    }

    func cancelTimer(_ id: Int) {
        precondition(inLoop)
        timers.cancel(id)
    }

    /// Watches `driver`'s socket for what the server sends while nobody waits on it, until
    /// ``unwatch(_:)``. Loop thread only.
    func watch(_ driver: PollDriver) {
        precondition(inLoop)
        quiet[driver.socket] = driver
    }

    /// Stops watching `driver`'s socket (its connection was finished). The socket's number may
    /// already belong to a connection bound since, whose driver stays.
    func unwatch(_ driver: PollDriver) {
        precondition(inLoop)
        if quiet[driver.socket] === driver { quiet[driver.socket] = nil }
    }

    // MARK: - The loop

    /// How many batches of queued work a turn runs before it looks at the sockets again.
    static let batchesPerTurn = 4

    private func run() {
        // Reused every turn, never shared, so no turn allocates: the jobs to run (swapped with
        // the inbox under its lock) and the descriptors handed to `poll`.
        var batch = Deque<Work>(minimumCapacity: 64)
        var descriptors = UnsafeMutableBufferPointer<pollfd>.allocate(capacity: 1024)
        defer { descriptors.deallocate() }
        // When the previous turn's `poll` returned: the answers it saw have run by the end of this turn.
        var previousPoll = ContinuousClock.now
        // Whether the last `poll` watched every idle socket (the room left after the waiters).
        var quietFitted = false
        while true {
            // Run what is queued, then what was queued meanwhile, up to ``batchesPerTurn`` batches;
            // then the sockets, so that work handed over without a pause cannot keep answers
            // waiting. A batch run now instead of in the next turn saves that turn's `poll`.
            for turnBatch in 0..<Self.batchesPerTurn {
                inbox.withLock { inbox in swap(&inbox.work, &batch) }
                if batch.isEmpty { break }
                marksAreFresh = turnBatch == 0 && quietFitted
                while let work = batch.popFirst() {
                    switch work {
                    case .job(let job): job.runSynchronously(on: asUnownedTaskExecutor())
                    case .closure(let body): body()
                    }
                }
            }
            // Room for every waiter: one left out would wait until its deadline (a listener, for
            // good). Idle sockets past the room are left for the next turn (`quietFitted`).
            if waiters.count + 1 > descriptors.count {
                descriptors.deallocate()
                descriptors = .allocate(capacity: (waiters.count + 1) * 2)
            }
            descriptors[0] = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
            var count = 1
            for (socket, waiter) in waiters {
                descriptors[count] = pollfd(fd: socket, events: waiter.events, revents: 0)
                count += 1
            }
            // Then the sockets nobody waits on and that have not spoken yet: a backend ended by
            // `pg_terminate_backend` or a restart says so here while its connection sits idle, so
            // a lease can tell without a `poll` of its own.
            let waited = count
            quietFitted = true
            for (socket, driver) in quiet where !driver.spoke && waiters[socket] == nil {
                guard count < descriptors.count else {
                    quietFitted = false
                    break
                }
                descriptors[count] = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
                count += 1
            }
            var timeout: Int32 = -1
            if let due = timers.earliest {
                let left = due - .now
                timeout = left <= .zero ? 0 : Int32(min(1000, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1))
            }
            let mustSpin = inbox.withLock { inbox -> Bool in
                if !inbox.work.isEmpty { return true }
                inbox.sleeping = true
                return false
            }
            let waiting = ContinuousClock.now
            let ready = poll(descriptors.baseAddress, nfds_t(count), mustSpin ? 0 : timeout)
            let polled = ContinuousClock.now
            if ready < 0 { quietFitted = false }  // interrupted: it saw nothing, marks included
            let worked = (waiting - previousPoll).components
            busyNanoseconds.wrappingAdd(worked.seconds * 1_000_000_000 + worked.attoseconds / 1_000_000_000, ordering: .relaxed)
            inbox.withLock { inbox in
                inbox.sleeping = false
                inbox.woken = false
            }
            if ready > 0 {
                if descriptors[0].revents != 0 {
                    // A pipe's read takes all there is up to the count asked: one that comes back
                    // short has emptied it, so no second read is needed to hear EAGAIN.
                    var sink: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
                    while withUnsafeMutableBytes(of: &sink, { read(wakeRead, $0.baseAddress, $0.count) }) == MemoryLayout.size(ofValue: sink) {}
                }
                for index in 1..<waited where descriptors[index].revents != 0 {
                    if let waiter = waiters.removeValue(forKey: descriptors[index].fd) {
                        waiter.continuation.resume(returning: descriptors[index].revents)
                    }
                }
                for index in waited..<count where descriptors[index].revents != 0 {
                    quiet[descriptors[index].fd]?.spoke = true
                }
            }
            // A deadline fires only after what had come by then was handled: a loop held up past it
            // (a long flow step, a stalled machine) must not time out a call whose answer was
            // waiting. What this `poll` found (a socket's answer, work handed over by another
            // thread) runs in the next turn, so while there was any, timers fire up to the
            // previous `poll` only — at most one turn late.
            if !timers.isEmpty { for action in timers.takeDue(by: ready > 0 || mustSpin ? previousPoll : polled) { action() } }
            previousPoll = polled
        }
    }
}
