import DequeModule
import Dispatch
import NIOCore
import NIOPosix
import Foundation
import Synchronization

/// A bounded pool of libpq connections, each owned by a dedicated worker thread.
///
/// libpq blocks, so statements never run on an event loop or on Swift's cooperative pool.
/// ``withConnection(_:)`` puts its body on the pool's queue; the first free worker runs the
/// whole body on its own thread with its own connection and resumes the caller. A worker that
/// finishes takes the next queued body straight away, so under load a request costs one hop
/// onto a worker and one back, never a wake-up of the caller just to hand over a connection.
///
/// Broken connections (server restart, `pg_terminate_backend`, network loss) are detected
/// before a body runs — without a round trip — or when a statement fails, and replaced.
public final class PostgresPool: Sendable {
    /// How the pool connects and how long callers wait.
    public struct Configuration: Sendable {
        /// A libpq connection string: URI (`postgresql://...`) or `key=value` pairs.
        public var conninfo: String
        /// Upper bound on open connections (and worker threads).
        public var maxConnections: Int
        /// How long a body may wait for a free connection before ``withConnection(_:)``
        /// throws ``PostgresError/Code/poolTimeout``.
        public var acquireTimeout: Duration
        /// The deadline of one call, waiting included: past it the caller gets
        /// ``PostgresError/Code/timedOut`` at once, the statement is cancelled and the connection
        /// discarded, and the pool fails fast until the database answers again.
        public var callTimeout: Duration
        /// Server-side bounds set on every connection.
        public var limits: PostgresConnection.Limits
        /// Faults to inject (tests only).
        public var faults: PostgresFaults?

        public init(
            conninfo: String, maxConnections: Int = 8, acquireTimeout: Duration = .seconds(5), callTimeout: Duration = .seconds(5),
            limits: PostgresConnection.Limits = .init(), faults: PostgresFaults? = nil
        ) {
            self.conninfo = conninfo
            self.maxConnections = max(1, maxConnections)
            self.acquireTimeout = acquireTimeout
            self.callTimeout = callTimeout
            self.limits = limits
            self.faults = faults
        }

        /// For administrative work that may legitimately run long (migrations, creating
        /// databases, loading data): no server-side statement or lock timeout, an hour per call.
        public static func administrative(conninfo: String, maxConnections: Int = 1) -> Configuration {
            Configuration(
                conninfo: conninfo, maxConnections: maxConnections, acquireTimeout: .seconds(60), callTimeout: .seconds(3600),
                limits: PostgresConnection.Limits(statement: .zero, lock: .zero, idleInTransaction: .seconds(3600)))
        }
    }

    /// A snapshot of the pool's state, for metrics.
    public struct Statistics: Sendable, Equatable {
        /// Connections open (or being opened).
        public var open: Int
        /// Open connections whose worker is waiting for work.
        public var idle: Int
        /// Connections running a body.
        public var inUse: Int
        /// Bodies waiting for a free connection.
        public var waiters: Int
        /// Connections opened since the pool started (replacements included).
        public var connectionsOpened: Int
        /// Connections found broken and discarded.
        public var connectionsDiscarded: Int
        /// Bodies that gave up after the acquire timeout.
        public var acquireTimeouts: Int
        /// Calls whose deadline passed while their body ran (their connections were cut).
        public var deadlineExpiries: Int = 0
        /// Whether the pool fails fast because the database went silent (a probe runs).
        public var isFailingFast: Bool = false
    }

    private struct State: ~Copyable {
        var queue = Deque<Job>()
        var idleWorkers: [Worker] = []
        var busy = 0
        var open = 0
        var nextJobID = 0
        var closed = false
        var connectionsOpened = 0
        var connectionsDiscarded = 0
        var acquireTimeouts = 0
        var deadlineExpiries = 0
        /// Set when a running call's deadline passed: new calls fail fast until a probe connects.
        var silentSince: ContinuousClock.Instant?
    }

