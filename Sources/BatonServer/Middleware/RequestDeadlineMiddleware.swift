import Hummingbird

/// Every request answers within its deadline (`http.request.timeout`): if the handler has not
/// answered by then it is cancelled and the client gets `503 unavailable` with `Retry-After`.
///
/// A backstop: database calls have shorter deadlines of their own (`database.timeout`), so a
/// handler waiting on a silent database has already answered 503 by then. What this catches is
/// anything else that waits too long.
public struct RequestDeadlineMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let timeout: Duration

    public init(timeout: Duration) {
        self.timeout = timeout
    }

    public func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let timeout = self.timeout
        return try await withoutActuallyEscaping(next) { next in
            // The group outlives neither child, so `next` never escapes this call; the rest of the
            // chain is made of Sendable responders, so running it on the child task is safe.
            nonisolated(unsafe) let handler = next
            return try await withThrowingTaskGroup(of: Response?.self) { group in
                group.addTask { try await handler(request, context) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let response = first else {
                    throw APIError.unavailable("the request did not complete within its deadline; try again shortly")
                }
                return response
            }
        }
    }
}
