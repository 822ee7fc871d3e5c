import BatonJSON
import Hummingbird

/// An error answered with the JSON envelope of PROTOCOL §1:
/// `{"error": {"code": "invalid_json", "message": "…"}}` and a 4xx/5xx status.
public struct APIError: Error, HTTPResponseError, Sendable {
    /// The machine-readable error code; clients switch on it.
    public struct Code: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(stringLiteral value: String) { self.rawValue = value }

        public static let invalidJSON: Code = "invalid_json"
        public static let invalidRequest: Code = "invalid_request"
        public static let invalidPayload: Code = "invalid_payload"
        public static let payloadExpired: Code = "payload_expired"
        public static let unauthenticated: Code = "unauthenticated"
        public static let forbidden: Code = "forbidden"
        public static let notFound: Code = "not_found"
        public static let methodNotAllowed: Code = "method_not_allowed"
        public static let bodyTooLarge: Code = "body_too_large"
        public static let unsupportedMediaType: Code = "unsupported_media_type"
        public static let unavailable: Code = "unavailable"
        /// The request's body had not all arrived by its deadline (408).
        public static let requestTimeout: Code = "request_timeout"
        /// A request with the same `Idempotency-Key` is still being processed (409).
        public static let conflict: Code = "conflict"
        /// The `Idempotency-Key` was already used for a different request (422).
        public static let idempotencyKeyReused: Code = "idempotency_key_reused"
        public static let internalError: Code = "internal"
    }

    public var status: HTTPResponse.Status
    public var code: Code
    public var message: String
    /// Extra headers (`Retry-After`, `Allow`, `WWW-Authenticate`).
    public var headers: HTTPFields
    /// Extra members beside `code` and `message` inside `error` (for example readiness checks).
    public var details: JSONObject

    public init(
        _ status: HTTPResponse.Status, _ code: Code, _ message: String, headers: HTTPFields = [:], details: JSONObject = [:]
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.details = details
    }

    /// The envelope body.
    public var body: JSONValue {
        var error: JSONObject = ["code": .string(code.rawValue), "message": .string(message)]
        for (key, value) in details { error[key] = value }
        return .object(["error": .object(error)])
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = Response.json(body, status: status)
        response.headers.append(contentsOf: headers)
        return response
    }

    // MARK: - Common errors

    public static func invalidRequest(_ message: String) -> APIError { APIError(.badRequest, .invalidRequest, message) }
    public static func invalidJSON(_ message: String) -> APIError { APIError(.badRequest, .invalidJSON, message) }
    public static func notFound(_ message: String) -> APIError { APIError(.notFound, .notFound, message) }
    public static func forbidden(_ message: String) -> APIError { APIError(.forbidden, .forbidden, message) }
    public static func unauthenticated(_ message: String) -> APIError {
        APIError(.unauthorized, .unauthenticated, message, headers: [.wwwAuthenticate: "Bearer"])
    }
    /// 413 with `Connection: close`: the rest of the body is dropped and the connection ended
    /// (``ClosingResponses``).
    public static func bodyTooLarge(limit: Int) -> APIError {
        APIError(
            .contentTooLarge, .bodyTooLarge, "the request body is larger than the limit of \(limit) bytes", headers: [.connection: "close"])
    }
    /// 408 with `Connection: close`: the client's body stopped arriving before the request's
    /// deadline. The connection cannot carry another request (its body was not read to the end).
    public static var requestTimeout: APIError {
        APIError(
            .requestTimeout, .requestTimeout, "the request's body did not arrive within the request's deadline; send it again",
            headers: [.connection: "close"])
    }
    /// 503 with `Retry-After`: the database (or another dependency) cannot be reached.
    public static func unavailable(_ message: String, retryAfterSeconds: Int = 2) -> APIError {
        APIError(.serviceUnavailable, .unavailable, message, headers: [.retryAfter: String(retryAfterSeconds)])
    }
}

extension Response {
    /// A JSON response with deterministic bytes.
    public static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        json(bytes: JSONEncoding.encode(value), status: status, headers: headers)
    }

    /// The `Content-Type` of every JSON answer.
    static let jsonContentType = "application/json; charset=utf-8"

    /// A JSON response from already-encoded bytes.
    public static func json(bytes: [UInt8], status: HTTPResponse.Status = .ok, headers: HTTPFields = [:]) -> Response {
        var headers = headers
        headers[.contentType] = jsonContentType
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
