import BatonContract
import BatonFlows
import BatonPostgres
import BatonRuntime
import BatonServices
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
    private let loopSnapshot = Mutex<[String: Duration]>([:])
    private let loadedFlows = Mutex<[Gauge]>([])
    private let releaseGauges = Mutex<[Gauge]>([])
    /// The process's CPU seconds at the last scrape.
    private let processCPU = Mutex<Double>(0)

    /// The daily per-app-version rollup in PostgreSQL, fed alongside the contract counters.
    public let contractHealth: ContractHealthRollup

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), contractHealth: ContractHealthRollup = ContractHealthRollup()) {
        self.registry = registry
        self.contractHealth = contractHealth
        _ = ProcessResources.startTime
    }

    /// A metric family: name parts, base unit and help text.
    typealias Family = MetricNameDescriptor

    enum Families {
        static var httpRequests: Family { Family(namespace: "baton", metricName: "http_requests", unitName: "total", helpText: "HTTP requests answered, by method, route template and status code.") }
        static var httpDuration: Family { Family(namespace: "baton", metricName: "http_request_duration", unitName: "seconds", helpText: "Time from request head to response head, by method and route template.") }
        static var httpRefused: Family { Family(namespace: "baton", metricName: "http_refused", unitName: "total", helpText: "Requests NIO's HTTP parser or Baton's Host check refused, answered 400 invalid_request and closed (usually not in baton_http_requests_total), by reason (head_too_large, invalid_character, content_length, chunk_size, request_line, host, truncated, other).") }
        static var poolConnections: Family { Family(namespace: "baton", metricName: "db_pool", unitName: "connections", helpText: "Database connections in the pool, by state (in_use, idle, connecting: being opened).") }
        static var poolWaiters: Family { Family(namespace: "baton", metricName: "db_pool", unitName: "waiters", helpText: "Requests waiting for a database connection.") }
        static var poolMax: Family { Family(namespace: "baton", metricName: "db_pool_max", unitName: "connections", helpText: "Configured upper bound on database connections.") }
        static var poolAcquire: Family { Family(namespace: "baton", metricName: "db_pool_acquire_duration", unitName: "seconds", helpText: "Time spent waiting to check out a database connection.") }
        static var poolOpened: Family { Family(namespace: "baton", metricName: "db_pool_connections_opened", unitName: "total", helpText: "Database connections opened, replacements included.") }
        static var poolDiscarded: Family { Family(namespace: "baton", metricName: "db_pool_connections_discarded", unitName: "total", helpText: "Database connections found broken and discarded.") }
        static var databaseLoopBusy: Family { Family(namespace: "baton", metricName: "db_loop_busy_seconds", unitName: "total", helpText: "Time each database loop's thread spent working rather than waiting for sockets; a rate near 1 means the loop is saturated.") }
        static var poolConnectFailures: Family { Family(namespace: "baton", metricName: "db_pool_connect_failures", unitName: "total", helpText: "Attempts to open a database connection that failed (refused by the server, or unreachable).") }
        static var poolResting: Family { Family(namespace: "baton", metricName: "db_pool", unitName: "resting", helpText: "Pool places whose connection the server refused while others were open; each waits before trying again (the server allows fewer connections than database.pool.size).") }
        static var poolDeadlineExpiries: Family { Family(namespace: "baton", metricName: "db_pool_deadline_expiries", unitName: "total", helpText: "Database calls whose deadline cut what was in flight (a statement, or a connect the server had not answered); the caller, if any, got 503.") }
        static var poolFailingFast: Family { Family(namespace: "baton", metricName: "db_pool", unitName: "failing_fast", helpText: "1 while the pool answers 503 at once because the database stopped answering (a probe tries it every 0.5 s), else 0.") }
        static var poolFailFastStarts: Family { Family(namespace: "baton", metricName: "db_pool_fail_fast_starts", unitName: "total", helpText: "Times the pool began to fail fast because the database stopped answering.") }
        static var poolTimeouts: Family { Family(namespace: "baton", metricName: "db_pool_acquire_timeouts", unitName: "total", helpText: "Checkouts that gave up waiting for a free database connection.") }
        static var commands: Family { Family(namespace: "baton", metricName: "commands", unitName: "total", helpText: "Commands answered, by flow and outcome (done, refresh, input, screen, error, replayed, stale, invalid).") }
        static var commandDuration: Family { Family(namespace: "baton", metricName: "command_duration", unitName: "seconds", helpText: "Time to answer a command, by flow: payload check, transaction, effects, encoding.") }
        static var sessionsStarted: Family { Family(namespace: "baton", metricName: "flow_sessions_started", unitName: "total", helpText: "Flow sessions started, by flow.") }
        static var sessionsFinished: Family { Family(namespace: "baton", metricName: "flow_sessions_finished", unitName: "total", helpText: "Flow sessions ended, by flow and result (completed, cancelled, expired).") }
        static var componentsRendered: Family { Family(namespace: "baton", metricName: "components_rendered", unitName: "total", helpText: "Components sent to clients, by platform and contract version (the denominator of the fallback hit rate).") }
        static var fallbackHits: Family { Family(namespace: "baton", metricName: "fallback_hits", unitName: "total", helpText: "Components (or actions) replaced by their fallback, by type, fallback, platform and contract version.") }
        static var componentsOmitted: Family { Family(namespace: "baton", metricName: "components_omitted", unitName: "total", helpText: "Components dropped before sending, by type, reason, platform and contract version.") }
        static var clientsUnsupported: Family { Family(namespace: "baton", metricName: "clients_unsupported", unitName: "total", helpText: "Requests from clients below the oldest supported contract version (answered with the update-required screen).") }
        static var screens: Family { Family(namespace: "baton", metricName: "screens", unitName: "total", helpText: "Screens answered (GET /v{N}/screens), by source: rendered (templates rendered, payloads minted, fitted) or held (the screen cache's bytes for the same data and client, with fresh payloads; the loaders ran).") }
        static var deepLinks: Family { Family(namespace: "baton", metricName: "deeplinks", unitName: "total", helpText: "Deep links resolved, by result (allowed, rejected) and reason.") }
        static var flowsLoaded: Family { Family(namespace: "baton", metricName: "flows", unitName: "loaded", helpText: "Always 1 per flow this process serves; hash is the SHA-256 of its definition file (flow_definitions.hash).") }
        static var rateLimited: Family { Family(namespace: "baton", metricName: "rate_limited", unitName: "total", helpText: "Requests refused with 429 because a limit was reached, by limit (scope).") }
        static var releaseInfo: Family { Family(namespace: "baton", metricName: "flows_release", unitName: "info", helpText: "Always 1 for the flows release this process serves (release is the release id, or files); role is current or ramp.") }
        static var reloads: Family { Family(namespace: "baton", metricName: "flows_reloads", unitName: "total", helpText: "Attempts to serve another flows bundle (a release or edited files), by result (ok, failed).") }
        static var serviceCalls: Family { Family(namespace: "baton", metricName: "service_calls", unitName: "total", helpText: "Service calls made by flows, by service and outcome (2xx, 4xx, 5xx, timeout, circuit_open, failed, bad_response, refused), retries included in one call.") }
        static var serviceDuration: Family { Family(namespace: "baton", metricName: "service_call_duration", unitName: "seconds", helpText: "Time of one service call, every attempt and backoff included, by service.") }
        static var circuitOpen: Family { Family(namespace: "baton", metricName: "service_circuit", unitName: "open", helpText: "1 while the service's circuit breaker is open (calls fail fast as circuit_open), else 0; by service.") }
        static var buildInfo: Family { Family(namespace: "baton", metricName: "build", unitName: "info", helpText: "Always 1; the labels name the running build.") }
        // The standard process collector's names (no `baton_` prefix), which generic dashboards read.
        static var processCPU: Family { Family(namespace: "process", metricName: "cpu_seconds", unitName: "total", helpText: "Total user and system CPU time spent in seconds.") }
        static var processResident: Family { Family(namespace: "process", metricName: "resident_memory", unitName: "bytes", helpText: "Resident memory size in bytes.") }
        static var processVirtual: Family { Family(namespace: "process", metricName: "virtual_memory", unitName: "bytes", helpText: "Virtual memory size in bytes.") }
        static var processOpenFDs: Family { Family(namespace: "process", metricName: "open", unitName: "fds", helpText: "Number of open file descriptors (client and database connections included).") }
        static var processMaxFDs: Family { Family(namespace: "process", metricName: "max", unitName: "fds", helpText: "Maximum number of open file descriptors (the soft limit; Baton raises it to the hard limit at start).") }
        static var processStart: Family { Family(namespace: "process", metricName: "start_time", unitName: "seconds", helpText: "Start time of the process since unix epoch in seconds.") }
    }

    static let latencyBuckets: [Duration] = [
        .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500),
        .seconds(5), .seconds(10),
    ]

    // MARK: - HTTP

    private struct RequestSeriesKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    /// Handles per (method, route, status), so the hot path skips the registry's name and
    /// label validation. Bounded: methods, route templates and status codes are finite.
    private let requestSeries = Mutex<[RequestSeriesKey: (Counter, DurationHistogram)]>([:])

    func recordRequest(method: String, route: String, status: Int, duration: Duration) {
        let key = RequestSeriesKey(method: method, route: route, status: status)
        let series = requestSeries.withLock { cache in
            if let series = cache[key] { return series }
            let series = (
                registry.makeCounter(
                    descriptor: Families.httpRequests,
                    labels: [("method", method), ("route", route), ("status", String(status))]),
                registry.makeDurationHistogram(
                    descriptor: Families.httpDuration, labels: [("method", method), ("route", route)],
                    buckets: Self.latencyBuckets)
            )
            cache[key] = series
            return series
        }
        series.0.increment()
        series.1.record(duration)
    }

    /// Counts a request NIO's HTTP parser refused (``MalformedRequestEnvelope``).
    func recordHTTPRefused(_ reason: MalformedRequestEnvelope.Reason) {
        registry.makeCounter(descriptor: Families.httpRefused, labels: [("reason", reason.rawValue)]).increment()
    }

    /// Makes every refusal series exist at zero from the start.
    func prepareHTTPRefusals() {
        for reason in MalformedRequestEnvelope.Reason.allCases {
            _ = registry.makeCounter(descriptor: Families.httpRefused, labels: [("reason", reason.rawValue)])
        }
    }

    // MARK: - Database pool

    /// A closure for ``PostgresPool``'s acquire observer.
    public var poolAcquireObserver: @Sendable (Duration) -> Void {
        let histogram = registry.makeDurationHistogram(descriptor: Families.poolAcquire, buckets: Self.latencyBuckets)
        return { histogram.record($0) }
    }

    /// Copies the pool's state into gauges (called when `/metrics` is scraped).
    public func updatePool(_ statistics: PostgresPool.Statistics, maxConnections: Int) {
        func gauge(_ family: Family, _ labels: [(String, String)] = []) -> Gauge {
            registry.makeGauge(descriptor: family, labels: labels)
        }
        gauge(Families.poolConnections, [("state", "in_use")]).set(to: Double(statistics.inUse))
        gauge(Families.poolConnections, [("state", "idle")]).set(to: Double(statistics.idle))
        gauge(Families.poolConnections, [("state", "connecting")]).set(to: Double(statistics.connecting))
        gauge(Families.poolWaiters).set(to: Double(statistics.waiters))
        gauge(Families.poolMax).set(to: Double(maxConnections))
        gauge(Families.poolResting).set(to: Double(statistics.resting))
        gauge(Families.poolFailingFast).set(to: statistics.isFailingFast ? 1 : 0)
        // The pool keeps running totals; counters only move forward, by the difference.
        let previous = poolSnapshot.withLock { snapshot in
            defer { snapshot = statistics }
            return snapshot
        }
        func advance(_ family: Family, _ now: Int, _ before: Int?) {
            let counter = registry.makeCounter(descriptor: family)
            if now > (before ?? 0) { counter.increment(by: Int64(now - (before ?? 0))) }
        }
        advance(Families.poolOpened, statistics.connectionsOpened, previous?.connectionsOpened)
        advance(Families.poolDiscarded, statistics.connectionsDiscarded, previous?.connectionsDiscarded)
        advance(Families.poolTimeouts, statistics.acquireTimeouts, previous?.acquireTimeouts)
        advance(Families.poolConnectFailures, statistics.connectFailures, previous?.connectFailures)
        advance(Families.poolDeadlineExpiries, statistics.deadlineExpiries, previous?.deadlineExpiries)
        advance(Families.poolFailFastStarts, statistics.failFastStarts, previous?.failFastStarts)
    }

    /// Copies the database loops' working time into counters (called when `/metrics` is
    /// scraped). With `BATON_DB_LOOPS=0` there are none (the event loops drive the connections)
    /// unless a listener runs.
    public func updateDatabaseLoops(_ usage: [PostgresEventLoop.Usage]) {
        let previous = loopSnapshot.withLock { snapshot in
            defer { for loop in usage { snapshot[loop.name] = loop.busy } }
            return snapshot
        }
        for loop in usage {
            let counter = registry.makeCounter(descriptor: Families.databaseLoopBusy, labels: [("loop", loop.name)])
            let added = loop.busy - (previous[loop.name] ?? .zero)
            if added > .zero { counter.increment(by: added.seconds) }
        }
    }

    // MARK: - Flows

    /// The series one flow's commands and sessions move, made through the registry once: a
    /// command then finds all of them with one lookup of its flow's name, where each
    /// ``counter(_:_:)`` call built its label list and its family's name again.
    private struct FlowSeries: Sendable {
        var commands: [CommandOutcome: Counter]
        var duration: DurationHistogram
        var started: Counter
        var finished: [SessionResult: Counter]
    }
    /// Bounded as the registry's own series are: one entry per flow name any release served in
    /// this process's life, plus `unknown` (``FlowRuntime``'s label for a flow not served).
    private let flowSeries = Mutex<[String: FlowSeries]>([:])

    private func series(of flow: String) -> FlowSeries {
        flowSeries.withLock { cache in
            if let series = cache[flow] { return series }
            let series = FlowSeries(
                commands: Dictionary(uniqueKeysWithValues: CommandOutcome.allCases.map {
                    ($0, registry.makeCounter(descriptor: Families.commands, labels: [("flow", flow), ("outcome", $0.rawValue)]))
                }),
                duration: registry.makeDurationHistogram(
                    descriptor: Families.commandDuration, labels: [("flow", flow)], buckets: Self.latencyBuckets),
                started: registry.makeCounter(descriptor: Families.sessionsStarted, labels: [("flow", flow)]),
                finished: Dictionary(uniqueKeysWithValues: SessionResult.allCases.map {
                    ($0, registry.makeCounter(descriptor: Families.sessionsFinished, labels: [("flow", flow), ("result", $0.rawValue)]))
                })
            )
            cache[flow] = series
            return series
        }
    }

    // MARK: - Contract

    /// A family by its name's parts as declared (`name` would join them into a new string on
    /// every lookup), and the label values.
    private struct SeriesKey: Hashable {
        var family: String
        var unit: String?
        var labels: [String]
    }
    private let series = Mutex<[SeriesKey: Counter]>([:])

    /// The counter of one series, made through the registry once and then looked up here: the
    /// registry's own lookup (its lock, the label list compared, the help text checked) is too
    /// dear for counters every command or screen moves.
    private func counter(_ family: Family, _ labels: [(String, String)]) -> Counter {
        let key = SeriesKey(family: family.metricName, unit: family.unitName, labels: labels.map(\.1))
        return series.withLock { cache in
            if let counter = cache[key] { return counter }
            let counter = registry.makeCounter(descriptor: family, labels: labels)
            cache[key] = counter
            return counter
        }
    }

    /// Records one fitted reply (in the counters and the daily rollup).
    public func recordFit(_ report: FitReport, platform: String, contract: String, appVersion: String) {
        contractHealth.record(report, platform: platform, contract: contract, appVersion: appVersion)
        if report.rendered > 0 {
            counter(Families.componentsRendered, [("platform", platform), ("contract", contract)])
                .increment(by: Int64(report.rendered))
        }
        for (hit, count) in report.hitCounts {
            counter(
                Families.fallbackHits,
                [("component", hit.component), ("fallback", hit.fallback), ("platform", platform), ("contract", contract)]
            ).increment(by: Int64(count))
        }
        for (omission, count) in report.omissionCounts {
            counter(
                Families.componentsOmitted,
                [("component", omission.component), ("reason", omission.reason.rawValue), ("platform", platform), ("contract", contract)]
            ).increment(by: Int64(count))
        }
    }

    /// Counts one deep-link decision (labels from the allowlist's bounded reason set).
    public func recordDeepLink(_ dimensions: [(String, String)]) {
        counter(Families.deepLinks, dimensions).increment()
    }

    public func recordUnsupportedClient(platform: String, contract: String, appVersion: String) {
        contractHealth.recordUnsupported(platform: platform, contract: contract, appVersion: appVersion)
        counter(Families.clientsUnsupported, [("platform", platform), ("contract", contract)]).increment()
    }

    /// Publishes `baton_flows_loaded{flow,hash} 1` for exactly the flows in `hashes` (flow name
    /// to definition hash), retracting series of definitions no longer loaded, so a dashboard
    /// shows which rules each replica runs.
    public func recordLoadedFlows(_ hashes: [String: String]) {
        loadedFlows.withLock { published in
            for gauge in published { registry.unregisterGauge(gauge) }
            published = hashes.sorted { $0.key < $1.key }.map { flow, hash in
                let gauge = registry.makeGauge(descriptor: Families.flowsLoaded, labels: [("flow", flow), ("hash", hash)])
                gauge.set(to: 1)
                return gauge
            }
        }
    }

    // MARK: - Limits

    /// Counts a request refused by a rate limit (`scope` is the limit's name, a fixed set).

    public func recordRateLimited(_ scope: String) {
        registry.makeCounter(descriptor: Families.rateLimited, labels: [("scope", scope)]).increment()
    }

    // MARK: - Services

    /// Makes the service series exist at zero from the start (so dashboards and alerts see
    /// every declared service before its first call).
    public func prepare(services: [String]) {
        for service in services {
            registry.makeGauge(descriptor: Families.circuitOpen, labels: [("service", service)]).set(to: 0)
            _ = registry.makeCounter(descriptor: Families.serviceCalls, labels: [("service", service), ("outcome", "2xx")])
            _ = registry.makeDurationHistogram(descriptor: Families.serviceDuration, labels: [("service", service)], buckets: Self.latencyBuckets)
        }
    }

    // MARK: - Releases

    /// Publishes `baton_flows_release_info{release,role} 1` for what is served now (and makes
    /// sure the reload counters exist, at zero, from the start).
    public func recordRelease(_ release: String, ramp: String?) {
        for result in ["ok", "failed"] { _ = registry.makeCounter(descriptor: Families.reloads, labels: [("result", result)]) }
        releaseGauges.withLock { published in
            for gauge in published { registry.unregisterGauge(gauge) }
            let served = [(release, "current")] + (ramp.map { [($0, "ramp")] } ?? [])
            published = served.map { release, role in
                let gauge = registry.makeGauge(descriptor: Families.releaseInfo, labels: [("release", release), ("role", role)])
                gauge.set(to: 1)
                return gauge
            }
        }
    }

    /// Counts an attempt to serve another bundle.
    public func recordReload(ok: Bool) {
        registry.makeCounter(descriptor: Families.reloads, labels: [("result", ok ? "ok" : "failed")]).increment()
    }

    // MARK: - Process

    /// Copies what the process uses into the standard process series (called when `/metrics`
    /// is scraped). CPU time is a counter: it moves by the difference since the last scrape.
    public func updateProcess(_ resources: ProcessResources = .current()) {
        func gauge(_ family: Family) -> Gauge { registry.makeGauge(descriptor: family) }
        let before = processCPU.withLock { last in
            defer { last = max(last, resources.cpuSeconds) }
            return last
        }
        if resources.cpuSeconds > before { registry.makeCounter(descriptor: Families.processCPU).increment(by: resources.cpuSeconds - before) }
        if let resident = resources.residentBytes { gauge(Families.processResident).set(to: resident) }
        if let virtual = resources.virtualBytes { gauge(Families.processVirtual).set(to: virtual) }
        if let open = resources.openFileDescriptors { gauge(Families.processOpenFDs).set(to: Double(open)) }
        if let limit = resources.maxFileDescriptors { gauge(Families.processMaxFDs).set(to: Double(limit)) }
        gauge(Families.processStart).set(to: resources.startTime)
    }

    // MARK: - Build

    /// Publishes `baton_build_info{version,commit} 1`.
    public func recordBuild(version: String, commit: String) {
        registry.makeGauge(descriptor: Families.buildInfo, labels: [("version", version), ("commit", commit)]).set(to: 1)
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] { registry.emitToBuffer() }
}

