import DequeModule
import NIOPosix
import Synchronization

/// A bounded pool of libpq connections with its own worker threads.
///
/// libpq blocks, so statements never run on an event loop or on Swift's cooperative pool:
/// ``withConnection(_:)`` waits (asynchronously) for a free connection, then runs the whole body
/// on one of the pool's threads — one thread per connection, so a body never waits for a thread
/// once it holds a connection — and resumes the caller with the result. A body therefore costs
/// two thread hops however many statements it runs.
///
/// Broken connections (server restart, `pg_terminate_backend`, network loss) are detected on
/// checkout without a round trip, or when a statement fails, and replaced transparently.
public final class PostgresPool: Sendable {
    /// How the pool connects and how long callers wait.
    public struct Configuration: Sendable {
        /// A libpq connection string: URI (`postgresql://...`) or `key=value` pairs.
        public var conninfo: String
        /// Upper bound on open connections (and worker threads).
        public var maxConnections: Int
        /// How long ``PostgresPool/withConnection(_:)`` waits for a free connection before
        /// throwing ``PostgresError/Code/poolTimeout``.
        public var acquireTimeout: Duration

        public init(conninfo: String, maxConnections: Int = 8, acquireTimeout: Duration = .seconds(5)) {
            self.conninfo = conninfo
            self.maxConnections = max(1, maxConnections)
            self.acquireTimeout = acquireTimeout
        }
    }

    /// A snapshot of the pool's state, for metrics.
    public struct Statistics: Sendable, Equatable {
        /// Connections open or being opened.
        public var open: Int
        /// Open connections waiting for work.
        public var idle: Int
        /// Connections currently lent out.
        public var inUse: Int { open - idle }
        /// Callers waiting for a connection.
        public var waiters: Int
        /// Connections opened since the pool started (replacements included).
        public var connectionsOpened: Int
        /// Connections found broken and discarded.
        public var connectionsDiscarded: Int
        /// Acquisitions that gave up after the acquire timeout.
        public var acquireTimeouts: Int
    }

    private enum Lease: Sendable {
        case existing(PostgresConnection)
        case create
    }

    private struct Waiter {
        var id: Int
        var continuation: CheckedContinuation<Lease, any Error>
    }

    private struct State: ~Copyable {
        var idle: [PostgresConnection] = []
        var open = 0
        var waiters = Deque<Waiter>()
        var nextWaiterID = 0
        var closed = false
        var connectionsOpened = 0
        var connectionsDiscarded = 0
        var acquireTimeouts = 0
    }

    /// The pool's configuration.
    public let configuration: Configuration
    private let state = Mutex(State())
    private let threads: NIOThreadPool
    private let acquireObserver: (@Sendable (Duration) -> Void)?

    /// Creates a pool. Connections are opened lazily, on first use.
    /// - Parameter acquireObserver: called with how long each checkout waited (for a histogram).
    public init(configuration: Configuration, acquireObserver: (@Sendable (Duration) -> Void)? = nil) {
        self.configuration = configuration
        self.acquireObserver = acquireObserver
        self.threads = NIOThreadPool(numberOfThreads: configuration.maxConnections)
        self.threads.start()
    }

    /// The pool's current state.
    public var statistics: Statistics {
        state.withLock {
            Statistics(
                open: $0.open, idle: $0.idle.count, waiters: $0.waiters.count,
                connectionsOpened: $0.connectionsOpened, connectionsDiscarded: $0.connectionsDiscarded,
                acquireTimeouts: $0.acquireTimeouts)
        }
    }

    // MARK: - Using connections

