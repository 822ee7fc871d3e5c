import BatonPostgres
import Prometheus
import Synchronization

/// Baton's Prometheus metrics: one registry per application (so tests can run several apps in
/// one process), every family declared once with its help text and base unit.
///
/// Label values that come from clients are bucketed before they get here (see
/// `ClientBuckets`), so no request can create an unbounded number of series.
public final class BatonMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private let poolSnapshot = Mutex<PostgresPool.Statistics?>(nil)

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
    }

    /// A family: its name, help text, and label names in order.
    struct Family: Sendable {
        let name: String
        let help: String
    }

    enum Families {
        static let httpRequests = Family(name: "baton_http_requests_total", help: "HTTP requests answered, by method, route template and status code.")
        static let httpDuration = Family(name: "baton_http_request_duration_seconds", help: "Time from request head to response head, by method and route template.")
        static let poolConnections = Family(name: "baton_db_pool_connections", help: "Database connections in the pool, by state (in_use, idle).")
        static let poolWaiters = Family(name: "baton_db_pool_waiters", help: "Requests waiting for a database connection.")
        static let poolMax = Family(name: "baton_db_pool_max_connections", help: "Configured upper bound on database connections.")
        static let poolAcquire = Family(name: "baton_db_pool_acquire_duration_seconds", help: "Time spent waiting to check out a database connection.")
        static let poolOpened = Family(name: "baton_db_pool_connections_opened_total", help: "Database connections opened, replacements included.")
        static let poolDiscarded = Family(name: "baton_db_pool_connections_discarded_total", help: "Database connections found broken and discarded.")
        static let poolTimeouts = Family(name: "baton_db_pool_acquire_timeouts_total", help: "Checkouts that gave up waiting for a free database connection.")
        static let buildInfo = Family(name: "baton_build_info", help: "Always 1; the labels name the running build.")
    }

    static let latencyBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10),
    ]

    // MARK: - HTTP

    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(
            name: Families.httpRequests.name,
            labels: [("method", method), ("route", route), ("status", String(status))], help: Families.httpRequests.help
        ).increment()
        registry.makeDurationHistogram(
            name: Families.httpDuration.name, labels: [("method", method), ("route", route)],
            buckets: Self.latencyBuckets, help: Families.httpDuration.help
        ).record(duration)
    }

    // MARK: - Database pool

    /// A closure for ``PostgresPool``'s acquire observer.
    public var poolAcquireObserver: @Sendable (Duration) -> Void {
        let histogram = registry.makeDurationHistogram(
            name: Families.poolAcquire.name, buckets: Self.latencyBuckets, help: Families.poolAcquire.help)
        return { histogram.record($0) }
    }

    /// Copies the pool's state into gauges (called when `/metrics` is scraped).
    public func updatePool(_ statistics: PostgresPool.Statistics, maxConnections: Int) {
        func gauge(_ family: Family, _ labels: [(String, String)] = []) -> Gauge {
            registry.makeGauge(name: family.name, labels: labels, help: family.help)
        }
        gauge(Families.poolConnections, [("state", "in_use")]).set(to: Double(statistics.inUse))
        gauge(Families.poolConnections, [("state", "idle")]).set(to: Double(statistics.idle))
        gauge(Families.poolWaiters).set(to: Double(statistics.waiters))
        gauge(Families.poolMax).set(to: Double(maxConnections))
        // The pool keeps running totals; counters only move forward, by the difference.
        let previous = poolSnapshot.withLock { snapshot in
            defer { snapshot = statistics }
            return snapshot
        }
        func advance(_ family: Family, _ now: Int, _ before: Int?) {
            let counter = registry.makeCounter(name: family.name, labels: [], help: family.help)
            if now > (before ?? 0) { counter.increment(by: Int64(now - (before ?? 0))) }
        }
        advance(Families.poolOpened, statistics.connectionsOpened, previous?.connectionsOpened)
        advance(Families.poolDiscarded, statistics.connectionsDiscarded, previous?.connectionsDiscarded)
        advance(Families.poolTimeouts, statistics.acquireTimeouts, previous?.acquireTimeouts)
    }

    // MARK: - Build

    /// Publishes `baton_build_info{version,commit} 1`.
    public func recordBuild(version: String, commit: String) {
        registry.makeGauge(
            name: Families.buildInfo.name, labels: [("version", version), ("commit", commit)], help: Families.buildInfo.help
        ).set(to: 1)
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] { registry.emitToBuffer() }
}
