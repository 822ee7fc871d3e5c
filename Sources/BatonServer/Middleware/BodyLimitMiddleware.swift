import Hummingbird

/// Refuses a request whose announced `Content-Length` exceeds the limit with 413
/// `body_too_large` before any handler runs. Bodies without a length are bounded where they
/// are read (``Request/collectBody(limit:)``).
public struct BodyLimitMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let limit: Int

    public init(limit: Int) {
        self.limit = limit
    }

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw APIError.bodyTooLarge(limit: limit)
        }
        var context = context
        context.bodyLimit = limit
        return try await next(request, context)
    }
}