extension BatonMetrics: RuntimeMetrics {
    public func commandFinished(flow: String, outcome: CommandOutcome, duration: Duration) {
        let series = series(of: flow)
        series.commands[outcome]?.increment()
        series.duration.record(duration)
    }

    public func screenAnswered(held: Bool) {
        counter(Families.screens, [("source", held ? "held" : "rendered")]).increment()
    }

    public func sessionStarted(flow: String) {
        series(of: flow).started.increment()
    }

    public func sessionFinished(flow: String, result: SessionResult) {
        series(of: flow).finished[result]?.increment()
    }

    /// Creates every series a flow will use at zero, so dashboards and rates see them before
    /// the first command.
    public func prepare(flows: [String]) {
        for source in ["rendered", "held"] { _ = registry.makeCounter(descriptor: Families.screens, labels: [("source", source)]) }
        for flow in flows { _ = series(of: flow) }
    }
}

extension BatonMetrics: ServiceMetrics {
    public func callFinished(service: String, outcome: String, duration: Duration) {
        registry.makeCounter(descriptor: Families.serviceCalls, labels: [("service", service), ("outcome", outcome)]).increment()
        registry.makeDurationHistogram(descriptor: Families.serviceDuration, labels: [("service", service)], buckets: Self.latencyBuckets)
            .record(duration)
    }

    public func circuitChanged(service: String, isOpen: Bool) {
        registry.makeGauge(descriptor: Families.circuitOpen, labels: [("service", service)]).set(to: isOpen ? 1 : 0)
    }
}
