import ArgumentParser
import BatonPostgres
import BatonServer
import Configuration
import Foundation
import Logging

/// Options every database-using command shares. Each one overrides its environment variable
/// and the config file; unset options fall through to them.
struct CommonOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "A YAML or JSON config file (keys as in docs/operations.md).")
    var configFile: String?

    @Option(help: "libpq URI or conninfo (DATABASE_URL). Unset: an embedded cluster under --data-dir.")
    var databaseURL: String?

    @Option(help: "Where the embedded cluster lives (BATON_DATA_DIR, default .baton).")
    var dataDir: String?

    @Option(help: "Migrations directory (BATON_MIGRATIONS_DIR; default: ./Migrations, else found beside the install or in the package).")
    var migrationsDir: String?

    @Option(help: "trace, debug, info, notice, warning, error, critical (LOG_LEVEL).")
    var logLevel: String?

    @Option(help: "json or logfmt (LOG_FORMAT).")
    var logFormat: String?

    /// Flag values as configuration keys, for the front of the provider chain.
    var flagValues: [AbsoluteConfigKey: ConfigValue] {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        func set(_ key: String, _ value: String?, secret: Bool = false) {
            guard let value else { return }
            values[AbsoluteConfigKey(key.split(separator: ".").map(String.init))] = ConfigValue(.string(value), isSecret: secret)
        }
        set("database.url", databaseURL, secret: true)
        set("baton.data.dir", dataDir)
        set("baton.migrations.dir", migrationsDir)
        set("log.level", logLevel)
        set("log.format", logFormat)
        return values
    }

    func loadConfiguration(extra: [AbsoluteConfigKey: ConfigValue] = [:]) async throws -> BatonConfiguration {
        let reader = try await BatonConfiguration.reader(
            flags: flagValues.merging(extra) { $1 },
            configFile: configFile ?? ProcessInfo.processInfo.environment["BATON_CONFIG_FILE"])
        return try BatonConfiguration(reader: reader)
    }
}

/// The database a command runs against: the configured server, or the embedded cluster.
struct Database {
    let conninfo: String
    let embedded: EmbeddedPostgres?

    static func open(_ configuration: BatonConfiguration, logger: Logger) throws -> Database {
        if let url = configuration.databaseURL {
            logger.info("using the configured database", metadata: ["database": .string(Conninfo.redacted(url))])
            return Database(conninfo: url, embedded: nil)
        }
        let directory = URL(fileURLWithPath: configuration.dataDirectory).appendingPathComponent("postgres")
        let cluster = EmbeddedPostgres(configuration: .init(directory: directory.standardizedFileURL))
        let conninfo = try cluster.start { logger.info("\($0)") }
        return Database(conninfo: conninfo, embedded: cluster)
    }

    /// How long a command's statements may take.
    enum Work {
        /// Migrations, seeding, reports: work that may legitimately run long, with no server-side
        /// statement or lock timeout and an hour per call.
        case administrative
        /// A few rows read or changed (the release commands): the limits `serve` has
        /// (`DATABASE_TIMEOUT`, `DATABASE_STATEMENT_TIMEOUT`, `DATABASE_LOCK_TIMEOUT`), so a lock
        /// held elsewhere or a silent database is an error in seconds, not an hour's silence.
        case brief
    }

    /// For one-shot commands: opens the database, runs `body` with a one-connection pool, then
    /// closes the pool and stops an embedded cluster no other process uses. A failure (of
    /// opening or of `body`) is printed after the cleanup and exits non-zero.
    static func withPool<R>(
        _ configuration: BatonConfiguration, logger: Logger, work: Work = .administrative, _ body: (PostgresPool) async throws -> R
    ) async -> R {
        let database: Database
        do { database = try open(configuration, logger: logger) } catch { fail(error) }
        var settings: PostgresPool.Configuration
        switch work {
        case .administrative: settings = .administrative(conninfo: database.conninfo)
        case .brief:
            settings = configuration.poolConfiguration(conninfo: database.conninfo)
            settings.maxConnections = 1
        }
        let pool = PostgresPool(configuration: settings)
        let outcome: Result<R, any Error>
        do { outcome = .success(try await body(pool)) } catch { outcome = .failure(error) }
        await pool.close()
        try? database.embedded?.stop()
        switch outcome {
        case .success(let value): return value
        case .failure(let error): fail(error, limits: configuration)
        }
    }
}

/// A command's failure in words, for ``Database/withPool(_:logger:_:)`` to print.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Sets up swift-log once for the process.
func bootstrapLogging(_ configuration: BatonConfiguration) -> Logger {
    LoggingSystem.bootstrap { label in
        BatonLogHandler(label: label, level: configuration.logLevel, format: configuration.logFormat)
    }
    return Logger(label: "baton")
}

/// Prints a failure the way a command-line user wants to read it, and exits non-zero.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(1)
}

/// As ``fail(_:)-(String)``, with an error worded for the operator where its own text names a
/// type: a database that cannot be reached says so, then libpq's reason.
func fail(_ error: any Error, limits configuration: BatonConfiguration? = nil) -> Never {
    if let error = error as? PostgresError {
        if error.code == .connectionFailed { fail("cannot connect to the database: \(error.message)") }
        if let configuration {
            let nothing = "nothing was changed"
            if error.sqlState == SQLState.lockNotAvailable {
                fail(
                    "waited \(seconds(configuration.lockTimeout)) for a lock another session holds (DATABASE_LOCK_TIMEOUT): "
                        + "another publish, promote or rollback may be running, or a transaction was left open; \(nothing)")
            }
            if error.sqlState == SQLState.queryCanceled {
                fail("a statement ran longer than \(seconds(configuration.statementTimeout)) (DATABASE_STATEMENT_TIMEOUT); \(nothing)")
            }
            if error.code == .timedOut {
                fail("the database did not answer within \(seconds(configuration.databaseTimeout)) (DATABASE_TIMEOUT): \(error.message)")
            }
        }
    }
    fail("\(error)")
}

/// `3s`, `1.5s`: a configured duration as a person writes it.
private func seconds(_ duration: Duration) -> String {
    let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    return value == value.rounded() ? "\(Int(value))s" : "\(value)s"
}
