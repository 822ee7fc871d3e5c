import Configuration
import Foundation
import Logging
import SystemPackage

/// Everything `baton serve` reads, from flags > environment > config file > defaults.
///
/// Configuration keys (environment variable in brackets):
/// - `database.url` (`DATABASE_URL`, secret): libpq URI or conninfo; unset → embedded cluster.
/// - `database.pool.size` (`DATABASE_POOL_SIZE`, default 10): connections (and DB threads).
/// - `database.pool.timeout` (`DATABASE_POOL_TIMEOUT`, seconds, default 5): connection wait.
/// - `baton.data.dir` (`BATON_DATA_DIR`, default `.baton`): where the embedded cluster lives.
/// - `http.host` (`HTTP_HOST`, default 127.0.0.1), `http.port` (`HTTP_PORT`, default 8080).
/// - `http.body.limit` (`HTTP_BODY_LIMIT`, bytes, default 65536).
/// - `baton.flows.dir` (`BATON_FLOWS_DIR`, default `Flows`).
/// - `baton.migrations.dir` (`BATON_MIGRATIONS_DIR`, default `Migrations`).
/// - `baton.migrate` (`BATON_MIGRATE`, default true): apply pending migrations on start.
/// - `baton.signing.keys` (`BATON_SIGNING_KEYS`, secret): `keyid:base64secret,...`; first signs.
/// - `baton.jwt.hs256.secret` (`BATON_JWT_HS256_SECRET`, secret).
/// - `baton.jwt.public.keys` (`BATON_JWT_PUBLIC_KEYS`): PEM files or inline PEM for RS256/ES256.
/// - `baton.jwt.issuer` / `baton.jwt.audience` (`BATON_JWT_ISSUER` / `BATON_JWT_AUDIENCE`).
/// - `baton.diagnostics` (`BATON_DIAGNOSTICS`, default false): exposes `/diagnostics/*` (benchmarks).
/// - `baton.studio` (`BATON_STUDIO`, default false): Baton Studio at `/studio` (docs/studio.md):
///   `false`; `true` (its API needs a bearer token with a `studio: true` claim); `dev` (open,
///   mints demo users' tokens: `scripts/run.sh`; loopback `http.host` only).
/// - `baton.studio.dir` (`BATON_STUDIO_DIR`, default `Studio`): the studio's page and renderer.
/// - `log.level` (`LOG_LEVEL`, default info), `log.format` (`LOG_FORMAT`: json | logfmt, default json).
public struct BatonConfiguration: Sendable {
    public var databaseURL: String?
    public var poolSize: Int
    public var poolTimeout: Duration
    public var dataDirectory: String
    public var httpHost: String
    public var httpPort: Int
    public var bodyLimit: Int
    public var flowsDirectory: String
    public var migrationsDirectory: String
    public var migrateOnStart: Bool
    public var signingKeys: String?
    public var jwtHS256Secret: String?
    public var jwtPublicKeys: String?
    public var jwtIssuer: String?
    public var jwtAudience: String?
    public var diagnostics: Bool
    /// Whether and how `/studio` is served.
    public var studio: StudioMode
    /// Where the studio's HTML, CSS and JavaScript are read from.
    public var studioDirectory: String
    /// How often each replica adds its contract-health counts to PostgreSQL.
    public var contractHealthInterval: Duration
    public var logLevel: Logger.Level
    public var logFormat: LogFormat

