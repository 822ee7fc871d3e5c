import DequeModule
import NIOCore
import NIOPosix
import Foundation
import Synchronization

/// A bounded pool of non-blocking libpq connections, driven by ``DatabaseLoop``s: database
/// threads of their own (``PostgresEventLoop``), or NIO's event loops (`BATON_DB_LOOPS=0`).
///
/// ``withConnection(timeout:_:)`` leases a connection — one on the caller's own loop when one
/// is idle — and runs its body with the connection's loop as the task executor: the body's
/// statements are sent without blocking and the loop's thread waits for its connections'
/// sockets at once, as pgbench does. On database threads a request costs one hop onto the
/// loop and one back to its event loop (a request that has to wait for a connection waits on a
/// database thread, so a connection that thread hands over starts its body there with no extra
/// hop); on the event loops, none when the connection is on the caller's. No thread is blocked
/// in libpq, so a deadline can end a wait at once. Opening a connection (which blocks in libpq)
/// happens off the loops.
///
/// Broken connections (server restart, `pg_terminate_backend`, network loss) are detected
/// before a body runs — without a round trip — or when a statement fails, and replaced.
///
/// A place whose connection cannot be opened while others are open rests, and its caller waits
/// for one of the open connections instead of failing, when that is no outage: the server
/// refused it (it allows fewer connections than `maxConnections`: "too many clients already",
/// a role's connection limit; or a password changed under running connections), or the other
/// connections were answering. The pool serves on what the server grants. A resting place is
/// tried again after a pause that doubles with each failure, from ``firstRest`` to
/// ``longestRest``, or as soon as a connection opens. Otherwise (a server restart, a network
/// gone), or with no connection open, a failure to open one fails the call at once.
public final class PostgresPool: Sendable {
    /// How the pool connects and how long callers wait.
    public struct Configuration: Sendable {
        /// A libpq connection string: URI (`postgresql://...`) or `key=value` pairs.
        public var conninfo: String
        /// Upper bound on open connections.
        public var maxConnections: Int
        /// How long a body may wait for a free connection before ``withConnection(_:)``
        /// throws ``PostgresError/Code/poolTimeout``.
        public var acquireTimeout: Duration
        /// The deadline of one call, waiting included: past it the caller gets
        /// ``PostgresError/Code/timedOut`` at once, the statement (or a connect the server has not
        /// answered) is cancelled and the connection discarded, and the pool fails fast until the
        /// database answers again — unless the call started with its deadline nearly spent (then
        /// only when such cuts go on with nothing answered), the database answered the call
        /// itself moments before the cut (a long body of quick statements), or the call started
        /// before the last fail-fast ended (`deadlinePassed`). A call whose deadline passes
        /// before anything of it reached the server (it waited for a connection, or a new one
        /// was being set up) gets ``PostgresError/Code/poolTimeout`` instead, and nothing is cut.
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
        /// Connections open (those being opened are `connecting`).
        public var open: Int
        /// Open connections nobody holds.
        public var idle: Int
        /// Connections leased to a body.
        public var inUse: Int
        /// Connections being opened for a body (leased, not yet open).
        public var connecting: Int = 0
        /// Bodies waiting for a free connection.
        public var waiters: Int
        /// Connections opened since the pool started (replacements included).
        public var connectionsOpened: Int
        /// Connections found broken and discarded.
        public var connectionsDiscarded: Int
        /// Calls that got no connection in time: the acquire timeout, or the call's deadline,
        /// passed before their body could start (they throw ``PostgresError/Code/poolTimeout``).
        public var acquireTimeouts: Int
        /// Calls whose deadline passed while their body ran or their connection was being opened
        /// (what was in flight was cut); the pool's own calls that end an idle snapshot included.
        public var deadlineExpiries: Int = 0
        /// Whether the pool fails fast because the database went silent (a probe runs).
        public var isFailingFast: Bool = false
        /// Times the pool began to fail fast.
        public var failFastStarts: Int = 0
        /// Attempts to open a connection that failed (refused by the server, or unreachable).
        public var connectFailures: Int = 0
        /// Places resting after their connection could not be opened while others were open and
        /// it was no outage (the server refused it, or the others were answering; `rest`).
        public var resting: Int = 0
    }

    private struct State: ~Copyable {
        /// Free slots, most recently used last (it most likely has an open connection).
        var idle: [Slot] = []
        var waiters = Deque<Waiter>()
        var busy = 0
        var open = 0
        var nextWaiterID = 0
        var closed = false
        var connectionsOpened = 0
        var connectionsDiscarded = 0
        var connectFailures = 0
        /// Connections being opened.
        var connecting = 0
        var acquireTimeouts = 0
        var deadlineExpiries = 0
        var failFastStarts = 0
        /// Set when a running call's deadline passed: new calls fail fast until a probe connects.
        var silentSince: ContinuousClock.Instant?
        /// Calls the database answered (`release`; a cut call that had an answer, in
        /// `deadlinePassed`): a late cut looks whether this moved since the first of its run.
        var answers = 0
        /// When the last answer `release` counted came (its connection's
        /// ``PostgresConnection/lastAnswer``): a connect that fails with the other connections
        /// answering is no outage (`rest`).
        var lastAnswer: ContinuousClock.Instant?
        /// Connects the server answered (`connect`), whether or not their call's deadline had
        /// cut the wait for them.
        var connectsAnswered = 0
        /// The first late cut since the database last answered a call, `answers` and
        /// `connectsAnswered` then, and the longest window and limit of the run's cuts
        /// (`deadlinePassed`); cleared when fail-fast starts and when it ends.
        var lateCuts: LateCuts?
        /// When fail-fast last ended: a call started before then, cut after, belongs to that
        /// episode (`deadlinePassed`).
        var silenceEnded: ContinuousClock.Instant?
        /// When the sweep that expires waiters is due, if one is armed (see `sweepWaiters`).
        var sweepDue: ContinuousClock.Instant?
        /// The slot whose thread the last caller that found no idle slot waits on (`takeOrQueue`);
        /// moved on only for callers on an event loop, with several database threads.
        var nextWaitingThread = 0