    /// The pool's configuration.
    public let configuration: Configuration
    private let state = Mutex(State())
    private let workers: [Worker]
    private let acquireObserver: (@Sendable (Duration) -> Void)?
    private let timerLoop: any EventLoop

    /// Creates a pool and its worker threads. Connections are opened lazily, on first use.
    /// - Parameter acquireObserver: called with how long each body waited for a connection.
    public init(configuration: Configuration, acquireObserver: (@Sendable (Duration) -> Void)? = nil) {
        self.configuration = configuration
        self.acquireObserver = acquireObserver
        self.timerLoop = MultiThreadedEventLoopGroup.singleton.next()
        self.workers = (0..<configuration.maxConnections).map { Worker(index: $0) }
        state.withLock { $0.idleWorkers = workers.reversed() }
        for worker in workers { worker.start(pool: self) }
    }

    /// The pool's current state.
    public var statistics: Statistics {
        state.withLock {
            Statistics(
                open: $0.open, idle: $0.open - $0.busy, inUse: $0.busy, waiters: $0.queue.count,
                connectionsOpened: $0.connectionsOpened, connectionsDiscarded: $0.connectionsDiscarded,
                acquireTimeouts: $0.acquireTimeouts, deadlineExpiries: $0.deadlineExpiries, isFailingFast: $0.silentSince != nil)
        }
    }

    // MARK: - Using connections

