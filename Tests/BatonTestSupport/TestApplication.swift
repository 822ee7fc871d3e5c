import BatonPostgres
import BatonServer
import Configuration
import Foundation
import Logging

/// Builds Baton environments for HTTP tests: a fresh migrated database, an own metrics
/// registry, quiet logs.
public enum TestApplication {
    /// Configuration defaults with test-friendly overrides applied by `configure`.
    public static func configuration(_ configure: (inout BatonConfiguration) -> Void = { _ in }) throws -> BatonConfiguration {
        var configuration = try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: [:])))
        configuration.diagnostics = true
        configuration.flowsDirectory = TestDatabase.repositoryRoot.appendingPathComponent("Flows").path
        configuration.migrationsDirectory = TestDatabase.migrationsDirectory.path
        configure(&configuration)
        return configuration
    }

    /// An environment on a fresh database with every migration applied (or on `conninfo`).
    public static func environment(
        conninfo: String? = nil, migrator: Migrator? = nil, poolSize: Int = 4,
        configure: (inout BatonConfiguration) -> Void = { _ in }
    ) async throws -> BatonEnvironment {
        let configuration = try configuration(configure)
        let metrics = BatonMetrics()
        let target: String
        if let conninfo { target = conninfo } else { target = try await TestDatabase.make(migrated: true) }
        let pool = PostgresPool(
            configuration: .init(conninfo: target, maxConnections: poolSize, acquireTimeout: .seconds(5)),
            acquireObserver: metrics.poolAcquireObserver)
        var logger = Logger(label: "baton-test")
        logger.logLevel = ProcessInfo.processInfo.environment["BATON_TEST_LOG"] != nil ? .debug : .critical
        return BatonEnvironment(
            configuration: configuration, pool: pool,
            migrator: try migrator ?? Migrator(directory: TestDatabase.migrationsDirectory),
            metrics: metrics, logger: logger,
            services: [DatabaseService(pool: pool, embedded: nil, logger: logger)])
    }
}
