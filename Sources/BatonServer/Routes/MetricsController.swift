import BatonPostgres
import Hummingbird

/// `GET /metrics`: the Prometheus text exposition.
struct MetricsController: Sendable {
    let metrics: BatonMetrics
    let pool: PostgresPool

    func register(on router: Router<BatonRequestContext>, catalog: RouteCatalog) {
        router.on(.get, "/metrics", catalog: catalog) { _, _ in
            metrics.updatePool(pool.statistics, maxConnections: pool.configuration.maxConnections)
            metrics.updateDatabaseLoops(PostgresEventLoop.usage)
            metrics.updateProcess()
            return Response(
                status: .ok,
                headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.render())))
        }
    }
}
