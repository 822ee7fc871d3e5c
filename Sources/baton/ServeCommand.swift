import ArgumentParser
import BatonContract
import BatonExecutor
import BatonFlows
import BatonPostgres
import BatonRuntime
import BatonServer
import BatonServices
import Configuration
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus
import Synchronization

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the HTTP server (migrating first unless --no-migrate)."
    )

    @OptionGroup var common: CommonOptions

    @Option(help: "Address to bind (HTTP_HOST, default 127.0.0.1).")
    var host: String?

    @Option(help: "Port to bind (HTTP_PORT, default 8080).")
    var port: Int?

    @Option(help: "Flows directory (BATON_FLOWS_DIR, default Flows).")
    var flowsDir: String?

    @Flag(inversion: .prefixedNo, help: "Apply pending migrations before serving (BATON_MIGRATE, default on).")
    var migrate: Bool?

    @Option(help: "Where flows come from: auto (the current published release once one exists, else the files), files or database (BATON_FLOWS_SOURCE).")
    var flowsSource: String?

    @Flag(help: "Development: reload the flows directory when a file changes; lint gates each reload (BATON_FLOWS_WATCH).")
    var watch = false

    @Flag(help: "Development machine: allow the public development JWT secret and signing key on a non-loopback --host (BATON_DEV).")
    var dev = false

    func run() async throws {
        var extra: [AbsoluteConfigKey: ConfigValue] = [:]
        if let host { extra["http.host"] = ConfigValue(.string(host), isSecret: false) }
        if let port { extra["http.port"] = ConfigValue(.int(port), isSecret: false) }
        if let flowsDir { extra["baton.flows.dir"] = ConfigValue(.string(flowsDir), isSecret: false) }
        if let migrate { extra["baton.migrate"] = ConfigValue(.bool(migrate), isSecret: false) }
        if let flowsSource { extra["baton.flows.source"] = ConfigValue(.string(flowsSource), isSecret: false) }
        if watch { extra["baton.flows.watch"] = ConfigValue(.bool(true), isSecret: false) }
        if dev { extra["baton.dev"] = ConfigValue(.bool(true), isSecret: false) }
        var configuration: BatonConfiguration
        do {
            configuration = try await common.loadConfiguration(extra: extra)
            // Before anything starts: a refused configuration leaves no cluster running.
            try DevelopmentSecrets.check(configuration)
        } catch { fail("\(error)") }
        let logger = bootstrapLogging(configuration)
        if let raised = ProcessResources.raiseFileDescriptorLimit() {
            logger.info(
                "open file limit raised",
                metadata: ["from": .stringConvertible(raised.from), "to": .stringConvertible(raised.to)])
        }

        let metrics = BatonMetrics()
        let buckets = ClientBuckets()
        // Libraries that report through swift-metrics land in the same registry.
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics.registry))

        let database: Database
        do { database = try Database.open(configuration, logger: logger) } catch { fail(error) }
        let refusals = RefusedConnections(logger: logger)
        let pool = PostgresPool(
            configuration: configuration.poolConfiguration(conninfo: database.conninfo), acquireObserver: metrics.poolAcquireObserver,
            restObserver: { refusals.record($0) })
        let migrator: Migrator
        do {
            migrator = try Migrator(directory: URL(fileURLWithPath: configuration.migrationsDirectory))
            if configuration.migrateOnStart {
                let applied = try await migrator.migrate(on: pool) { logger.info("\($0)") }
                logger.info("migrations current", metadata: ["applied_now": .stringConvertible(applied.count)])
            }
            await warnIfPoolExceedsServer(pool, logger: logger)
        } catch {
            await pool.close()
            try? database.embedded?.stop()
            fail(error)
        }

        // Flows: loaded and linted before anything listens; a broken flow stops the start.
        let registry = applicationRegistry()
        let definitions = FlowDefinitions.load(
            directory: URL(fileURLWithPath: configuration.flowsDirectory).standardizedFileURL, catalog: registry.catalog)
        let bundle = definitions.bundle
        for diagnostic in definitions.diagnostics where diagnostic.severity == .warning {
            logger.warning("flow lint", metadata: ["diagnostic": .string(diagnostic.description)])
        }
        guard definitions.isServable, let fitter = definitions.fitter(metrics: metrics, buckets: buckets, logger: logger) else {
            await pool.close()
            try? database.embedded?.stop()
            let errors = definitions.diagnostics.filter { $0.severity == .error }
            fail("the flows in \(configuration.flowsDirectory) have \(errors.count) error(s); not starting:\n" + errors.map(\.description).joined(separator: "\n"))
        }
        // Services: each declared one needs its address. In development the demo tracking API
        // stands in for an unconfigured `tracking`.
        if configuration.development, bundle.services["tracking"] != nil, configuration.serviceSetting("baton.service.tracking.url") == nil {
            configuration.demoTracking = true
            let configured = configuration.serviceSetting
            let demo = DemoTrackingController.url(host: configuration.httpHost, port: configuration.httpPort)
            configuration.serviceSetting = { key in key == "baton.service.tracking.url" ? demo : configured(key) }
            logger.notice("serving the demo tracking API for the tracking service", metadata: ["url": .string(demo)])
        }
        let serviceClient = ServiceClient(settings: configuration.serviceSetting, metrics: metrics, logger: logger)
        for service in bundle.services.values.sorted(by: { $0.name < $1.name }) {
            do { _ = try serviceClient.endpoint(for: service) } catch {
                // Not fatal: flows that call it answer their `unavailable` outcome until it is set.
                logger.error("service not configured; its calls will fail", metadata: ["problem": .string(error.description)])
            }
        }
        let runtime: FlowRuntime
        let authenticator: BearerAuthenticator
        do {
            let signer = try signingKeys(configuration, embedded: database.embedded != nil, logger: logger)
            authenticator = try await BearerAuthenticator(
                hs256Secret: configuration.jwtHS256Secret, publicKeys: configuration.jwtPublicKeys,
                issuer: configuration.jwtIssuer, audience: configuration.jwtAudience, leeway: configuration.jwtLeeway,
                maxLifetime: configuration.jwtMaxLifetime)
            let development = DevelopmentSecrets.inUse(configuration)
            if !development.isEmpty, database.embedded == nil || !DevelopmentSecrets.loopbackHosts.contains(configuration.httpHost) {
                // Allowed here by --dev or a loopback address, but still public (`baton token`
                // mints with the JWT secret): say so loudly where it could matter.
                logger.critical(
                    "\(development.joined(separator: " and ")): public development value(s): anyone who can reach this server can sign in as any user; set secrets of your own (docs/operations.md)"
                )
            }
            if !authenticator.isConfigured {
                logger.warning("no bearer-token keys configured (BATON_JWT_HS256_SECRET / BATON_JWT_PUBLIC_KEYS): only device flows work")
            }
            runtime = FlowRuntime(
                bundle: bundle, registry: registry, pool: pool, signer: signer, fitter: fitter, metrics: metrics, logger: logger,
                services: serviceClient, callWait: configuration.serviceCallWait, callBudget: configuration.serviceCallBudget,
                screenCacheBytes: configuration.screenCacheBytes)
            try await runtime.publishDefinitions()
        } catch {
            await pool.close()
            try? database.embedded?.stop()
            fail(error)
        }
        logger.info("flows loaded", metadata: ["flows": .string(bundle.flows.keys.sorted().joined(separator: ","))])

        let (host, port) = (configuration.httpHost, configuration.httpPort)
        let app = buildApplication(
            BatonEnvironment(
                configuration: configuration, pool: pool, migrator: migrator, metrics: metrics, logger: logger,
                services: [DatabaseService(pool: pool, embedded: database.embedded, logger: logger)],
                runtime: runtime, authenticator: authenticator, contract: definitions.contract, allowlist: definitions.allowlist,
                buckets: buckets, flowCatalog: registry.catalog)
        ) { _ in
            // Once bound: a port another process holds must not be logged as listened on.
            logger.info(
                "listening",
                metadata: [
                    "address": .string("http://\(host):\(port)"),
                    "executor": .string(EventLoopGlobalExecutor.mode.rawValue),
                ])
        }
        do {
            try await app.runService()
        } catch {
            // The services (the embedded cluster among them) have stopped by now.
            if let message = ListenFailure.describe(error, host: host, port: port) { fail(message) }
            throw error
        }
    }
}

