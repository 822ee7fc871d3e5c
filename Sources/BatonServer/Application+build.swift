import BatonContract
import BatonDeepLinks
import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import Hummingbird
import NIOCore
import Logging
import ServiceLifecycle

/// What the HTTP layer needs to serve requests; built by `baton serve` or by tests.
public struct BatonEnvironment: Sendable {
    public var configuration: BatonConfiguration
    public var pool: PostgresPool
    public var migrator: Migrator
    public var metrics: BatonMetrics
    public var logger: Logger
    /// Services that must outlive the HTTP server (stopped after it drains).
    public var services: [any Service]
    /// Runs flows; nil serves only the operational endpoints.
    public var runtime: FlowRuntime?
    /// Verifies bearer tokens.
    public var authenticator: BearerAuthenticator
    /// The component contract (with a runtime: the screens endpoint and the downgrade pass).
    public var contract: ContractRegistry?
    /// The deep-link allowlist (with a runtime: `/deeplinks/resolve`).
    public var allowlist: DeepLinkAllowlist?
    /// Buckets client labels for metrics (shared with the contract fitter).
    public let buckets: ClientBuckets
    /// The application's loaders, guards and effects, for linting the flow files again
    /// (Baton Studio's lint view); nil: the studio shows the lint of the loaded bundle.
    public var flowCatalog: FlowCatalog?
    /// Every route the application registers (filled by ``buildApplication(_:)``).
    public let routes = RouteCatalog()
    /// The contract and allowlist served, swapped with the runtime's flows by a release.
    public let live: LiveDefinitions?

    public init(
        configuration: BatonConfiguration, pool: PostgresPool, migrator: Migrator, metrics: BatonMetrics, logger: Logger,
        services: [any Service] = [], runtime: FlowRuntime? = nil, authenticator: BearerAuthenticator,
        contract: ContractRegistry? = nil, allowlist: DeepLinkAllowlist? = nil, buckets: ClientBuckets = ClientBuckets(),
        flowCatalog: FlowCatalog? = nil
    ) {
        self.flowCatalog = flowCatalog
        self.allowlist = allowlist
        self.contract = contract
        self.live = contract.map { LiveDefinitions(contract: $0, allowlist: allowlist) }
        self.buckets = buckets
        self.runtime = runtime
        self.authenticator = authenticator
        self.configuration = configuration
        self.pool = pool
        self.migrator = migrator
        self.metrics = metrics
        self.logger = logger
        self.services = services
    }
}

/// Baton's version, reported by `/openapi.json`, `baton --version` and `baton_build_info`.
public enum BatonVersion {
    public static let current = "0.1.0"
}