        /// Whether a late cut (`deadlinePassed`) is evidence of a silent database: late cuts have
        /// gone on for the run's window with nothing answered since its first. Starts a run, or
        /// adds the cut to the current one.
        mutating func lateCutIsEvidence(_ cut: Cut, window: Duration, at now: ContinuousClock.Instant) -> Bool {
            let first = LateCuts(since: now, answers: answers, connectsAnswered: connectsAnswered, window: window, limit: cut.limit)
            guard var run = lateCuts, run.answers == answers else {
                lateCuts = first
                return false
            }
            // A slot a cut emptied, reconnecting with the time left, on a server that answers
            // connects: routine under overload.
            if cut.connect, run.connectsAnswered != connectsAnswered { return false }
            run.window = max(run.window, window)
            run.limit = max(run.limit, cut.limit)
            let age = now - run.since
            guard age < run.limit * 2 + run.window else {
                lateCuts = first
                return false
            }
            lateCuts = run
            // A new connection costs the server a process: under load it can take longer than a
            // short deadline's window, so a connect cut waits for the full evidence.
            return age >= (cut.connect ? max(run.window, PostgresPool.silenceEvidence) : run.window)
        }

        /// An idle slot: the most recently used one on the calling thread's loop if there is one
        /// (the body then runs where its caller is, with no hop), else the most recently used.
        /// On database threads too: a caller with no event loop of its own resumes on the loop
        /// of its last lease, and its next lease then finds a connection there.
        /// A place back from rest (its connection refused last time; at the front) is taken only
        /// when no other is idle, on the caller's loop or not.
        mutating func takeIdle() -> Slot? {
            if let index = idle.lastIndex(where: { $0.loop.inLoop && $0.failures == 0 }) { return idle.remove(at: index) }
            return idle.popLast()
        }
    }

    /// The loops that drive the pools' connections: database threads of their own
    /// (`BATON_DB_LOOPS`, default half the cores), or with `BATON_DB_LOOPS=0` NIO's event loops, the
    /// threads that serve HTTP. Measured on 2 cores (docs/benchmarks.md, "One database loop,
    /// measured again"): one database thread costs less CPU per command than the event loops'
    /// relay, at 2 and at 8 connections.
    static let loops: [any DatabaseLoop] = onEventLoops ? EventLoopDatabaseLoop.shared : PostgresEventLoop.shared

    /// `BATON_DB_LOOPS=0`: connections on NIO's event loops.
    static let onEventLoops = ProcessInfo.processInfo.environment["BATON_DB_LOOPS"] == "0"

    /// The loop that drives ``PostgresListener``s' connections: with database threads, one of
    /// its own, so that the pools' work (several requests' flow steps on a loop) never holds up
    /// a notification or a listener's stop; on the event loops, the first of them.
    static var listenerLoop: any DatabaseLoop { onEventLoops ? loops[0] : PostgresEventLoop.listening }

    /// The pool's configuration.
    public let configuration: Configuration
    private let state = Mutex(State())
    private let acquireObserver: (@Sendable (Duration) -> Void)?
    private let restObserver: (@Sendable (PostgresError) -> Void)?
    private let timerLoop: any EventLoop
    /// The pool's places, in order: slot `i` is driven by loop `i % loops`.
    private let slots: [Slot]
    /// ``silenceEvidence`` for a call with the configured deadline, worked out once.
    private let callEvidence: Duration

    /// Creates a pool. Connections are opened lazily, on first use.
    /// - Parameters:
    ///   - acquireObserver: called with how long each body waited for a connection.
    ///   - restObserver: called with why a connection could not be opened when its place rests
    ///     (the caller waits for another and does not hear of it; a caller that gets the error
    ///     is not reported here).
    public init(
        configuration: Configuration, acquireObserver: (@Sendable (Duration) -> Void)? = nil,
        restObserver: (@Sendable (PostgresError) -> Void)? = nil
    ) {
        self.configuration = configuration
        self.acquireObserver = acquireObserver
        self.restObserver = restObserver
        self.timerLoop = MultiThreadedEventLoopGroup.singleton.next()
        let loops = Self.loops
        let slots = (0..<configuration.maxConnections).map { Slot(loop: loops[$0 % loops.count]) }
        self.slots = slots
        self.callEvidence = min(Self.silenceEvidence, configuration.callTimeout / 2)
        state.withLock { $0.idle = slots.reversed() }
    }

    /// The pool's current state.
    public var statistics: Statistics {
        state.withLock {
            Statistics(
                open: $0.open, idle: max(0, $0.open - ($0.busy - $0.connecting)), inUse: max(0, $0.busy - $0.connecting),
                connecting: $0.connecting, waiters: $0.waiters.count,
                connectionsOpened: $0.connectionsOpened, connectionsDiscarded: $0.connectionsDiscarded,
                acquireTimeouts: $0.acquireTimeouts, deadlineExpiries: $0.deadlineExpiries, isFailingFast: $0.silentSince != nil,
                failFastStarts: $0.failFastStarts,
                connectFailures: $0.connectFailures, resting: slots.count(where: \.rests))
        }
    }

    // MARK: - Using connections

    /// Runs `body` with exclusive use of one connection, on that connection's loop.
    ///
    /// The call has a deadline (`timeout`, else the configuration's `callTimeout`), waiting for
    /// a connection included. Past it, a statement in flight is cancelled, the connection is cut
    /// (the body's pending statement throws ``PostgresError/Code/timedOut``), the caller gets
    /// that error (or ``PostgresError/Code/commitOutcomeUnknown`` when COMMIT had been sent),
    /// and the pool fails fast until the database answers again (see
    /// ``Configuration/callTimeout``). Waiting for a free connection can be cancelled; a body
    /// that has started runs to its end.
    public func withConnection<R>(
        timeout: Duration? = nil, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        // The caller's event loop, before waiting for a connection may move it to another.
        let home = MultiThreadedEventLoopGroup.currentEventLoop
        if let home, !Self.onEventLoops {
            // Leaving a database thread's preference goes straight back to the caller's loop
            // (``HomeExecutor``).
            return try await withTaskExecutorPreference(HomeExecutor.current(home)) { try await lease(timeout: timeout, home: home, body) }
        }
        return try await lease(timeout: timeout, home: home, body)
    }