/// The payload signing keys: `BATON_SIGNING_KEYS`, or — for the embedded development
/// database only — a key generated once and kept in the data directory.
func signingKeys(_ configuration: BatonConfiguration, embedded: Bool, logger: Logger) throws -> PayloadSigner {
    if let keys = configuration.signingKeys, !keys.isEmpty { return try PayloadSigner(configuration: keys) }
    guard embedded else {
        throw PayloadSigner.KeyError(
            description: "BATON_SIGNING_KEYS is required with DATABASE_URL: every replica must sign and verify with the same keys (see docs/operations.md)")
    }
    let file = URL(fileURLWithPath: configuration.dataDirectory).appendingPathComponent("signing-key")
    if let text = try? String(contentsOf: file, encoding: .utf8) {
        return try PayloadSigner(configuration: text.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    var bytes = [UInt8](repeating: 0, count: 32)
    var generator = SystemRandomNumberGenerator()
    for index in bytes.indices { bytes[index] = UInt8.random(in: .min ... .max, using: &generator) }
    let line = "local:" + Data(bytes).base64EncodedString()
    try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
    guard FileManager.default.createFile(atPath: file.path, contents: Data(line.utf8), attributes: [.posixPermissions: 0o600]) else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
    }
    logger.notice("generated a development signing key", metadata: ["file": .string(file.path)])
    return try PayloadSigner(configuration: line)
}

/// Says at start when the pool may ask for more connections than the server lets its role
/// hold: the connections past that are refused ("too many clients already"), and the pool then
/// serves on those it got (its other places rest and are tried again now and then).
/// A check only: when the limits cannot be read, the start goes on.
private func warnIfPoolExceedsServer(_ pool: PostgresPool, logger: Logger) async {
    let allowance: ConnectionAllowance
    do {
        allowance = try await pool.withConnection { try await ConnectionAllowance.read(on: $0) }
    } catch {
        logger.debug("could not read the database's connection limits", metadata: ["error": "\(error)"])
        return
    }
    let size = pool.configuration.maxConnections
    guard allowance.allowed < size else { return }
    logger.warning(
        "the database allows fewer connections than the pool's size; the pool will serve on those it gets",
        metadata: [
            "pool_size": .stringConvertible(size), "allowed": .stringConvertible(allowance.allowed), "limit": .string(allowance.limit),
            "fix": "lower database.pool.size (DATABASE_POOL_SIZE), or raise the limit; replicas × pool size must fit as well",
        ])
}

/// Logs the connections the pool could not open while it had others (it serves on those, so
/// no request fails and the error middleware says nothing): the first at once, then at most a
/// line every 10 s with how many there were since.
private final class RefusedConnections: Sendable {
    private let logger: Logger
    private let state = Mutex<(lastLine: ContinuousClock.Instant?, unsaid: Int)>((nil, 0))
    static let interval = Duration.seconds(10)

    init(logger: Logger) { self.logger = logger }

    func record(_ error: PostgresError) {
        let count = state.withLock { state -> Int? in
            state.unsaid += 1
            let now = ContinuousClock.now
            if let last = state.lastLine, now - last < Self.interval { return nil }
            defer { state = (now, 0) }
            return state.unsaid
        }
        guard let count else { return }
        logger.warning(
            "a database connection could not be opened; serving on the open ones",
            metadata: ["reason": .string(String(error.message.prefix(500))), "failures": .stringConvertible(count)])
    }
}