/// Builds the HTTP application: middleware, routes, services. `onServerRunning` is called once
/// the server listens, with its channel (whose `localAddress` is the address bound).
public func buildApplication(
    _ environment: BatonEnvironment, onServerRunning: @escaping @Sendable (any Channel) async -> Void = { _ in }
) -> some ApplicationProtocol {
    // Every GET route answers HEAD too (RFC 9110 §9.1: load balancers' health checks and `curl
    // -I` send it): the GET's handler runs and its headers, Content-Length included, go out
    // without the body.
    let router = Router(context: BatonRequestContext.self, options: .autoGenerateHeadEndpoints)
    let catalog = environment.routes
    // Outermost first: every response carries a request id, is counted, and errors become
    // envelopes before they are counted.
    router.add(middleware: RequestIDMiddleware())
    router.add(middleware: HTTPMetricsMiddleware(metrics: environment.metrics))
    router.add(middleware: AccessLogMiddleware())
    router.add(middleware: ErrorMiddleware(routes: catalog, metrics: environment.metrics, bodyLimit: environment.configuration.bodyLimit))
    router.add(middleware: RequestDeadlineMiddleware(timeout: environment.configuration.requestTimeout))
    if let runtime = environment.runtime {
        router.add(middleware: DeviceTokenMiddleware(signer: runtime.signer, pool: environment.pool))
    }
    router.add(middleware: BodyLimitMiddleware(limit: environment.configuration.bodyLimit))

    let flowsInfo: [@Sendable () -> (String, JSONValue)] = environment.live.map { live in [{ ("flows", live.readiness) }] } ?? []
    HealthController(pool: environment.pool, migrator: environment.migrator, details: flowsInfo).register(on: router, catalog: catalog)
    MetricsController(metrics: environment.metrics, pool: environment.pool).register(on: router, catalog: catalog)
    var contributions: [OpenAPIContribution] = []
    if environment.runtime != nil, environment.contract != nil {
        contributions.append(OpenAPIDocument.commands)
        contributions.append(OpenAPIDocument.screens(environment.contract!))
        if environment.allowlist != nil { contributions.append(OpenAPIDocument.deepLinks) }
    }
    if environment.configuration.diagnostics { contributions.append(OpenAPIDocument.diagnostics) }
    let openAPI = JSONEncoding.encode(OpenAPIDocument.make(version: BatonVersion.current, extensions: contributions))
    router.on(.get, "/openapi.json", catalog: catalog) { _, _ in
        Response.json(bytes: openAPI, headers: [.cacheControl: "public, max-age=300"])
    }
    var services = environment.services
    var watcher: ReleaseWatcher?
    if let runtime = environment.runtime, let live = environment.live {
        let screens = ScreenController(
            runtime: runtime, authenticator: environment.authenticator, live: live, metrics: environment.metrics,
            buckets: environment.buckets)
        screens.register(on: router, catalog: catalog)
        CommandController(runtime: runtime, authenticator: environment.authenticator, screens: screens).register(on: router, catalog: catalog)
        if environment.allowlist != nil {
            DeepLinkController(
                runtime: runtime, authenticator: environment.authenticator, live: live, screens: screens,
                metrics: environment.metrics
            ).register(on: router, catalog: catalog)
        }
        if environment.configuration.studio != .off {
            StudioController(environment: environment, runtime: runtime, live: live).register(on: router, logger: environment.logger)
        }
        environment.metrics.prepare(flows: runtime.bundle.flows.keys.sorted())
        environment.metrics.prepare(services: runtime.bundle.services.keys.sorted())
        environment.metrics.recordLoadedFlows(runtime.bundle.flows.mapValues(\.hash))
        services.append(SessionExpiryService(runtime: runtime, interval: .seconds(60), logger: environment.logger))
        services.append(
            ContractHealthService(
                rollup: environment.metrics.contractHealth, pool: environment.pool,
                interval: environment.configuration.contractHealthInterval, logger: environment.logger))
        if environment.configuration.flowsSource != .files || environment.configuration.watchFlows {
            let releases = ReleaseWatcher(
                .init(
                    runtime: runtime, live: live, pool: environment.pool, metrics: environment.metrics, buckets: environment.buckets,
                    logger: environment.logger, configuration: environment.configuration))
            services.append(releases)
            watcher = releases
        }
        environment.metrics.recordRelease(runtime.release.id, ramp: nil)
    }
    if environment.configuration.diagnostics {
        DiagnosticsController(pool: environment.pool).register(on: router, catalog: catalog)
    }
    if environment.configuration.demoTracking {
        DemoTrackingController(pool: environment.pool).register(on: router, catalog: catalog)
    }
    environment.metrics.recordBuild(version: BatonVersion.current, commit: BuildInfo.commit)
    environment.metrics.prepareHTTPRefusals()

    var application = Application(
        router: router,
        // A request NIO cannot parse gets the error envelope too (MalformedRequestEnvelope); a
        // request that does not keep its connection says `Connection: close` in one spelling
        // (ConnectionPersistence, in BatonHTTP1Channel), and its answer says so too and ends
        // the connection, as does any response that says `Connection: close`
        // (ClosingResponses); `Expect: 100-continue` is answered (ExpectContinue); an idle
        // connection is closed after `http.idle.timeout` (BatonConfiguration says when).
        server: .batonHTTP1(
            configuration: .init(
                additionalChannelHandlers: [
                    MalformedRequestEnvelope(metrics: environment.metrics),
                    ClosingResponses(writeTimeout: TimeAmount(environment.configuration.idleTimeout)),
                ],
                idleTimeout: TimeAmount(environment.configuration.idleTimeout)),
            bodyLimit: environment.configuration.bodyLimit),
        configuration: .init(
            address: .hostname(environment.configuration.httpHost, port: environment.configuration.httpPort),
            serverName: "Baton"),
        services: services,
        onServerRunning: onServerRunning,
        logger: environment.logger)
    if let watcher {
        // The current release is served from the first request on, not from `Flows/` on disk
        // until the watcher's first check has run beside the listening server.
        application.beforeServerStarts { await watcher.firstCheck() }
    }
    return application
}