    /// Problems in the configuration, reported before anything starts.
    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Reads and validates the configuration.
    public init(reader: ConfigReader) throws {
        databaseURL = reader.string(forKey: "database.url", isSecret: true).flatMap { $0.isEmpty ? nil : $0 }
        poolSize = reader.int(forKey: "database.pool.size", default: 10)
        poolTimeout = .milliseconds(Int(reader.double(forKey: "database.pool.timeout", default: 5) * 1000))
        dataDirectory = reader.string(forKey: "baton.data.dir", default: ".baton")
        httpHost = reader.string(forKey: "http.host", default: "127.0.0.1")
        httpPort = reader.int(forKey: "http.port", default: 8080)
        bodyLimit = reader.int(forKey: "http.body.limit", default: 64 * 1024)
        flowsDirectory = reader.string(forKey: "baton.flows.dir", default: "Flows")
        migrationsDirectory = reader.string(forKey: "baton.migrations.dir", default: "Migrations")
        migrateOnStart = reader.bool(forKey: "baton.migrate", default: true)
        signingKeys = reader.string(forKey: "baton.signing.keys", isSecret: true)
        jwtHS256Secret = reader.string(forKey: "baton.jwt.hs256.secret", isSecret: true)
        jwtPublicKeys = reader.string(forKey: "baton.jwt.public.keys")
        jwtIssuer = reader.string(forKey: "baton.jwt.issuer")
        jwtAudience = reader.string(forKey: "baton.jwt.audience")
        diagnostics = reader.bool(forKey: "baton.diagnostics", default: false)
        let studioValue = reader.string(forKey: "baton.studio", default: "false").lowercased()
        guard let parsedStudio = StudioMode(configurationValue: studioValue) else {
            throw Error(description: "baton.studio (BATON_STUDIO) must be false, true or dev; got '\(studioValue.prefix(20))'")
        }
        studio = parsedStudio
        studioDirectory = reader.string(forKey: "baton.studio.dir", default: "Studio")
        let healthInterval = reader.double(forKey: "baton.contract.health.interval", default: 60)
        guard healthInterval >= 0.05, healthInterval <= 3600 else {
            throw Error(description: "baton.contract.health.interval (BATON_CONTRACT_HEALTH_INTERVAL) must be 0.05–3600 seconds; got \(healthInterval)")
        }
        contractHealthInterval = .milliseconds(Int(healthInterval * 1000))
        let level = reader.string(forKey: "log.level", default: "info").lowercased()
        guard let parsedLevel = Logger.Level(rawValue: level == "warn" ? "warning" : level) else {
            throw Error(description: "log.level (LOG_LEVEL) must be one of trace, debug, info, notice, warning, error, critical; got '\(level)'")
        }
        logLevel = parsedLevel
        let format = reader.string(forKey: "log.format", default: "json").lowercased()
        guard let parsedFormat = LogFormat(rawValue: format) else {
            throw Error(description: "log.format (LOG_FORMAT) must be json or logfmt; got '\(format)'")
        }
        logFormat = parsedFormat
        if studio == .development, !["127.0.0.1", "::1", "localhost"].contains(httpHost) {
            throw Error(
                description: "baton.studio (BATON_STUDIO) = dev serves the studio without a token and mints anyone's token; "
                    + "it needs http.host 127.0.0.1, ::1 or localhost, got \(httpHost) (use BATON_STUDIO=true)")
        }
        guard (1...65535).contains(httpPort) else { throw Error(description: "http.port (HTTP_PORT) must be 1–65535; got \(httpPort)") }
        guard (1...1000).contains(poolSize) else { throw Error(description: "database.pool.size must be 1–1000; got \(poolSize)") }
        guard bodyLimit >= 1024 else { throw Error(description: "http.body.limit must be at least 1024 bytes; got \(bodyLimit)") }
    }

    /// The layered reader `baton` uses: command-line values, then the environment, then the
    /// optional config file (YAML or JSON by extension), then built-in defaults.
    public static func reader(flags: [AbsoluteConfigKey: ConfigValue], configFile: String?) async throws -> ConfigReader {
        var providers: [any ConfigProvider] = [
            InMemoryProvider(name: "flags", values: flags),
            EnvironmentVariablesProvider(
                secretsSpecifier: .specific(["DATABASE_URL", "BATON_SIGNING_KEYS", "BATON_JWT_HS256_SECRET"])),
        ]
        if let configFile {
            guard FileManager.default.fileExists(atPath: configFile) else {
                throw Error(description: "config file \(configFile) does not exist")
            }
            if configFile.hasSuffix(".json") {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: .init(configFile)))
            } else {
                providers.append(try await FileProvider<YAMLSnapshot>(filePath: .init(configFile)))
            }
        }
        return ConfigReader(providers: providers)
    }
}
