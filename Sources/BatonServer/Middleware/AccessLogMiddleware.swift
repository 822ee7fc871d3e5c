import Hummingbird
import Logging

/// One log line per request: method, route template, status, duration. Never the query string,
/// headers or body — they can carry tokens and user input.
public struct AccessLogMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    public init() {}

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        let level: Logger.Level = response.status.code >= 500 ? .error : .info
        if context.logger.logLevel <= level {
            let elapsed = ContinuousClock.now - started
            let micros = elapsed.components.seconds * 1_000_000 + elapsed.components.attoseconds / 1_000_000_000_000
            context.logger.log(
                level: level, "request",
                metadata: [
                    "method": .string(request.method.rawValue),
                    "route": .string(context.routeLabel),
                    "status": .stringConvertible(response.status.code),
                    "duration_us": .stringConvertible(micros),
                ])
        }
        return response
    }
}
