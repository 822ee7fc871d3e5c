import DequeModule
import Hummingbird
import NIOCore
import NIOPosix
import Synchronization

/// Every request answers within its deadline (`http.request.timeout`): if the handler has not
/// answered by then it is cancelled and the client gets `503 unavailable` with `Retry-After`, or
/// `408 request_timeout` when what the handler was still waiting for was the client's own body.
///
/// A backstop: database calls have shorter deadlines of their own (`database.timeout`) and
/// service calls a budget below it, so a handler waiting on a silent database or service has
/// already answered 503 by then. What this catches is anything else that waits too long, and a
/// client whose upload stalls.
///
/// The handler runs in a child task of the request's task (`async let`), and the deadline is a
/// timer on the event loop the request runs on (Swift concurrency's jobs run on the event
/// loops: `EventLoopGlobalExecutor`) that cancels that child: no `Task.sleep` per request (a
/// sleep is a libdispatch timer, which cost every request two thread wake-ups). Every wait in
/// Baton ends on cancellation, so a cancelled handler returns at once and the answer is written
/// by the request's own task. That task must not be the one cancelled: Hummingbird closes a
/// cancelled connection task's input, and NIO's writer refuses every write from a cancelled
/// task, so its answer would never reach the client (the connection closed without a byte).
///
/// The timers are not NIO's one per request but a ``DeadlineQueue`` per event loop: every
/// request has the same timeout, so its deadlines fall due in the order they were set, and one
/// NIO timer for the earliest serves them all.
public struct RequestDeadlineMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    /// One per event loop of NIO's shared group, the loops requests run on.
    private let queues: [DeadlineQueue]

    public init(timeout: Duration) {
        queues = MultiThreadedEventLoopGroup.singleton.makeIterator().map { DeadlineQueue(loop: $0, timeout: timeout) }
    }

    public func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let deadline = Deadline()
        let queue = queue()
        queue.add(deadline)
        // `next` is not `Sendable`; the child is its only caller, and this task waits for it.
        nonisolated(unsafe) let next = next
        async let handled = deadline.run { try await next(request, context) }
        let outcome = await handled
        queue.finished()
        if deadline.expired {
            if case .failure(is BodyReadCancelled) = outcome { throw APIError.requestTimeout }
            throw APIError.unavailable("the request did not complete within its deadline; try again shortly")
        }
        return try outcome.get()
    }

    /// The queue of the event loop the request runs on; from elsewhere (a test's router, not on
    /// a loop) the first: the queues take deadlines from any thread.
    private func queue() -> DeadlineQueue {
        if let loop = MultiThreadedEventLoopGroup.currentEventLoop, let queue = queues.first(where: { $0.loop === loop }) {
            return queue
        }
        return queues[0]
    }

    /// How many deadlines the queues hold (for tests).
    var heldDeadlines: Int { queues.reduce(0) { $0 + $1.count } }
}

/// The deadlines of the requests that started on one event loop, in the order they fall due,
/// and one NIO timer, armed for the earliest. All have the same timeout, so the order they fall
/// due in is the order they were set in: setting one is an append, and a request that ends
/// before its deadline (nearly all do) leaves its entry to be dropped when it reaches the
/// front, in order of ending as well, mostly. NIO's own timers keep a heap: a timer per request
/// was an insertion and a removal in it, a dozen value copies each (about 33 of a command's
/// 1 420 `swift_retain` calls, `Benchmarks/e2e/counts.sh`).
///
/// The timer fires when the earliest deadline falls due (by then its request has usually
/// ended): it expires what is due, drops what has ended, and is armed again for the new
/// earliest. So it fires about once per timeout while requests keep coming.
final class DeadlineQueue: Sendable {
    let loop: any EventLoop
    private let timeout: TimeAmount

    private struct Entry {
        let due: NIODeadline
        let deadline: Deadline
    }
    private struct State {
        var entries = Deque<Entry>()
        /// Whether a NIO timer is armed (for the first entry's due time, or earlier).
        var armed = false
        /// The size that next has the entries swept of those whose request ended: a request
        /// held past the others (a slow upload) keeps every entry behind it until its own ends.
        var sweepAt = DeadlineQueue.minimumSweep
    }
    private let state = Mutex(State())
    static let minimumSweep = 1024