    private func lease<R>(
        timeout: Duration?, home: (any EventLoop)?, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        let limit = timeout ?? configuration.callTimeout
        let started = ContinuousClock.now
        let deadline = started + limit
        var slot: Slot?
        // A caller on an event loop waits for a connection on a database thread, so that a waiter
        // the thread hands one over to runs its body at once where it is, instead of waking its
        // event loop only to hop back (docs/benchmarks.md, "Waiting for a connection on the
        // database thread" and "Waiting on a database thread with several threads"). Callers on
        // no event loop, and all callers on the event loops, wait where they are.
        // With one database thread the caller goes there first and looks at the pool there, where
        // connections are freed: the pool's lock is then taken by that thread alone. With several,
        // one look on the caller's thread leases an idle slot (its body runs under its thread's
        // preference, the one hop it needs) or chooses the thread to wait on (docs/benchmarks.md,
        // "One look at the pool per lease").
        let first: FirstLook?
        // The loop the task prefers while it waits (it resumes there: `release` matches a waiter
        // by it), and runs a body on if its slot is there.
        let preferred: (any DatabaseLoop)?
        if home != nil, !Self.onEventLoops, Self.loops.count == 1 {
            first = nil
            preferred = Self.loops[0]
        } else {
            let look = try takeOrQueue(choosingThread: home != nil && !Self.onEventLoops)
            first = look
            switch look {
            case .slot(let taken):
                acquireObserver?(.zero)
                preferred = taken.loop
            case .wait(_, let thread):
                preferred = thread
            }
        }
        func acquireAndRun() async throws -> R {
            var leased: Slot
            switch first {
            case .slot(let taken): leased = taken
            case .wait(let id, _): leased = try await waitForSlot(id: id, started: started, deadline: deadline, home: home, waitsOn: preferred)
            case nil: leased = try await acquire(deadline: deadline, home: home, waitsOn: preferred)
            }
            while true {
                slot = leased
                do {
                    // `run` finds the task on the preferred thread, or hops there if it is not yet.
                    // Another thread's slot needs that thread's preference.
                    if leased.loop === preferred { return try await run(body, on: leased, deadline: deadline, limit: limit) }
                    return try await withTaskExecutorPreference(leased.loop) { try await run(body, on: leased, deadline: deadline, limit: limit) }
                } catch is SlotRests {
                    // Its connection could not be opened while others are open: wait for one of
                    // them, at the head of the queue (it has waited its turn already).
                    try Task.checkCancellation()
                    leased = try await acquire(deadline: deadline, home: home, waitsOn: preferred, atHead: true)
                }
            }
        }
        let result: Result<R, any Error>
        if let preferred {
            result = await withTaskExecutorPreference(preferred) { await Result { try await acquireAndRun() } }
        } else {
            result = await Result { try await acquireAndRun() }
        }
        // Back to the caller's event loop, unless the task is there already (through
        // ``HomeExecutor``, or a body on the event loops that ran there); a caller on no event loop
        // continues on the global executor. Code after the body must not hold up the connection's
        // loop when that is not the caller's.
        if let home, home.inEventLoop { return try result.get() }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            if let home {
                home.execute { continuation.resume() }
            } else if let slot {
                slot.loop.execute { continuation.resume() }
            } else {
                continuation.resume()  // no connection leased: the task is where it started
            }
        }
        return try result.get()
    }

    /// Runs `body` in a transaction on one connection. Errors that a retry may cure
    /// (serialization failure, deadlock, a connection lost mid-way) rerun the whole body, up to
    /// `maxAttempts` times in all, with a short randomised backoff; the body must therefore be
    /// safe to run again, which a transaction that rolled back always is.
    public func withTransaction<R>(
        isolation: PostgresConnection.IsolationLevel = .readCommitted, maxAttempts: Int = 3, timeout: Duration? = nil,
        _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        var attempt = 1
        while true {
            do {
                return try await withConnection(timeout: timeout) { connection in
                    try await connection.transaction(isolation: isolation, body)
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
        return try await withConnection { try await $0.query(sql, parameters: wire) }
    }

    /// Fails waiting calls, lets running ones finish within their deadline, then closes every
    /// connection. Later calls throw ``PostgresError/Code/poolClosed``; closing again (or from
    /// several tasks at once) waits for the same shutdown.
    public func close() async {
        let waiters = state.withLock { state -> Deque<Waiter> in
            state.closed = true
            let waiters = state.waiters
            state.waiters.removeAll()
            return waiters
        }
        for waiter in waiters {
            waiter.continuation.resume(throwing: Self.closedError)
        }
        // Bodies running now end within their deadline (which cuts a silent connection).
        let deadline = ContinuousClock.now + configuration.callTimeout + .seconds(1)
        while state.withLock({ $0.busy > 0 }), ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        let slots = state.withLock { state -> [Slot] in
            let slots = state.idle
            state.idle.removeAll()
            return slots
        }
        for slot in slots { discard(slot, broken: false) }
    }

    // MARK: - Leases

    /// What a caller's first look at the pool finds: an idle slot, leased to it, or its place in
    /// the queue to be, with the database thread it waits on.
    private enum FirstLook { case slot(Slot), wait(id: Int, on: (any DatabaseLoop)?) }

    /// Leases an idle slot, or numbers the caller as a waiter, in one hold of the lock. With
    /// `choosingThread` (a caller on an event loop, on database threads), a waiter is given the
    /// database thread it waits on: the threads of the slots in turn (slot `i` is driven by
    /// thread `i % threads`), so that waiters wait on each thread in proportion to the
    /// connections it drives, and a thread that frees a connection finds one of the queue's
    /// first waiters waiting on it (`release`). A resting slot's turn is passed over: it frees no
    /// connection until it comes back.
    private func takeOrQueue(choosingThread: Bool) throws -> FirstLook {
        try state.withLock { state -> FirstLook in
            if state.closed { throw Self.closedError }
            if state.silentSince != nil { throw Self.silentError }
            if let slot = state.takeIdle() {
                state.busy += 1
                return .slot(slot)
            }
            state.nextWaiterID += 1
            guard choosingThread, !slots.isEmpty else { return .wait(id: state.nextWaiterID, on: nil) }
            var next = state.nextWaitingThread
            for _ in slots.indices {
                next = (next + 1) % slots.count
                if !slots[next].rests { break }
            }
            state.nextWaitingThread = next
            return .wait(id: state.nextWaiterID, on: slots[next].loop)
        }
    }

    /// What a caller gets once the pool is closed.
    private static var closedError: PostgresError {
        PostgresError(code: .poolClosed, message: "the database pool is shut down")
    }

    /// What a caller gets while the pool fails fast.
    private static var silentError: PostgresError {
        PostgresError(code: .unavailable, message: "the database stopped answering; waiting for it to come back")
    }

    /// Leases a slot, waiting for one if none is idle: a caller on the one database thread, or
    /// whose place rests (`lease`); its thread is chosen already.
    /// - Parameter atHead: queue at the head, not the tail, if no place is free.
    /// - Parameter waitsOn: the loop whose preference the caller waits under, if any (`lease`).
    private func acquire(
        deadline: ContinuousClock.Instant, home: (any EventLoop)?, waitsOn: (any DatabaseLoop)?, atHead: Bool = false
    ) async throws -> Slot {
        let started = ContinuousClock.now
        switch try takeOrQueue(choosingThread: false) {
        case .slot(let slot):
            acquireObserver?(.zero)
            return slot
        case .wait(let id, _):
            return try await waitForSlot(id: id, started: started, deadline: deadline, home: home, waitsOn: waitsOn, atHead: atHead)
        }
    }

    /// Waits, as waiter `id`, for a slot to be handed over.
    private func waitForSlot(
        id: Int, started: ContinuousClock.Instant, deadline: ContinuousClock.Instant, home: (any EventLoop)?,
        waitsOn: (any DatabaseLoop)?, atHead: Bool = false
    ) async throws -> Slot {
        let slot = try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<Slot, any Error>) in
                wait(id: id, continuation: continuation, deadline: deadline, home: home, waitsOn: waitsOn, atHead: atHead)
            }
        } onCancel: {
            if let waiter = removeWaiter(id) {
                waiter.continuation.resume(throwing: CancellationError())
            }
        }
        acquireObserver?(ContinuousClock.now - started)
        if let hold = configuration.faults?.takeHandOverHold() { try? await Task.sleep(for: hold) }
        return slot
    }

    private func wait(
        id: Int, continuation: UnsafeContinuation<Slot, any Error>, deadline: ContinuousClock.Instant, home: (any EventLoop)?,
        waitsOn: (any DatabaseLoop)?, atHead: Bool
    ) {
        // The acquire timeout or the call's deadline, whichever is first.
        let acquireBy = ContinuousClock.now + configuration.acquireTimeout
        let byDeadline = deadline < acquireBy
        let due = byDeadline ? deadline : acquireBy
        // A slot freed since the first look, or the pool closed: no need to queue.
        enum Placement { case slot(Slot), queued(armSweep: Bool), closed, silent, cancelled }
        let placement = state.withLock { state -> Placement in
            if state.closed { return .closed }
            // The pool began to fail fast since the first look (`takeOrQueue`).
            if state.silentSince != nil { return .silent }
            // Cancelled before it could be queued, the cancellation handler found nothing to
            // remove: it must not queue now. (Cancelled after this check, the handler waits for
            // the lock and finds it queued.)
            if Task.isCancelled { return .cancelled }
            if let slot = state.takeIdle() {
                state.busy += 1
                return .slot(slot)
            }
            let waiter = Waiter(id: id, continuation: continuation, due: due, byDeadline: byDeadline, home: home, waitsOn: waitsOn)
            if atHead { state.waiters.prepend(waiter) } else { state.waiters.append(waiter) }
            guard state.sweepDue.map({ due < $0 }) ?? true else { return .queued(armSweep: false) }
            state.sweepDue = due
            return .queued(armSweep: true)
        }
        switch placement {
        case .slot(let slot): continuation.resume(returning: slot)
        case .closed: continuation.resume(throwing: Self.closedError)
        case .silent: continuation.resume(throwing: Self.silentError)
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .queued(let armSweep): if armSweep { scheduleSweep(at: due) }
        }
    }

    /// Waiters expire through one timer for the pool, not one each: arming and cancelling a timer
    /// on an event loop from another thread wakes that loop twice, and under load most leases
    /// queue. The sweep is armed for the earliest due waiter; it expires every waiter due, then
    /// arms itself again for the earliest left. A waiter served before its time costs nothing.
    private func scheduleSweep(at due: ContinuousClock.Instant) {
        let wait = max(.zero, due - .now)
        timerLoop.scheduleTask(in: TimeAmount(wait)) { self.sweepWaiters(armedFor: due) }
    }

    private func sweepWaiters(armedFor due: ContinuousClock.Instant) {
        // Not before its time, whatever the clocks' rounding: what it was armed for expires now.
        let now = max(ContinuousClock.now, due)
        let (expired, next, statistics) = state.withLock { state -> ([Waiter], ContinuousClock.Instant?, (busy: Int, waiters: Int)) in
            var expired: [Waiter] = []
            var earliest: ContinuousClock.Instant?
            var kept = Deque<Waiter>()
            for waiter in state.waiters {
                if waiter.due <= now {
                    expired.append(waiter)
                } else {
                    kept.append(waiter)
                    if earliest.map({ waiter.due < $0 }) ?? true { earliest = waiter.due }
                }
            }
            if !expired.isEmpty { state.waiters = kept }
            state.acquireTimeouts += expired.count
            // Re-arm only if this is the sweep in charge: one due sooner (armed for a waiter with a
            // shorter deadline) re-arms when it runs.
            var next: ContinuousClock.Instant?
            if state.sweepDue.map({ $0 <= now }) ?? true {
                state.sweepDue = earliest
                next = earliest
            }
            return (expired, next, (state.busy, state.waiters.count))
        }
        if let next { scheduleSweep(at: next) }
        for waiter in expired {
            let message =
                waiter.byDeadline
                ? "no database connection became free within the call's deadline"
                : "no database connection became free within \(configuration.acquireTimeout) "
                    + "(\(statistics.busy) of \(configuration.maxConnections) busy, \(statistics.waiters) more waiting)"
            waiter.continuation.resume(throwing: PostgresError(code: .poolTimeout, message: message))
        }
    }

    private func removeWaiter(_ id: Int) -> Waiter? {
        state.withLock { state in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
    }

    /// How many times the head of the queue may be passed over for a waiter behind it (`release`).
    static let headPassedOverAtMost = 3
    /// How many waiters from the head a freed connection looks among for one on its own loop
    /// (`release`).
    static let nearHead = 4

    /// Gives a slot back: to a waiter near the head of the queue, or to the idle list.
    /// `answered`: when the database last answered its call's body, which was not cut (nil:
    /// it did not). `last`: the slot goes to the front of the idle list, to be taken only when
    /// every other is taken (its connect failed: `rest`).
    private func release(_ slot: Slot, answered: ContinuousClock.Instant? = nil, last: Bool = false) {
        enum Next { case waiter(Waiter), idle, closed }
        let next = state.withLock { state -> Next in
            if let answered {
                state.answers &+= 1
                state.lastAnswer = answered
            }
            if !state.waiters.isEmpty {
                // A waiter near the head that waits on the slot's own loop (a database thread, or
                // on the event loops the caller's: release runs there) goes first: its body then
                // runs where it already is, with no hop to the slot's loop and back. The head is
                // passed over at most `headPassedOverAtMost` times, so a waiter that waits on
                // no such loop (a caller on no event loop, one whose place rests) keeps its turn.
                let head = state.waiters.startIndex
                guard state.waiters[head].passedOver < Self.headPassedOverAtMost else { return .waiter(state.waiters.removeFirst()) }
                let index =
                    state.waiters.prefix(Self.nearHead).firstIndex { waiter in
                        waiter.waitsOn.map { $0 === slot.loop } ?? (waiter.home?.inEventLoop == true)
                    } ?? head
                if index != head { state.waiters[head].passedOver += 1 }
                return .waiter(state.waiters.remove(at: index))
            }
            state.busy -= 1
            guard !state.closed else { return .closed }
            if last { state.idle.insert(slot, at: 0) } else { state.idle.append(slot) }
            return .idle
        }
        switch next {
        case .waiter(let waiter): waiter.continuation.resume(returning: slot)
        case .idle: break
        // A call that outlived `close`'s wait: its connection is closed, not kept.
        case .closed: discard(slot, broken: false)
        }
    }

    // MARK: - Running a body (on the slot's loop)

    private func run<R>(
        _ body: (PostgresConnection) async throws -> R, on slot: Slot, deadline: ContinuousClock.Instant, limit: Duration
    ) async throws -> R {
        let loop = slot.loop
        if !loop.inLoop { await withUnsafeContinuation { continuation in loop.execute { continuation.resume() } } }
        func timedOut() -> PostgresError {
            PostgresError(code: .timedOut, message: "the database did not answer within \(limit); the call was abandoned")
        }
        let now = ContinuousClock.now
        // Handed its slot after its deadline (the queue used it up, or its thread was busy): the
        // body does not start, and the database, which has not been asked, is not taken for silent.
        guard now < deadline else { throw tooLate(slot, "no database connection became free within the call's deadline") }
        let call = CallState()
        // Time spent opening a connection counts as time the database had.
        let evidence = limit == configuration.callTimeout ? callEvidence : min(Self.silenceEvidence, limit / 2)
        let window = deadline - now < evidence ? evidence : nil
        let timer = loop.schedule(after: deadline - now) { [self] in
            var cut = Cut(started: now, lateWindow: window, limit: limit)
            if let connection = call.connection {
                cut.heard = connection.answers != call.answers
                cut.answeredLately = cut.heard && connection.lastAnswer.map { ContinuousClock.now - $0 < evidence } == true
                connection.abort(timedOut())
            } else if let connecting = call.connecting {
                call.connecting = nil
                connecting.resume(returning: .failure(timedOut()))
                cut.connect = true
            } else {
                // A new connection was opened (or refused) and is being set up: the database
                // answered. The body will not start (below).
                return
            }
            call.cut = true
            deadlinePassed(cut)
        }
        defer { loop.cancelTimer(timer) }
        if let snapshotTimer = slot.snapshotTimer {
            loop.cancelTimer(snapshotTimer)
            slot.snapshotTimer = nil
        }
        let connection: PostgresConnection
        let opened: Bool
        do {
            if let existing = slot.connection, !existing.checkAlive() { discard(slot) }
            if let existing = slot.connection {
                connection = existing
                opened = false
            } else {
                connection = try await connect(on: loop, call: call)
                slot.connection = connection
                opened = true
                endRests(after: slot)
            }
        } catch {
            if call.cut {
                release(slot)
                throw timedOut()
            }
            switch rest(slot, after: error) {
            case .rests:
                restObserver?(error as? PostgresError ?? PostgresError(code: .connectionFailed, message: "\(error)"))
                throw SlotRests()
            case .last: release(slot, last: true)
            case .none: release(slot)
            }
            throw error
        }
        // The deadline passed while a new connection was set up (its timer may not have run yet,
        // on a loop held up): the connection is kept for the next call, the body does not start.
        if opened, ContinuousClock.now >= deadline { throw tooLate(slot, "no database connection was ready within the call's deadline") }
        call.connection = connection
        call.answers = connection.answers
        let result = await Result { try await body(connection) }
        // A cut call was accounted for by its deadline (`heard`).
        finish(slot, connection, answered: !call.cut && connection.answers != call.answers ? connection.lastAnswer : nil)
        if call.cut {
            // A cut that came after COMMIT was sent says so: the transaction may have committed.
            if case .failure(let error as PostgresError) = result, error.code == .commitOutcomeUnknown { throw error }
            throw timedOut()
        }
        return try result.get()
    }

    /// A call whose deadline passed before its body could start: its slot goes back as it is
    /// (nothing was sent, nothing is cut), and the call counts with those that waited too long.
    /// A read-only snapshot the previous call left open still ends on its own: its timer may
    /// have run while the slot was on its way here (`finish`).
    private func tooLate(_ slot: Slot, _ message: String) -> PostgresError {
        state.withLock { $0.acquireTimeouts += 1 }
        giveBack(slot)
        return PostgresError(code: .poolTimeout, message: message)
    }

    /// After a body: a connection that broke, that a deadline cut, that the server refused a
    /// write on as read-only, or that the body left inside a transaction is not reused; then the
    /// slot goes back. `answered`: when the database last answered the body, which was not cut
    /// (nil: it did not).
    ///
    /// A read-only snapshot left open (``PostgresConnection/endsSnapshotLazily``) goes back as it
    /// is: its `ROLLBACK` travels with the next lease's first statements, which saves the round
    /// trip a `COMMIT` of its own would cost. So that no snapshot lingers on an idle connection
    /// (holding back vacuum, or a migration's lock), a timer on the loop ends it on its own if
    /// nobody leases the connection within ``snapshotGrace``.
    private func finish(_ slot: Slot, _ connection: PostgresConnection, answered: ContinuousClock.Instant?) {
        if connection.abortReason != nil || !connection.isOpen || connection.refusedWrite
            || (connection.isInTransaction && !connection.endsSnapshotLazily)
        {
            discard(slot)
        }
        giveBack(slot, answered: answered)
    }

    /// Releases a slot on its loop; a read-only snapshot left open on its connection, with no
    /// timer armed to end it, gets one: it ends after ``snapshotGrace`` unless someone leases the
    /// connection meanwhile (`run` cancels the timer when it arrives here).
    private func giveBack(_ slot: Slot, answered: ContinuousClock.Instant? = nil) {
        let openSnapshot = slot.snapshotTimer == nil && slot.connection?.endsSnapshotLazily == true
        release(slot, answered: answered)
        if openSnapshot { slot.snapshotTimer = slot.loop.schedule(after: Self.snapshotGrace) { [self] in endIdleSnapshot(slot) } }
    }

    /// How long the database must have been asked and not answered for a cut to be taken for
    /// silence (`deadlinePassed`), or half a call's limit if that is less: a call cut after it
    /// started with at least this much of its deadline left (measured when `run` starts; opening
    /// a connection counts as the database's time), or late cuts going on this long with
    /// nothing answered (`deadlinePassed`; for a connect cut, this whatever the limit).
    static let silenceEvidence = Duration.seconds(1)

    /// How long an idle connection may keep a read-only snapshot open, waiting for a lease to
    /// carry its end. Under load a connection is leased again well within it.
    static let snapshotGrace = Duration.milliseconds(10)

    /// The grace of an idle connection's open snapshot ran out (on its loop): unless someone
    /// leased it meanwhile, it is leased here, the snapshot ended within the call deadline,
    /// and the slot given back.
    private func endIdleSnapshot(_ slot: Slot) {
        slot.snapshotTimer = nil
        let leased = state.withLock { state -> Bool in
            guard let index = state.idle.firstIndex(where: { $0 === slot }) else { return false }
            state.idle.remove(at: index)
            state.busy += 1
            return true
        }
        guard leased else { return }
        guard let connection = slot.connection, connection.checkAlive() else {
            // It died idle (the server ended the session): nothing to end, and no reason to open a
            // connection just for that.
            discard(slot)
            return release(slot)
        }
        let deadline = ContinuousClock.now + configuration.callTimeout
        Task(executorPreference: slot.loop) { [self] in
            _ = try? await run({ try await $0.endSnapshot() }, on: slot, deadline: deadline, limit: configuration.callTimeout)
        }
    }

    /// The first pause of a place whose connection could not be opened, and the longest.
    static let firstRest = Duration.seconds(1)
    static let longestRest = Duration.seconds(30)

    /// What becomes of a place whose connection could not be opened (`rest`).
    private enum AfterFailedConnect {
        /// It rests; its caller waits for another connection.
        case rests
        /// Its caller fails; it goes where it is taken only when every other place is.
        case last
        /// Its caller fails; it goes back as usual (no other connection is open).
        case none
    }

    /// Sets `slot` aside after its connection could not be opened, while another connection is
    /// open or being opened (there is one to wait for), if that is no outage: the server
    /// refused it (``PostgresError/isRefusalByServer``), or the pool's other connections were
    /// answering (an answer within ``silenceEvidence``: a proxy in front closing new
    /// connections, a name that did not resolve for a moment). It comes back after its pause,
    /// and its caller waits for one of the others.
    ///
    /// Otherwise the caller fails at once: a server that is not there, or not yet (a restart, a
    /// failover, the network), would park the places one by one while the open connections, as
    /// dead as this one, are still counted. With other connections open, the place then goes
    /// where it is taken last, so that callers use them first.
    private func rest(_ slot: Slot, after error: any Error) -> AfterFailedConnect {
        let refused = (error as? PostgresError)?.isRefusalByServer == true
        let now = ContinuousClock.now
        let (after, rest) = state.withLock { state -> (AfterFailedConnect, (pause: Duration, taken: Int)?) in
            state.connectFailures += 1
            guard !state.closed, state.open > 0 || state.connecting > 0 else { return (.none, nil) }
            slot.failures += 1
            let othersAnswer = state.lastAnswer.map { now - $0 < Self.silenceEvidence } ?? false
            guard refused || othersAnswer else { return (.last, nil) }
            slot.rests = true
            slot.restsTaken &+= 1
            state.busy -= 1
            let pause = configuration.faults?.rests ?? min(Self.longestRest, Self.firstRest * (1 << min(slot.failures - 1, 5)))
            return (.rests, (pause, slot.restsTaken))
        }
        if let rest { timerLoop.scheduleTask(in: TimeAmount(rest.pause)) { self.endRest(slot, rest.taken) } }
        return after
    }

    /// A connection was opened for `slot`: the server takes connections again, so the places
    /// resting end their pauses now (each is tried when the load asks for it, and rests again,
    /// for longer, if the server still refuses it), rather than leave the pool short for up to
    /// ``longestRest`` after a spell in which the server refused connections. Against a server
    /// that grants fewer connections than the pool's size, each connection replaced this way
    /// costs each resting place one more refused connect.
    private func endRests(after slot: Slot) {
        let resting = state.withLock { _ -> [(Slot, Int)] in
            slot.failures = 0
            return slots.filter(\.rests).map { ($0, $0.restsTaken) }
        }
        for (place, taken) in resting { endRest(place, taken) }
    }

    /// A resting place's pause is over: the first waiter tries it, or it goes back to the idle
    /// list behind the places that have a connection, so that it is tried only when they are
    /// all taken. (Only this takes a place out of `resting`, once per rest: its timer, or
    /// `endRests` first; `taken` names the rest, so that the timer of one `endRests` ended does
    /// not end the next.)
    private func endRest(_ slot: Slot, _ taken: Int) {
        let waiter = state.withLock { state -> Waiter? in
            guard slot.rests, slot.restsTaken == taken else { return nil }
            slot.rests = false
            guard !state.waiters.isEmpty else {
                state.idle.insert(slot, at: 0)
                return nil
            }
            state.busy += 1
            return state.waiters.removeFirst()
        }
        waiter?.continuation.resume(returning: slot)
    }

    /// Closes a slot's connection. `broken`: it is counted with the discarded (not when the
    /// pool closes).
    private func discard(_ slot: Slot, broken: Bool = true) {
        guard slot.connection != nil else { return }
        slot.connection = nil
        state.withLock { state in
            state.open -= 1
            if broken { state.connectionsDiscarded += 1 }
        }
    }

    /// Opens a connection off the loop (libpq connects blocking), binds it to `loop`; the call's
    /// deadline can answer first, in which case the late connection is closed.
    private func connect(on loop: any DatabaseLoop, call: CallState) async throws -> PostgresConnection {
        let configuration = configuration
        state.withLock { $0.connecting += 1 }
        let opened: Result<PostgresConnection, any Error> = await withUnsafeContinuation { continuation in
            call.connecting = continuation
            startThread(named: "baton-db-conn") {
                if let faults = configuration.faults {
                    if let delay = faults.connectsDelay { Thread.sleep(forTimeInterval: delay / .seconds(1)) }
                    while faults.connectsHeld { Thread.sleep(forTimeInterval: 0.01) }
                }
                let result = Result {
                    if configuration.faults?.connectsFail == true {
                        throw PostgresError(
                            code: .connectionFailed,
                            message: "connection to server failed: server closed the connection unexpectedly (fault injected)")
                    }
                    return try PostgresConnection(conninfo: configuration.conninfo, limits: configuration.limits, faults: configuration.faults)
                }
                // The server answered (its start-up and the session's settings), even if the
                // call's deadline has cut the wait for it.
                if case .success = result { self.state.withLock { $0.connectsAnswered &+= 1 } }
                loop.execute {
                    guard let waiting = call.connecting else { return }  // the deadline answered already
                    call.connecting = nil
                    waiting.resume(returning: result)
                }
            }
        }
        let connection: PostgresConnection
        do {
            connection = try opened.get()
            if let hold = configuration.faults?.takeConnectionHold() { try? await Task.sleep(for: hold) }
            try await loop.bind(connection)
        } catch {
            state.withLock { $0.connecting -= 1 }
            throw error
        }
        state.withLock { $0.connecting -= 1; $0.open += 1; $0.connectionsOpened += 1 }
        return connection
    }

    /// A call's deadline passed while its body ran or its connection was being opened (the
    /// database did not answer): the pool fails fast from now on — before the caller hears
    /// back, so its next call already does — until a probe gets through.
    ///
    /// Callers already waiting for a connection fail fast then too: each would otherwise be
    /// handed a connection cut by its deadline and wait out its own on a new one.
    ///
    /// A call that started before the last fail-fast ended and is cut after belongs to that
    /// episode (the database was silent when it asked): it starts no new one.
    ///
    /// A call that started in time and whose database answered it less than its silence evidence
    /// (``silenceEvidence``, or half its limit) before the cut did not meet a silent database: a
    /// long body of quick statements, or one a busy loop stretched past its deadline. Its
    /// connection is replaced (it was cut), and nothing else happens.
    ///
    /// A call that started late — with less than its `lateWindow` left: under overload, the
    /// head of a queue as long as the deadline — and was cut (its statement, or its connect)
    /// says the queue was long more than that the database is silent; taking it for silence
    /// would throw away every call waiting and replace the connection, again and again. Such a
    /// cut starts fail-fast only when late cuts have gone on for that window with no call
    /// answered since the first of them (nor the cut call itself, `heard`). A late connect cut
    /// counts only if no connect was answered since then either (a slot a cut emptied
    /// reconnects with the time left, and a healthy server answers that connect even after its
    /// call was cut), and it needs a full ``silenceEvidence``, whatever the deadline (a new
    /// connection costs the server a process, which under load can take longer than a short
    /// deadline's window).
    ///
    /// A healthy database under overload answers between late cuts, and a burst of them
    /// (waiters queued together, cut together) is not that long. A database that answers
    /// connects but no statement (a stuck server, a pooler in front), or nothing at all, is
    /// still found when every call starts late. A run whose first cut is older than two
    /// deadlines and the window is forgotten: with calls coming, late cuts on a silent database
    /// follow each other within a deadline. Not found while every call starts late, and found
    /// by the first cut call that started in time: a database that answers some calls (reads)
    /// and not others (writes, on a stalled disk).
    private func deadlinePassed(_ cut: Cut) {
        let now = ContinuousClock.now
        let waiters = state.withLock { state -> Deque<Waiter>? in
            state.deadlineExpiries += 1
            if cut.heard { state.answers &+= 1 }
            if let ended = state.silenceEnded, cut.started < ended { return nil }
            if let window = cut.lateWindow {
                if !state.lateCutIsEvidence(cut, window: window, at: now) { return nil }
            } else if cut.answeredLately {
                // A long body of quick statements, or one a busy loop stretched: the database
                // answered it moments ago, so its connection is replaced but nobody else fails.
                return nil
            }
            guard state.silentSince == nil, !state.closed else { return nil }
            state.silentSince = .now
            state.failFastStarts += 1
            state.lateCuts = nil
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        guard let waiters else { return }
        for waiter in waiters { waiter.continuation.resume(throwing: Self.silentError) }
        probeUntilAnswered()
    }

    /// While the pool fails fast, tries a fresh connection every half second; the first that
    /// gets an answer ends fail-fast. (A refusal is not taken for one: a server whose storage
    /// stalled still refuses at once when it is full, while the pool's connections hang. The
    /// connections a deadline cut free their places on the server for the probe.)
    private func probeUntilAnswered() {
        var probeLimits = configuration.limits
        probeLimits.connect = .seconds(2)
        let limits = probeLimits
        let conninfo = configuration.conninfo
        // Weak: a pool let go of without `close()` (a command's, a test's) ends its probe too.
        startThread(named: "baton-db-probe") { [weak self] in
            while let pool = self, !pool.state.withLock({ $0.closed }) {
                // `SELECT 1` has the connect timeout as its bound, as the setup has: a server that
                // answers connects and no statement held the probe in it for good, and the pool
                // failed fast until the process ended.
                if let connection = try? PostgresConnection(conninfo: conninfo, limits: limits),
                    (try? connection.bounded(by: limits.connect, passed: { $0 }) { try connection.query("SELECT 1") }) != nil
                {
                    let now = ContinuousClock.now
                    pool.state.withLock {
                        $0.silentSince = nil
                        $0.silenceEnded = now
                        $0.lateCuts = nil
                    }
                    return
                }
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }
}

/// One of the pool's `maxConnections` places: its connection (opened lazily, dropped when it
/// breaks) and the loop that drives it. Touched only by whoever holds its lease.
private final class Slot: @unchecked Sendable {
    let loop: any DatabaseLoop
    var connection: PostgresConnection?
    /// Ends the connection's read-only snapshot if nobody leases it in time (see `finish`);
    /// set and cancelled on the loop.
    var snapshotTimer: Int?
    /// Failures to open a connection in a row (the next pause doubles with each); under the
    /// pool's lock.
    var failures = 0
    /// Whether the slot rests: its connection could not be opened, and it waits for its pause to
    /// end (see `rest`); under the pool's lock.
    var rests = false
    /// How many rests the slot has taken: names the current one (`endRest`); under the pool's
    /// lock.
    var restsTaken = 0

    init(loop: any DatabaseLoop) { self.loop = loop }
}

/// Thrown by `run` when its slot rests: the caller leases another.
private struct SlotRests: Error {}

/// A caller waiting for a free slot.
private struct Waiter {
    var id: Int
    var continuation: UnsafeContinuation<Slot, any Error>
    /// When it stops waiting: the acquire timeout, or the call's deadline if that is sooner.
    var due: ContinuousClock.Instant
    var byDeadline: Bool
    /// The caller's event loop, if any.
    var home: (any EventLoop)?
    /// The loop whose preference the caller waits under, if any (`lease`): a database thread, or
    /// the loop of a slot it leased before; it resumes there. Nil: it resumes where it called.
    var waitsOn: (any DatabaseLoop)?
    /// How many times, at the head of the queue, it was passed over for a waiter behind it
    /// (`release`).
    var passedOver = 0
}

/// What a call's deadline cut, for `deadlinePassed` to judge.
private struct Cut {
    /// When the call started its connect or its body (`run`).
    var started: ContinuousClock.Instant
    /// The least of ``PostgresPool/silenceEvidence`` and half the call's limit, if it started
    /// with less than that left.
    var lateWindow: Duration?
    /// How long the call may take, waiting included (its deadline's distance from its start).
    var limit: Duration
    /// The call had an answer of its own before the cut.
    var heard = false
    /// And the last came less than the call's silence evidence before the cut.
    var answeredLately = false
    /// What was cut was a connect.
    var connect = false
}

/// A run of late cuts with nothing answered since its first (`PostgresPool.deadlinePassed`).
private struct LateCuts {
    var since: ContinuousClock.Instant
    var answers: Int
    var connectsAnswered: Int
    var window: Duration
    var limit: Duration
}

/// What the deadline's timer and the running call share; touched only on the slot's loop.
private final class CallState: @unchecked Sendable {
    /// The deadline cut what was in flight (a statement, or a connect that had not answered).
    /// When it finds a new connection being set up instead, it cuts nothing, and `run` sees the
    /// deadline passed by the clock.
    var cut = false
    var connection: PostgresConnection?
    /// The connection's ``PostgresConnection/answers`` when the body started.
    var answers = 0
    /// Waiting for a connection to open: the deadline may answer first.
    var connecting: UnsafeContinuation<Result<PostgresConnection, any Error>, Never>?
}

/// A caller's NIO event loop as a task executor, for the length of a call on a database thread.
///
/// A task leaving the database loop's preference would go to the generic executor, which Baton
/// runs on the event loops (`EventLoopGlobalExecutor`): from a thread that is no event loop's,
/// that is the group's next loop — on two loops, half the time not the one that serves the
/// request, which then hopped home once more to write its response. With this as the outer
/// preference, the task leaves the database thread for its own loop at once (a caller waits for
/// its connection on a database thread: ``lease``). (Entering and leaving this preference on
/// the loop itself costs a job queued there, no wake-up.)
final class HomeExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    private init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// Each event loop's thread makes its executor once, not once per call.
    private static let made = ThreadSpecificVariable<HomeExecutor>()

    /// The executor of `eventLoop`, the calling thread's loop.
    static func current(_ eventLoop: any EventLoop) -> HomeExecutor {
        if let made = made.currentValue, made.eventLoop === eventLoop { return made }
        let executor = HomeExecutor(eventLoop)
        made.currentValue = executor
        return executor
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
