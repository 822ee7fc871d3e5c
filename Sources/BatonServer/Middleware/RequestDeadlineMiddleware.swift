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
public struct RequestDeadlineMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let timeout: Duration

    public init(timeout: Duration) {
        self.timeout = timeout
    }

    public func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let deadline = Deadline()
        let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? MultiThreadedEventLoopGroup.singleton.next()
        // Only a loop that is shutting down refuses; the server is stopping then.
        let timer = try? loop.scheduleCallback(in: TimeAmount(timeout), handler: deadline)
        // `next` is not `Sendable`; the child is its only caller, and this task waits for it.
        nonisolated(unsafe) let next = next
        async let handled = deadline.run { try await next(request, context) }
        let outcome = await handled
        timer?.cancel()
        if deadline.expired {
            if case .failure(is BodyReadCancelled) = outcome { throw APIError.requestTimeout }
            throw APIError.unavailable("the request did not complete within its deadline; try again shortly")
        }
        return try outcome.get()
    }
}

/// The handler's task while it runs, whether the deadline passed first, and the timer's callback
/// (NIO's scheduled callback: unlike `scheduleTask`, no promise to allocate and to fail with an
/// error when the request finishes first, as nearly every one does). The task is cancelled only
/// while the handler runs in it.
private final class Deadline: NIOScheduledCallbackHandler, Sendable {
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
    func handleScheduledCallback(eventLoop: some EventLoop) {
        state.withLock { state in
            guard !state.finished else { return }
            state.expired = true
            state.task?.cancel()
        }
    }

    /// Whether the deadline passed before the handler finished.
    var expired: Bool { state.withLock { $0.expired } }
}

/// The handler's task, for the timer to cancel. Only used under ``Deadline``'s lock while the
/// task is known to be running (it is forgotten before it can end): `@unchecked` because
/// `UnsafeCurrentTask` is not `Sendable`, though cancelling a task from another thread is safe.
private struct UnsafeTaskReference: @unchecked Sendable {
    let task: UnsafeCurrentTask?
    init(_ task: UnsafeCurrentTask?) { self.task = task }
    func cancel() { task?.cancel() }
}
