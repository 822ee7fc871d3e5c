import BatonFlows
import BatonPostgres
import BatonRuntime
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Turns every failure into the JSON error envelope, so clients never see an HTML page, an
/// empty 500 or a stack trace: router misses become 404 (or 405 with `Allow` when the path
/// exists for other methods), unreachable databases 503 with `Retry-After`, and anything
/// unexpected a logged 500 `internal`. The one failure it lets through is a body the HTTP
/// parser refuses, which Hummingbird answers (see ``MalformedRequestEnvelope``).
public struct ErrorMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let routes: RouteCatalog
    let metrics: BatonMetrics?
    /// The configured body limit, for a 413 this middleware words (it runs outside
    /// ``BodyLimitMiddleware``, which sets the request context's).
    let bodyLimit: Int

    public init(routes: RouteCatalog, metrics: BatonMetrics? = nil, bodyLimit: Int = 64 * 1024) {
        self.routes = routes
        self.metrics = metrics
        self.bodyLimit = bodyLimit
    }

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            let response = try await next(request, context)
            return response
        } catch let error as HTTPParserError {
            // The body turned out not to be valid HTTP: Hummingbird answers 400 and closes the
            // connection, whose input it can no longer read (MalformedRequestEnvelope adds the
            // envelope). An answer here would leave the client a second, unasked-for one.
            throw error
        } catch {
            let apiError = translate(error, request: request, context: context)
            return try apiError.response(from: request, context: context)
        }
    }

    func translate(_ error: any Error, request: Request, context: Context) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as CommandError:
            if error.kind == .rateLimited { metrics?.recordRateLimited(error.limit?.name ?? "other") }
            return APIError(commandError: error)
        case let error as PostgresError where error.code == .invalidParameter:
            // A value PostgreSQL text cannot hold (U+0000), refused before its statement was
            // sent (the transaction rolls back). The request's, as a rule: where request values
            // enter, U+0000 is refused by name; this is the last line behind those. Logged, in
            // case the value came from elsewhere (a service's answer).
            context.logger.notice("a statement's text parameter held U+0000; answered 400", metadata: ["error": .string(error.message)])
            return .invalidRequest("a value in the request contains U+0000, which cannot be stored")
        case let error as PostgresError where error.isUnavailable:
            // libpq's own words say why ("too many clients already", "password authentication
            // failed", "Connection refused"); the client hears only that it may try again.
            context.logger.warning(
                "database unavailable",
                metadata: ["error": "\(error.code)", "sqlstate": .string(error.sqlState ?? ""), "reason": .string(String(error.message.prefix(500)))])
            return .unavailable("the database is unreachable; try again shortly")
        case let error as HTTPError:
            switch error.status {
            case .notFound:
                let allowed = routes.methods(forPath: request.uri.path)
                if !allowed.isEmpty, !allowed.contains(request.method) {
                    let allow = allowed.map(\.rawValue).sorted().joined(separator: ", ")
                    return APIError(
                        .methodNotAllowed, .methodNotAllowed, "\(request.method.rawValue) is not allowed here; use \(allow)",
                        headers: [.allow: allow])
                }
                return .notFound("no such endpoint: \(request.method.rawValue) \(request.uri.path.prefix(200))")
            case .contentTooLarge:
                // Hummingbird's own limit, where it decoded the body itself.
                return .bodyTooLarge(limit: bodyLimit)
            case .badRequest:
                return .invalidRequest(error.body ?? "bad request")
            case .unsupportedMediaType:
                return APIError(.unsupportedMediaType, .unsupportedMediaType, error.body ?? "unsupported media type")
            default:
                let code: APIError.Code = error.status.code >= 500 ? .internalError : .invalidRequest
                return APIError(error.status, code, error.body ?? error.status.reasonPhrase)
            }
        case is NIOTooManyBytesError:
            // A body collected past its limit without ``Request/collectBody(limit:)``.
            return .bodyTooLarge(limit: bodyLimit)
        case is CancellationError, is BodyReadCancelled:
            return .unavailable("the request was cancelled")
        default:
            // The type and, for the database, the SQLSTATE and constraint: never the message,
            // detail or description, which can carry row values or the user's input.
            var metadata: Logger.Metadata = ["error": .string(String(reflecting: type(of: error)))]
            if let error = error as? PostgresError {
                metadata["code"] = .string(error.code.description)
                metadata["sqlstate"] = .string(error.sqlState ?? "")
                metadata["constraint"] = .string(error.constraint ?? "")
            }
            if let error = error as? FlowEngineError { metadata["kind"] = .string("\(error.kind)") }
            context.logger.error("unhandled error", metadata: metadata)
            return APIError(.internalServerError, .internalError, "an internal error occurred; the request id identifies it in the logs")
        }
    }
}

/// The routes the application registered, so a miss can be told apart as 404 or 405.
public final class RouteCatalog: Sendable {
    private let entries = Mutex<[(method: HTTPRequest.Method, segments: [Substring])]>([])

    public init() {}

    /// Records a route (Hummingbird path syntax: `:name` segments are parameters).
    public func add(_ method: HTTPRequest.Method, _ path: String) {
        entries.withLock { $0.append((method, path.split(separator: "/"))) }
    }

    /// Every registered (method, path template) pair.
    public var all: [(method: HTTPRequest.Method, path: String)] {
        entries.withLock { $0.map { ($0.method, "/" + $0.segments.joined(separator: "/")) } }
    }

    /// The methods a concrete path answers: those registered for it, and HEAD wherever GET is
    /// (the router answers it with the GET's handler).
    public func methods(forPath path: String) -> Set<HTTPRequest.Method> {
        let parts = path.split(separator: "/")
        var methods = Set<HTTPRequest.Method>()
        for entry in entries.withLock({ $0 }) where entry.segments.count == parts.count {
            if zip(entry.segments, parts).allSatisfy({ $0.hasPrefix(":") || $0 == $1 }) { methods.insert(entry.method) }
        }
        if methods.contains(.get) { methods.insert(.head) }
        return methods
    }
}

extension Router where Context == BatonRequestContext {
    /// Registers a route and records it in `catalog`.
    @discardableResult
    public func on(
        _ method: HTTPRequest.Method, _ path: String, catalog: RouteCatalog,
        use handler: @escaping @Sendable (Request, Context) async throws -> Response
    ) -> Self {
        catalog.add(method, path)
        return on(RouterPath(path), method: method, use: handler)
    }
}

extension APIError {
    /// The HTTP error for a command, screen or deep link the runtime refused.
    init(commandError error: CommandError) {
        let (status, code) = error.wire
        var headers: HTTPFields = [:]
        switch error.kind {
        case .unauthenticated: headers[.wwwAuthenticate] = "Bearer"
        case .inFlight: headers[.retryAfter] = String(max(1, error.retryAfter ?? 1))
        case .rateLimited:
            // IETF httpapi RateLimit header fields: the policy reached, and when it resets.
            let wait = max(1, error.retryAfter ?? 1)
            headers[.retryAfter] = String(wait)
            if let limit = error.limit {
                headers[HTTPField.Name("RateLimit-Policy")!] = "\"\(limit.name)\";q=\(limit.quota);w=\(limit.window)"
                headers[HTTPField.Name("RateLimit")!] = "\"\(limit.name)\";r=0;t=\(wait)"
            }
        default: break
        }
        self = APIError(HTTPResponse.Status(code: status), Code(rawValue: code), error.message, headers: headers)
    }
}
