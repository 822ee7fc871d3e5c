import Hummingbird
import Logging
import NIOCore

/// Per-request state shared by middleware and routes.
public struct BatonRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The request id: the caller's `X-Request-Id` when it is well-formed, else a new one.
    public var requestID: String = ""
    /// The configured request body limit (set by ``BodyLimitMiddleware``).
    public var bodyLimit: Int = 64 * 1024

    /// The client's IP address, when the transport knows it (per-address limits).
    public var remoteAddress: String?

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress?.ipAddress
    }

    /// Bodies are read explicitly with the configured limit (see ``Request/collectBody(limit:)``);
    /// where Hummingbird reads one itself, the same limit.
    public var maxUploadSize: Int { bodyLimit }
}

extension BatonRequestContext {
    /// Reads the request body within the configured limit.
    public func body(of request: Request) async throws -> ByteBuffer {
        try await request.collectBody(limit: bodyLimit)
    }
}

/// The request's body was still being read when the request's task was cancelled: at the
/// request's deadline (``RequestDeadlineMiddleware`` answers `408 request_timeout`: the client's
/// body stopped arriving), or as the server stops (`503`, like any cancelled request).
struct BodyReadCancelled: Error {}

extension Request {
    /// Reads the whole body, refusing more than `limit` bytes with 413 `body_too_large`, whether
    /// the client announced the length or not.
    public func collectBody(limit: Int) async throws -> ByteBuffer {
        if let length = headers.value(.contentLength).flatMap({ Int($0) }), length > limit {
            throw APIError.bodyTooLarge(limit: limit)
        }
        do {
            return try await body.collect(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.bodyTooLarge(limit: limit)
        } catch is NIOTooManyBytesError {
            // A body without an announced length (chunked) that went past the limit: NIO's
            // collect says so with its own error.
            throw APIError.bodyTooLarge(limit: limit)
        } catch where Task.isCancelled {
            throw BodyReadCancelled()
        }
    }
}