    init(loop: any EventLoop, timeout: Duration) {
        self.loop = loop
        self.timeout = TimeAmount(timeout)
    }

    /// Sets `deadline` to fall due a timeout from now.
    fileprivate func add(_ deadline: Deadline) {
        let due = NIODeadline.now() + timeout
        let arm = state.withLock { state in
            state.entries.append(Entry(due: due, deadline: deadline))
            defer { state.armed = true }
            return !state.armed
        }
        if arm { self.arm(for: due) }
    }

    /// A request ended: drops the entries at the front whose requests have ended.
    fileprivate func finished() {
        state.withLock { state in
            while let first = state.entries.first, first.deadline.isFinished { state.entries.removeFirst() }
            if state.entries.count >= state.sweepAt {
                state.entries.removeAll { $0.deadline.isFinished }
                state.sweepAt = max(Self.minimumSweep, 2 * state.entries.count)
            }
        }
    }

    /// How many entries are held (for tests).
    var count: Int { state.withLock { $0.entries.count } }

    private func arm(for due: NIODeadline) {
        // Only a loop that is shutting down refuses; the server is stopping then.
        loop.scheduleTask(deadline: due) { self.fire() }
    }

    private func fire() {
        let now = NIODeadline.now()
        let (expired, next) = state.withLock { state -> ([Deadline], NIODeadline?) in
            var expired: [Deadline] = []
            while let first = state.entries.first, first.due <= now || first.deadline.isFinished {
                state.entries.removeFirst()
                if !first.deadline.isFinished { expired.append(first.deadline) }
            }
            state.armed = !state.entries.isEmpty
            return (expired, state.entries.first?.due)
        }
        if let next { arm(for: next) }
        for deadline in expired { deadline.expire() }
    }
}

/// The handler's task while it runs, and whether the deadline passed first. The task is
/// cancelled only while the handler runs in it.
private final class Deadline: Sendable {
    private struct State {
        var task: UnsafeTaskReference?
        var finished = false
        var expired = false
    }
    private let state = Mutex(State())

    /// Runs `handler` as the task the deadline cancels (the calling one); its outcome as a value.
    func run(_ handler: () async throws -> Response) async -> Result<Response, any Error> {
        let expiredFirst = withUnsafeCurrentTask { task in
            state.withLock { state in
                // The deadline can pass before the child task first runs (a busy loop): then
                // the handler is not started at all.
                if !state.expired { state.task = UnsafeTaskReference(task) }
                return state.expired
            }
        }
        if expiredFirst { return .failure(CancellationError()) }
        let outcome: Result<Response, any Error>
        do { outcome = .success(try await handler()) } catch { outcome = .failure(error) }
        state.withLock { state in
            state.finished = true
            state.task = nil
        }
        return outcome
    }

    /// The deadline: cancels the handler's task if it still runs. (Its cancellation handlers
    /// run here, on the loop, under the lock: none of them touches the deadline.)
    func expire() {
        state.withLock { state in
            guard !state.finished else { return }
            state.expired = true
            state.task?.cancel()
        }
    }

    /// Whether the deadline passed before the handler finished.
    var expired: Bool { state.withLock { $0.expired } }

    /// Whether the handler finished (or was never started: the deadline passed first).
    var isFinished: Bool { state.withLock { $0.finished || $0.expired } }
}

/// The handler's task, for the timer to cancel. Only used under ``Deadline``'s lock while the
/// task is known to be running (it is forgotten before it can end): `@unchecked` because
/// `UnsafeCurrentTask` is not `Sendable`, though cancelling a task from another thread is safe.
private struct UnsafeTaskReference: @unchecked Sendable {
    let task: UnsafeCurrentTask?
    init(_ task: UnsafeCurrentTask?) { self.task = task }
    func cancel() { task?.cancel() }
}