    /// Runs `body` with exclusive use of one connection, on a pool thread.
    public func withConnection<R: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> R) async throws -> R {
        let started = ContinuousClock.now
        let lease = try await acquire()
        acquireObserver?(ContinuousClock.now - started)
        return try await withUnsafeThrowingContinuation { continuation in
            threads.submit { workState in
                guard case .active = workState else {
                    self.giveBack(lease)
                    continuation.resume(throwing: PostgresError(code: .poolClosed, message: "the database pool is shut down"))
                    return
                }
                let connection: PostgresConnection
                do {
                    connection = try self.connection(for: lease)
                } catch {
                    self.returnSlot()
                    continuation.resume(throwing: error)
                    return
                }
                let result = Result { try body(connection) }
                self.release(connection)
                continuation.resume(with: result)
            }
        }
    }

    /// Runs `body` in a transaction on one connection. Errors that a retry may cure
    /// (serialization failure, deadlock, a connection lost mid-way) rerun the whole body, up to
    /// `maxAttempts` times in all, with a short randomised backoff; the body must therefore be
    /// safe to run again, which a transaction that rolled back always is.
    public func withTransaction<R: Sendable>(
        isolation: PostgresConnection.IsolationLevel = .readCommitted, maxAttempts: Int = 3,
        _ body: @escaping @Sendable (PostgresConnection) throws -> R
    ) async throws -> R {
        var attempt = 1
        while true {
            do {
                return try await withConnection { connection in
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

    /// Closes idle connections, fails waiters, and stops the worker threads once lent-out
    /// connections come back. Later calls throw ``PostgresError/Code/poolClosed``.
    public func close() async {
        let (idle, waiters) = state.withLock { state -> ([PostgresConnection], Deque<Waiter>) in
            state.closed = true
            let idle = state.idle
            state.open -= idle.count
            state.idle.removeAll()
            let waiters = state.waiters
            state.waiters.removeAll()
            return (idle, waiters)
        }
        _ = idle  // dropped here: PQfinish runs in deinit
        for waiter in waiters {
            waiter.continuation.resume(throwing: PostgresError(code: .poolClosed, message: "the database pool is shut down"))
        }
        try? await threads.shutdownGracefully()
    }

    // MARK: - Checkout

    private func acquire() async throws -> Lease {
        let immediate: Lease? = try state.withLock { state in
            if state.closed { throw PostgresError(code: .poolClosed, message: "the database pool is shut down") }
            if let connection = state.idle.popLast() { return .existing(connection) }
            if state.open < configuration.maxConnections {
                state.open += 1
                return .create
            }
            return nil
        }
        if let immediate { return immediate }
        return try await waitForLease()
    }

    private func waitForLease() async throws -> Lease {
        let id = state.withLock { state in
            state.nextWaiterID += 1
            return state.nextWaiterID
        }
        let timeout = configuration.acquireTimeout
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.expireWaiter(id)
        }
        defer { timer.cancel() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Lease, any Error>) in
                enum Outcome { case wait, lease(Lease), fail(any Error) }
                let outcome: Outcome = state.withLock { state in
                    if state.closed { return .fail(PostgresError(code: .poolClosed, message: "the database pool is shut down")) }
                    if Task.isCancelled { return .fail(CancellationError()) }
                    if let connection = state.idle.popLast() { return .lease(.existing(connection)) }
                    if state.open < configuration.maxConnections {
                        state.open += 1
                        return .lease(.create)
                    }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return .wait
                }
                switch outcome {
                case .wait: break
                case .lease(let lease): continuation.resume(returning: lease)
                case .fail(let error): continuation.resume(throwing: error)
                }
            }
        } onCancel: {
            removeWaiter(id)?.resume(throwing: CancellationError())
        }
    }

    private func removeWaiter(_ id: Int) -> CheckedContinuation<Lease, any Error>? {
        state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index).continuation
        }
    }

    private func expireWaiter(_ id: Int) {
        guard let continuation = removeWaiter(id) else { return }
        let (statistics, timeout) = (self.statistics, configuration.acquireTimeout)
        state.withLock { $0.acquireTimeouts += 1 }
        continuation.resume(
            throwing: PostgresError(
                code: .poolTimeout,
                message: "no database connection became free within \(timeout) (all \(statistics.open) in use, \(statistics.waiters) waiting)"
            ))
    }

    // MARK: - On the worker thread

    private func connection(for lease: Lease) throws -> PostgresConnection {
        if case .existing(let connection) = lease {
            if connection.checkAlive() { return connection }
            state.withLock { $0.connectionsDiscarded += 1 }
        }
        let connection = try PostgresConnection(conninfo: configuration.conninfo)
        state.withLock { $0.connectionsOpened += 1 }
        return connection
    }

    /// Returns a connection after use, or discards it if it broke or was left mid-transaction.
    private func release(_ connection: PostgresConnection) {
        if connection.isOpen, connection.isInTransaction { try? connection.execute("ROLLBACK") }
        let healthy = connection.isOpen && !connection.isInTransaction
        if !healthy {
            state.withLock { $0.connectionsDiscarded += 1 }
            returnSlot()
            return
        }
        let waiter: Waiter? = state.withLock { state in
            if state.closed {
                state.open -= 1
                return nil
            }
            if let waiter = state.waiters.popFirst() { return waiter }
            state.idle.append(connection)
            return nil
        }
        waiter?.continuation.resume(returning: .existing(connection))
    }

    /// A lease that was never used (the thread pool refused the work).
    private func giveBack(_ lease: Lease) {
        switch lease {
        case .existing(let connection): release(connection)
        case .create: returnSlot()
        }
    }

    /// Frees one slot (a connection that broke or could not be opened) and lets the next waiter
    /// open a fresh connection in its place.
    private func returnSlot() {
        let waiter: Waiter? = state.withLock { state in
            if !state.closed, let waiter = state.waiters.popFirst() { return waiter }
            state.open -= 1
            return nil
        }
        waiter?.continuation.resume(returning: .create)
    }
}