    /// Runs `body` with exclusive use of one connection, on that connection's worker thread.
    /// Waiting for a free connection can be cancelled; a body that has started runs to its end.
    public func withConnection<R: Sendable>(
        timeout: Duration? = nil, _ body: @escaping @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        let id = try state.withLock { state in
            if state.silentSince != nil {
                throw PostgresError(code: .unavailable, message: "the database stopped answering; waiting for it to come back")
            }
            state.nextJobID += 1
            return state.nextJobID
        }
        // When the caller runs on an event loop (Baton's server installs NIO as the concurrency
        // executor), resume it on that same loop: the response is then written without another
        // thread hop, instead of resuming on whichever loop the global executor picks.
        let home = MultiThreadedEventLoopGroup.currentEventLoop
        let gate = ResumeGate()
        return try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<R, any Error>) in
                let job = Job(
                    id: id, enqueued: .now, gate: gate,
                    run: { connection in
                        let result = Result { try body(connection) }
                        return {
                            guard gate.claim() else { return }
                            if let home { home.execute { continuation.resume(with: result) } } else { continuation.resume(with: result) }
                        }
                    },
                    fail: { error in if gate.claim() { continuation.resume(throwing: error) } },
                    failUngated: { continuation.resume(throwing: $0) })
                submit(job, timeout: timeout ?? configuration.callTimeout)
            }
        } onCancel: {
            if let job = removeQueued(id) {
                job.timeout?.cancel()
                job.fail(CancellationError())
            }
        }
    }

    /// Runs `body` in a transaction on one connection. Errors that a retry may cure
    /// (serialization failure, deadlock, a connection lost mid-way) rerun the whole body, up to
    /// `maxAttempts` times in all, with a short randomised backoff; the body must therefore be
    /// safe to run again, which a transaction that rolled back always is.
    public func withTransaction<R: Sendable>(
        isolation: PostgresConnection.IsolationLevel = .readCommitted, maxAttempts: Int = 3, timeout: Duration? = nil,
        _ body: @escaping @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        var attempt = 1
        while true {
            do {
                return try await withConnection(timeout: timeout) { connection in
                    try connection.transaction(isolation: isolation, body)
                }
            } catch let error as PostgresError where error.isRetryable && attempt < maxAttempts {
                attempt += 1
                try await Task.sleep(for: .milliseconds(Int.random(in: 1...(5 * attempt))))
            }
        }
    }

    /// Runs one statement and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> PostgresRows {
        let wire = parameters.map(\.postgresParameter)
        return try await withConnection { try $0.query(sql, parameters: wire) }
    }

    /// Fails queued bodies, lets running ones finish, then closes every connection and stops
    /// the workers. Later calls throw ``PostgresError/Code/poolClosed``; closing again (or from
    /// several tasks at once) waits for the same shutdown.
    public func close() async {
        let queued = state.withLock { state -> Deque<Job> in
            state.closed = true
            let queued = state.queue
            state.queue.removeAll()
            return queued
        }
        for job in queued {
            job.timeout?.cancel()
            job.deadline?.cancel()
            job.fail(PostgresError(code: .poolClosed, message: "the database pool is shut down"))
        }
        for worker in workers { worker.wake() }
        // Running bodies may finish within their deadline; a body stuck on a silent database
        // must not hold up shutdown longer than that: its connection is cut.
        let deadline = ContinuousClock.now + configuration.callTimeout
        for worker in workers {
            if await worker.stopped(before: deadline) { continue }
            for stuck in workers { stuck.abortAny() }
            _ = await worker.stopped(before: .now + .seconds(1))
        }
    }

    // MARK: - Queue

    private func submit(_ job: Job, timeout: Duration) {
        enum Placement { case worker(Worker), queued, closed }
        var job = job
        // The call's deadline, waiting included. A call that finishes first finds nothing to do.
        job.deadline = timerLoop.scheduleTask(in: .nanoseconds(timeout.nanoseconds)) { [job] in
            self.deadlinePassed(job, timeout: timeout)
        }
        let placement: Placement = state.withLock { state in
            if state.closed { return .closed }
            if let worker = state.idleWorkers.popLast() {
                state.busy += 1
                worker.assign(job)
                return .worker(worker)
            }
            state.queue.append(job)
            return .queued
        }
        switch placement {
        case .worker(let worker):
            worker.wake()
        case .queued:
            // Nobody free: arm the acquire timeout. (Armed after queueing; if a worker took the
            // job in between, the timer finds nothing to expire.)
            let id = job.id
            job.timeout = timerLoop.scheduleTask(in: .nanoseconds(Int64(configuration.acquireTimeout.nanoseconds))) {
                self.expire(id)
            }
            let timer = job.timeout
            state.withLock { state in
                if let index = state.queue.firstIndex(where: { $0.id == id }) { state.queue[index].timeout = timer }
            }
        case .closed:
            job.deadline?.cancel()
            job.fail(PostgresError(code: .poolClosed, message: "the database pool is shut down"))
        }
    }

    /// A call's deadline passed. Queued, it gives up like an acquire timeout; running, the caller
    /// is answered now, the statement is cancelled and the connection cut (its worker is free
    /// again as soon as libpq notices), and the pool fails fast until a probe gets through.
    private func deadlinePassed(_ job: Job, timeout: Duration) {
        if let queued = removeQueued(job.id) {
            queued.timeout?.cancel()
            state.withLock { $0.acquireTimeouts += 1 }
            queued.fail(PostgresError(code: .poolTimeout, message: "no database connection became free within the call's deadline"))
            return
        }
        // Running, or still connecting: answer the caller now (unless the body just finished),
        // then cut the connection if a body is on it.
        guard job.gate.claim() else { return }
        // Fail fast from now on — before the caller hears back, so its next call already does.
        let startProbe = state.withLock { state -> Bool in
            state.deadlineExpiries += 1
            guard state.silentSince == nil, !state.closed else { return false }
            state.silentSince = .now
            return true
        }
        job.failUngated(
            PostgresError(code: .timedOut, message: "the database did not answer within \(timeout); the call was abandoned"))
        _ = workers.contains { $0.abort(job: job.id) }
        if startProbe { probeUntilAnswered() }
    }

    /// While the pool fails fast, tries a fresh connection every half second; the first that
    /// gets an answer ends fail-fast.
    private func probeUntilAnswered() {
        var probeLimits = configuration.limits
        probeLimits.connect = .seconds(2)
        let limits = probeLimits
        let conninfo = configuration.conninfo
        let thread = Thread { [self] in
            while !isClosed() {
                if let connection = try? PostgresConnection(conninfo: conninfo, limits: limits),
                    (try? connection.query("SELECT 1")) != nil
                {
                    state.withLock { $0.silentSince = nil }
                    return
                }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
        thread.name = "baton-db-probe"
        thread.start()
    }

    private func removeQueued(_ id: Int) -> Job? {
        state.withLock { state in
            guard let index = state.queue.firstIndex(where: { $0.id == id }) else { return nil }
            return state.queue.remove(at: index)
        }
    }

    private func expire(_ id: Int) {
        guard let job = removeQueued(id) else { return }
        let statistics = state.withLock { state -> Statistics in
            state.acquireTimeouts += 1
            return Statistics(
                open: state.open, idle: state.open - state.busy, inUse: state.busy, waiters: state.queue.count,
                connectionsOpened: state.connectionsOpened, connectionsDiscarded: state.connectionsDiscarded,
                acquireTimeouts: state.acquireTimeouts)
        }
        job.fail(
            PostgresError(
                code: .poolTimeout,
                message: "no database connection became free within \(configuration.acquireTimeout) "
                    + "(\(statistics.inUse) of \(configuration.maxConnections) busy, \(statistics.waiters) more waiting)"))
    }

    /// Called by a worker after a body: hands it the next queued job, or parks it.
    fileprivate func next(for worker: Worker) -> Job? {
        state.withLock { state in
            if let job = state.queue.popFirst() { return job }
            state.busy -= 1
            state.idleWorkers.append(worker)
            return nil
        }
    }

    fileprivate func isClosed() -> Bool { state.withLock { $0.closed } }

    fileprivate func observeAcquire(_ job: Job) {
        job.timeout?.cancel()
        acquireObserver?(ContinuousClock.now - job.enqueued)
    }

    fileprivate func connectionOpened() { state.withLock { $0.open += 1; $0.connectionsOpened += 1 } }
    fileprivate func connectionDiscarded() { state.withLock { $0.open -= 1; $0.connectionsDiscarded += 1 } }
    fileprivate func connectionClosed() { state.withLock { $0.open -= 1 } }
}

extension Duration {
    fileprivate var nanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}

/// A body waiting to run, with the continuation that gets its result.
private struct Job: Sendable {
    var id: Int
    var enqueued: ContinuousClock.Instant
    /// Who resumes the caller: the body's result, a failure or the deadline, whichever is first.
    var gate: ResumeGate
    /// Runs the body and returns how to resume the caller, which the worker calls only after
    /// it has given its connection back (so a resumed caller sees the pool as it left it).
    var run: @Sendable (PostgresConnection) -> @Sendable () -> Void
    var fail: @Sendable (any Error) -> Void
    /// Resumes the caller with an error; only for whoever already claimed the gate.
    var failUngated: @Sendable (any Error) -> Void
    var timeout: Scheduled<Void>?
    var deadline: Scheduled<Void>?
}

/// Lets exactly one of the body's result, a failure and the deadline resume a caller.
private final class ResumeGate: Sendable {
    private let claimed = Atomic<Bool>(false)
    func claim() -> Bool { !claimed.exchange(true, ordering: .acquiringAndReleasing) }
    /// Whether the caller has been answered already (a body that has not started should not).
    var isClaimed: Bool { claimed.load(ordering: .acquiring) }
}

/// One worker thread and the connection it owns.
///
/// The thread sleeps on its own semaphore and is woken only when a job is assigned to it (or
/// the pool closes), so a submit wakes exactly one thread. `assigned` is written under the
/// pool's lock while the worker is parked and read by the worker after the semaphore wakes it;
/// the connection is touched only by the worker thread. Hence `@unchecked Sendable`.
private final class Worker: @unchecked Sendable {
    let index: Int
    private let semaphore = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var assigned: Job?
    private var connection: PostgresConnection?

    init(index: Int) { self.index = index }

    func start(pool: PostgresPool) {
        let thread = Thread { [self] in self.loop(pool) }
        thread.name = "baton-db-\(index)"
        thread.start()
    }

    /// Called with the pool's lock held, while the worker is parked.
    func assign(_ job: Job) { assigned = job }

    func wake() { semaphore.signal() }

    /// Waits until the thread has ended (after the pool closed), or until `deadline`; returns
    /// whether it ended. Any number of callers may wait: each passes the signal on, so closing a
    /// pool twice returns at once.
    func stopped(before deadline: ContinuousClock.Instant) async -> Bool {
        let seconds = max(0, Double((deadline - .now).components.seconds) + Double((deadline - .now).components.attoseconds) / 1e18)
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            DispatchQueue.global().async {
                let ended = self.finished.wait(timeout: .now() + seconds) == .success
                if ended { self.finished.signal() }
                continuation.resume(returning: ended)
            }
        }
    }

    /// The running job and its connection's socket and cancel request, for the deadline to cut.
    /// Set and cleared by the worker around each body; the socket is closed only after it is
    /// cleared, so a cut can never hit a reused descriptor.
    private let running = Mutex<(job: Int, socket: Int32, cancel: CancelToken?)?>(nil)

    /// Cuts the connection of `job` if this worker is running it: the server is asked to
    /// cancel the statement (on a thread of its own: that request can hang on a silent network
    /// too) and the socket is shut down, so the blocked libpq call returns at once.
    func abort(job: Int) -> Bool {
        running.withLock { running in
            guard let current = running, current.job == job else { return false }
            Self.cut(current.socket, cancel: current.cancel)
            return true
        }
    }

    /// Cuts whatever this worker is running (shutdown).
    func abortAny() {
        running.withLock { running in
            if let current = running { Self.cut(current.socket, cancel: current.cancel) }
        }
    }

    private static func cut(_ socket: Int32, cancel: CancelToken?) {
        if let cancel {
            let thread = Thread { cancel.send() }
            thread.name = "baton-db-cancel"
            thread.start()
        }
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private func loop(_ pool: PostgresPool) {
        while true {
            semaphore.wait()
            guard var job = assigned else {
                if pool.isClosed() { break }
                continue
            }
            assigned = nil
            while true {
                let resume = run(job, pool: pool)
                let next = pool.next(for: self)
                resume()
                guard let next else { break }
                job = next
            }
        }
        if connection != nil {
            connection = nil
            pool.connectionClosed()
        }
        finished.signal()
    }

    private func run(_ job: Job, pool: PostgresPool) -> @Sendable () -> Void {
        pool.observeAcquire(job)
        if let existing = connection, !existing.checkAlive() {
            connection = nil
            pool.connectionDiscarded()
        }
        if connection == nil {
            do {
                connection = try PostgresConnection(
                    conninfo: pool.configuration.conninfo, limits: pool.configuration.limits, faults: pool.configuration.faults)
                pool.connectionOpened()
            } catch {
                return { job.fail(error) }
            }
        }
        guard let connection else { return {} }
        // The deadline answered the caller while we connected: the body must not run late.
        if job.gate.isClaimed { return {} }
        running.withLock { $0 = (job.id, connection.socket, connection.cancelToken) }
        let resume = job.run(connection)
        running.withLock { $0 = nil }
        job.deadline?.cancel()
        // A connection that broke, or that a body left inside a transaction, is not reused.
        if connection.isOpen, connection.isInTransaction { try? connection.execute("ROLLBACK") }
        if !connection.isOpen || connection.isInTransaction {
            self.connection = nil
            pool.connectionDiscarded()
        }
        return resume
    }
}
