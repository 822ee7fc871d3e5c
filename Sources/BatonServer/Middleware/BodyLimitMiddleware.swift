import Hummingbird

/// Refuses a request whose announced `Content-Length` exceeds the limit with 413
/// `body_too_large` before any handler runs. Bodies without a length are bounded where they
/// are read (``Request/collectBody(limit:)``).
///
/// Also refuses a request with a body that says it has a `Content-Encoding` other than
/// `identity` (a gzipped command): Baton reads bodies as they come, so it would have answered
/// `invalid_json` about bytes the client never wrote. It answers 415 `unsupported_media_type`
/// with `Accept-Encoding: identity` instead (RFC 9110 §15.5.16), naming the coding.
public struct BodyLimitMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let limit: Int

    public init(limit: Int) {
        self.limit = limit
    }

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let length = request.headers.value(.contentLength).flatMap { Int($0) } ?? 0
        if length > limit { throw APIError.bodyTooLarge(limit: limit) }
        // The coding is checked only when the header is there, so most requests stop at the lookup.
        if let coding = request.headers.value(.contentEncoding), length > 0 || request.headers.contains(.transferEncoding),
            !Self.isIdentity(coding)
        {
            throw APIError(
                .unsupportedMediaType, .unsupportedMediaType,
                "the body is sent with Content-Encoding \"\(coding.prefix(40))\"; send it uncompressed",
                headers: [.acceptEncoding: "identity"])
        }
        var context = context
        context.bodyLimit = limit
        return try await next(request, context)
    }

    /// Whether a `Content-Encoding` value names no coding at all: empty, or `identity` only.
    static func isIdentity(_ coding: String) -> Bool {
        coding.split(separator: ",").allSatisfy { $0.filter { $0 != " " && $0 != "\t" }.lowercased() == "identity" }
    }
}
