import Hummingbird

/// Counts and times every request by method, route template (never the raw path, whose
/// values are unbounded) and status.
public struct HTTPMetricsMiddleware: RouterMiddleware {
    public typealias Context = BatonRequestContext

    let metrics: BatonMetrics

    public init(metrics: BatonMetrics) {
        self.metrics = metrics
    }

    static let knownMethods: Set<HTTPRequest.Method> = [.get, .head, .post, .put, .patch, .delete, .options]

    public func handle(
        _ request: Request, context: Context, next: @concurrent (Request, Context) async throws -> Response
    ) async throws -> Response {
        let started = ContinuousClock.now
        let response = try await next(request, context)
        let method = Self.knownMethods.contains(request.method) ? request.method.rawValue : "OTHER"
        metrics.recordRequest(
            method: method, route: context.routeLabel, status: response.status.code,
            duration: ContinuousClock.now - started)
        return response
    }
}

extension BatonRequestContext {
    /// The route template for metrics and logs; `unmatched` for requests no route took.
    var routeLabel: String {
        guard let path = endpointPath, path != "NotFound" else { return "unmatched" }
        return path
    }
}
