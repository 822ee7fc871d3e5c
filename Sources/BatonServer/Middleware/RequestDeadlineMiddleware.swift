import Hummingbird
import NIOCore
import NIOPosix
import Synchronization

/// Every request answers within its deadline (`http.request.timeout`): if the handler has not
/// answered by then it is cancelled and the client gets `503 unavailable` with `Retry-After`.
///
/// A backstop: database calls have shorter deadlines of their own (`database.timeout`) and
/// service calls a budget below it, so a handler waiting on a silent database or service has
/// already answered 503 by then. What this catches is anything else that waits too long.
///
/// The handler runs in the request's own task, and the deadline is a timer on the request's
/// event loop that cancels that task: no child tasks and no `Task.sleep` per request (a sleep
/// is a libdispatch timer, which cost every request two thread wake-ups). Every wait in Baton
/// ends on cancellation, so a cancelled handler returns at once and the answer is the 503.
public struct RequestDeadlineMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let timeout: Duration

    public init(timeout: Duration) {
        self.timeout = timeout
    }

    public func handle(_ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response) async throws -> Response {
        let deadline = withUnsafeCurrentTask { Deadline(cancelling: UnsafeTaskReference($0)) }
        let loop = MultiThreadedEventLoopGroup.currentEventLoop ?? MultiThreadedEventLoopGroup.singleton.next()
        // Only a loop that is shutting down refuses; the server is stopping then.
        let timer = try? loop.scheduleCallback(in: TimeAmount(timeout), handler: deadline)
        let outcome: Result<Response, any Error>
        do { outcome = .success(try await next(request, context)) } catch { outcome = .failure(error) }
        timer?.cancel()
        if deadline.finish() {
            throw APIError.unavailable("the request did not complete within its deadline; try again shortly")
        }
        return try outcome.get()
    }
}

/// Whether a request's deadline passed, and the timer's callback (NIO's scheduled callback:
/// unlike `scheduleTask`, no promise to allocate and to fail with an error when the request
/// finishes first, as nearly every one does). The task is cancelled only while it still runs.
private final class Deadline: NIOScheduledCallbackHandler, Sendable {
    private let task: UnsafeTaskReference
    /// (finished, expired)
    private let state = Mutex((false, false))

    init(cancelling task: UnsafeTaskReference) { self.task = task }

    func handleScheduledCallback(eventLoop: some EventLoop) {
        state.withLock { state in
            guard !state.0 else { return }
            state.1 = true
            task.cancel()
        }
    }

    /// Marks the request finished; returns whether the deadline had passed.
    func finish() -> Bool {
        state.withLock { state in
            state.0 = true
            return state.1
        }
    }
}

/// The request's task, for the timer to cancel. Only used under ``Deadline``'s lock while the
/// task is known to be running (it is marked finished before it can end).
private struct UnsafeTaskReference: @unchecked Sendable {
    let task: UnsafeCurrentTask?
    init(_ task: UnsafeCurrentTask?) { self.task = task }
    func cancel() { task?.cancel() }
}
