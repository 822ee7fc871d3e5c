import ArgumentParser
import BatonPostgres
import BatonServer
import Configuration
import Foundation
import Hummingbird
import Logging
import Metrics
import Prometheus

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

    func run() async throws {
        var extra: [AbsoluteConfigKey: ConfigValue] = [:]
        if let host { extra["http.host"] = ConfigValue(.string(host), isSecret: false) }
        if let port { extra["http.port"] = ConfigValue(.int(port), isSecret: false) }
        if let flowsDir { extra["baton.flows.dir"] = ConfigValue(.string(flowsDir), isSecret: false) }
        if let migrate { extra["baton.migrate"] = ConfigValue(.bool(migrate), isSecret: false) }
        let configuration: BatonConfiguration
        do { configuration = try await common.loadConfiguration(extra: extra) } catch { fail("\(error)") }
        let logger = bootstrapLogging(configuration)

        let metrics = BatonMetrics()
        // Libraries that report through swift-metrics land in the same registry.
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics.registry))

        let database: Database
        do { database = try Database.open(configuration, logger: logger) } catch { fail("\(error)") }
        let pool = PostgresPool(
            configuration: .init(
                conninfo: database.conninfo, maxConnections: configuration.poolSize, acquireTimeout: configuration.poolTimeout),
            acquireObserver: metrics.poolAcquireObserver)
        let migrator: Migrator
        do {
            migrator = try Migrator(directory: URL(fileURLWithPath: configuration.migrationsDirectory))
            if configuration.migrateOnStart {
                let applied = try await migrator.migrate(on: pool) { logger.info("\($0)") }
                logger.info("migrations current", metadata: ["applied_now": .stringConvertible(applied.count)])
            }
        } catch {
            await pool.close()
            try? database.embedded?.stop()
            fail("\(error)")
        }

        let app = buildApplication(
            BatonEnvironment(
                configuration: configuration, pool: pool, migrator: migrator, metrics: metrics, logger: logger,
                services: [DatabaseService(pool: pool, embedded: database.embedded, logger: logger)]))
        logger.info(
            "listening",
            metadata: ["address": .string("http://\(configuration.httpHost):\(configuration.httpPort)")])
        try await app.runService()
    }
}
