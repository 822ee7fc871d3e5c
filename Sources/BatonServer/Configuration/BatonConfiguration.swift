import BatonPostgres
import BatonRuntime
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
/// - `database.timeout` (`DATABASE_TIMEOUT`, seconds, default 5): deadline of one database call,
///   waiting included; past it the request answers 503 and the pool fails fast until the database
///   answers again.
/// - `database.statement.timeout` / `database.lock.timeout` / `database.idle.transaction.timeout`
///   (`DATABASE_STATEMENT_TIMEOUT` 4, `DATABASE_LOCK_TIMEOUT` 3, `DATABASE_IDLE_TRANSACTION_TIMEOUT` 5
///   seconds): the server-side bounds set on every connection.
/// - `http.request.timeout` (`HTTP_REQUEST_TIMEOUT`, seconds, default 10): every request answers
///   within this, with 503 `unavailable` if nothing else (408 `request_timeout` when the
///   client's body had not all arrived).
/// - `http.idle.timeout` (`HTTP_IDLE_TIMEOUT`, seconds, default 75, longer than
///   `http.request.timeout`): a connection is closed this long after it opened, after its last
///   answer, or after the last piece of a request's body arrived, unless a request has been read
///   and is being answered. The bytes of an unfinished head do not count: half a head trickled
///   byte by byte is closed all the same.
/// - `baton.data.dir` (`BATON_DATA_DIR`, default `.baton`): where the embedded cluster lives.
/// - `http.host` (`HTTP_HOST`, default 127.0.0.1), `http.port` (`HTTP_PORT`, default 8080).
/// - `http.body.limit` (`HTTP_BODY_LIMIT`, bytes, default 65536).
/// - `baton.flows.dir` (`BATON_FLOWS_DIR`, default `Flows`).
/// - `baton.migrations.dir` (`BATON_MIGRATIONS_DIR`, default: `Migrations/` in the working directory,
///   else beside the executable, under `<prefix>/share/baton/`, or in the source package; see
///   ``MigrationsLocation``).
/// - `baton.migrate` (`BATON_MIGRATE`, default true): apply pending migrations on start.
/// - `baton.signing.keys` (`BATON_SIGNING_KEYS`, secret): `keyid:base64secret,...`; first signs.
/// - `baton.jwt.hs256.secret` (`BATON_JWT_HS256_SECRET`, secret).
/// - `baton.jwt.public.keys` (`BATON_JWT_PUBLIC_KEYS`): PEM files or inline PEM for RS256/ES256.
/// - `baton.jwt.issuer` / `baton.jwt.audience` (`BATON_JWT_ISSUER` / `BATON_JWT_AUDIENCE`).
/// - `baton.jwt.leeway` (`BATON_JWT_LEEWAY`, seconds, default 60): clock skew tolerated on `exp`
///   and `nbf` (0–600).
/// - `baton.jwt.max.lifetime` (`BATON_JWT_MAX_LIFETIME`, seconds, default unset: any): refuse
///   tokens whose `exp − iat` (`exp − now` without `iat`) is longer.
/// - `baton.dev` (`BATON_DEV`, `--dev`, default false): allow the public development JWT secret
///   and signing key on a non-loopback `http.host` (`scripts/run.sh`); otherwise `serve` refuses.
/// - `baton.diagnostics` (`BATON_DIAGNOSTICS`, default false): exposes `/diagnostics/*` (benchmarks).
/// - `baton.flows.source` (`BATON_FLOWS_SOURCE`: auto | files | database, default auto): where the
///   served bundle comes from; auto serves the current published release once one exists.
/// - `baton.flows.watch` (`BATON_FLOWS_WATCH`, default false): reload `Flows/` when a file changes.
/// - `baton.flows.check.interval` (`BATON_FLOWS_CHECK_INTERVAL`, seconds, default 5): how often a
///   replica re-checks the current release even without a notification.
/// - `baton.replica` (`BATON_REPLICA`, default hostname:pid): this replica's name in release reports.
/// - `baton.studio` (`BATON_STUDIO`, default false; dev with `--dev` on a loopback address): Baton Studio at `/studio` (docs/studio.md):
///   `false`; `true` (its API needs a bearer token with a `studio: true` claim); `dev` (open,
///   mints demo users' tokens: `scripts/run.sh`; loopback `http.host` only).
/// - `baton.studio.dir` (`BATON_STUDIO_DIR`, default `Studio`): the studio's page and renderer.
/// - `baton.service.<name>.url` (`BATON_SERVICE_<NAME>_URL`): the base URL of a service in
///   `Flows/services.yaml`; `.token` / `.secret` (secret) for its bearer or HMAC auth. In
///   development (`--dev`) without `baton.service.tracking.url`, the demo tracking API at
///   `/demo/tracking` is served and used.
/// - `baton.service.call.wait` (`BATON_SERVICE_CALL_WAIT`, seconds, default 5): how long a repeat
///   of a command whose service call is in flight waits for its answer before 409.
/// - `baton.screen.cache.bytes` (`BATON_SCREEN_CACHE_BYTES`, default 4194304): about how many bytes
///   of fitted screens to hold for requests whose loaders return the same data (docs/operations.md,
///   "The screen cache"); 0 renders every screen.
/// - `log.level` (`LOG_LEVEL`, default info), `log.format` (`LOG_FORMAT`: json | logfmt, default json).
public struct BatonConfiguration: Sendable {
    public var databaseURL: String?
    public var poolSize: Int
    public var poolTimeout: Duration
    /// The deadline of one database call.
    public var databaseTimeout: Duration
    /// Server-side statement, lock and idle-in-transaction bounds.
    public var statementTimeout: Duration
    public var lockTimeout: Duration
    public var idleInTransactionTimeout: Duration
    /// Every request answers within this.
    public var requestTimeout: Duration
    /// A connection is closed this long after it opened, its last answer or its body's last
    /// piece, unless a request is being answered.
    public var idleTimeout: Duration
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
    /// Clock skew tolerated on `exp` and `nbf`.
    public var jwtLeeway: Duration
    /// The longest token lifetime accepted; nil accepts any.
    public var jwtMaxLifetime: Duration?
    /// Development mode: the public development secrets may be served on any address.
    public var development: Bool
    public var diagnostics: Bool
    /// Whether and how `/studio` is served.
    public var studio: StudioMode
    /// Where the studio's HTML, CSS and JavaScript are read from.
    public var studioDirectory: String
    /// How often each replica adds its contract-health counts to PostgreSQL.
    public var contractHealthInterval: Duration
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// Where the served bundle comes from.
    public var flowsSource: FlowsSource
    /// Reload `Flows/` from disk when a file changes (development).
    public var watchFlows: Bool
    /// How often a replica re-checks the current release without a notification.
    public var releaseCheckInterval: Duration
    /// This replica's name in release reports.
    public var replicaName: String
    /// Reads a service's settings (`baton.service.<name>.url`, `.token`, `.secret`).
    public var serviceSetting: @Sendable (String) -> String?
    /// Serve the demo tracking API at `/demo/tracking` (development without a tracking URL).
    public var demoTracking = false
    /// How long a repeat of a command whose service call is in flight waits for its answer.
    public var serviceCallWait: Duration
    /// About how many bytes of fitted screens to hold (0: none).
    public var screenCacheBytes: Int

    /// The most one service call may take (every attempt and backoff): what is left of the
    /// request's deadline after the command's own work (2 s), at most 8 s.
    public var serviceCallBudget: Duration { max(.milliseconds(100), min(.seconds(8), requestTimeout - .seconds(2))) }

    /// Where `serve` takes its flows from.
    public enum FlowsSource: String, Sendable {
        /// The current published release once one exists, `Flows/` on disk until then.
        case auto
        /// Always `Flows/` on disk (releases are ignored).
        case files
        /// Only published releases (until one exists, `Flows/` on disk).
        case database
    }

    /// Problems in the configuration, reported before anything starts.
    public struct Error: Swift.Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Reads and validates the configuration.
    public init(reader: ConfigReader) throws {
        databaseURL = try reader.strictString("database.url", isSecret: true)
        poolSize = try reader.strictInt("database.pool.size") ?? 10
        func seconds(_ key: String, _ environment: String, default value: Double, within range: ClosedRange<Double>) throws -> Duration {
            let number = try reader.strictDouble(key) ?? value
            guard range.contains(number) else {
                throw Error(description: "\(key) (\(environment)) must be \(range.lowerBound)–\(range.upperBound) seconds; got \(number)")
            }
            return .milliseconds(Int(number * 1000))
        }
        poolTimeout = try seconds("database.pool.timeout", "DATABASE_POOL_TIMEOUT", default: 5, within: 0.1...600)
        databaseTimeout = try seconds("database.timeout", "DATABASE_TIMEOUT", default: 5, within: 0.1...600)
        statementTimeout = try seconds("database.statement.timeout", "DATABASE_STATEMENT_TIMEOUT", default: 4, within: 0.1...3600)
        lockTimeout = try seconds("database.lock.timeout", "DATABASE_LOCK_TIMEOUT", default: 3, within: 0.1...3600)
        idleInTransactionTimeout = try seconds(
            "database.idle.transaction.timeout", "DATABASE_IDLE_TRANSACTION_TIMEOUT", default: 5, within: 0.1...3600)
        requestTimeout = try seconds("http.request.timeout", "HTTP_REQUEST_TIMEOUT", default: 10, within: 0.1...3600)
        // Longer than the 60 s idle timeout of common load balancers, so that the balancer, not
        // Baton, closes an idle connection: never one the balancer is just reusing.
        idleTimeout = try seconds("http.idle.timeout", "HTTP_IDLE_TIMEOUT", default: 75, within: 1...3600)
        // A shorter one would close a stalled upload, or a request whose body is not read yet,
        // before the request's deadline could answer it.
        guard idleTimeout > requestTimeout else {
            throw Error(description: "http.idle.timeout (\(idleTimeout)) must be longer than http.request.timeout (\(requestTimeout))")
        }
        guard databaseTimeout < requestTimeout else {
            throw Error(description: "database.timeout (\(databaseTimeout)) must be shorter than http.request.timeout (\(requestTimeout))")
        }
        dataDirectory = try reader.strictString("baton.data.dir") ?? ".baton"
        httpHost = try reader.strictString("http.host") ?? "127.0.0.1"
        httpPort = try reader.strictInt("http.port") ?? 8080
        bodyLimit = try reader.strictInt("http.body.limit") ?? 64 * 1024
        flowsDirectory = try reader.strictString("baton.flows.dir") ?? "Flows"
        migrationsDirectory = try reader.strictString("baton.migrations.dir") ?? MigrationsLocation.find()
        migrateOnStart = try reader.strictBool("baton.migrate") ?? true
        signingKeys = try reader.strictString("baton.signing.keys", isSecret: true)
        jwtHS256Secret = try reader.strictString("baton.jwt.hs256.secret", isSecret: true)
        jwtPublicKeys = try reader.strictString("baton.jwt.public.keys")
        jwtIssuer = try reader.strictString("baton.jwt.issuer")
        jwtAudience = try reader.strictString("baton.jwt.audience")
        jwtLeeway = try seconds("baton.jwt.leeway", "BATON_JWT_LEEWAY", default: 60, within: 0...600)
        if let lifetime = try reader.strictDouble("baton.jwt.max.lifetime") {
            guard lifetime >= 1, lifetime <= 366 * 86400 else {
                throw Error(description: "baton.jwt.max.lifetime (BATON_JWT_MAX_LIFETIME) must be 1–31622400 seconds; got \(lifetime)")
            }
            jwtMaxLifetime = .milliseconds(Int(lifetime * 1000))
        } else {
            jwtMaxLifetime = nil
        }
        development = try reader.strictBool("baton.dev") ?? false
        diagnostics = try reader.strictBool("baton.diagnostics") ?? false
        // On by default in development (--dev, scripts/run.sh) on a loopback address; otherwise
        // only when asked for.
        let studioDefault = development && ["127.0.0.1", "::1", "localhost"].contains(httpHost) ? "dev" : "false"
        // `true` and `false` are two of its three words: a JSON file may write them unquoted.
        let studioSwitch = try? reader.strictBool("baton.studio")
        let studioValue = (try studioSwitch.map { "\($0)" } ?? reader.strictString("baton.studio") ?? studioDefault).lowercased()
        guard let parsedStudio = StudioMode(configurationValue: studioValue) else {
            throw Error(description: "baton.studio (BATON_STUDIO) must be false, true or dev; got '\(studioValue.prefix(20))'")
        }
        studio = parsedStudio
        studioDirectory = try reader.strictString("baton.studio.dir") ?? "Studio"
        let healthInterval = try reader.strictDouble("baton.contract.health.interval") ?? 60
        guard healthInterval >= 0.05, healthInterval <= 3600 else {
            throw Error(description: "baton.contract.health.interval (BATON_CONTRACT_HEALTH_INTERVAL) must be 0.05–3600 seconds; got \(healthInterval)")
        }
        contractHealthInterval = .milliseconds(Int(healthInterval * 1000))
        let level = (try reader.strictString("log.level") ?? "info").lowercased()
        guard let parsedLevel = Logger.Level(rawValue: level == "warn" ? "warning" : level) else {
            throw Error(description: "log.level (LOG_LEVEL) must be one of trace, debug, info, notice, warning, error, critical; got '\(level)'")
        }
        logLevel = parsedLevel
        let format = (try reader.strictString("log.format") ?? "json").lowercased()
        guard let parsedFormat = LogFormat(rawValue: format) else {
            throw Error(description: "log.format (LOG_FORMAT) must be json or logfmt; got '\(format)'")
        }
        logFormat = parsedFormat
        let source = (try reader.strictString("baton.flows.source") ?? "auto").lowercased()
        guard let parsedSource = FlowsSource(rawValue: source) else {
            throw Error(description: "baton.flows.source (BATON_FLOWS_SOURCE) must be auto, files or database; got '\(source)'")
        }
        flowsSource = parsedSource
        watchFlows = try reader.strictBool("baton.flows.watch") ?? false
        let checkInterval = try reader.strictDouble("baton.flows.check.interval") ?? 5
        guard checkInterval >= 0.05, checkInterval <= 3600 else {
            throw Error(description: "baton.flows.check.interval (BATON_FLOWS_CHECK_INTERVAL) must be 0.05–3600 seconds; got \(checkInterval)")
        }
        releaseCheckInterval = .milliseconds(Int(checkInterval * 1000))
        replicaName = try reader.strictString("baton.replica") ?? "\(ProcessInfo.processInfo.hostName):\(getpid())"
        serviceSetting = { key in
            let secret = key.hasSuffix(".token") || key.hasSuffix(".secret")
            return reader.string(forKey: ConfigKey(key), isSecret: secret).flatMap { $0.isEmpty ? nil : $0 }
        }
        serviceCallWait = try seconds("baton.service.call.wait", "BATON_SERVICE_CALL_WAIT", default: 5, within: 0...60)
        screenCacheBytes = try reader.strictInt("baton.screen.cache.bytes") ?? FlowRuntime.defaultScreenCacheBudget
        guard (0...(1 << 30)).contains(screenCacheBytes) else {
            throw Error(description: "baton.screen.cache.bytes (BATON_SCREEN_CACHE_BYTES) must be 0–1073741824; got \(screenCacheBytes)")
        }
        if studio == .development, !["127.0.0.1", "::1", "localhost"].contains(httpHost) {
            throw Error(
                description: "baton.studio (BATON_STUDIO) = dev serves the studio without a token and mints anyone's token; "
                    + "it needs http.host 127.0.0.1, ::1 or localhost, got \(httpHost) (use BATON_STUDIO=true)")
        }
        guard (1...65535).contains(httpPort) else { throw Error(description: "http.port (HTTP_PORT) must be 1–65535; got \(httpPort)") }
        guard (1...1000).contains(poolSize) else { throw Error(description: "database.pool.size (DATABASE_POOL_SIZE) must be 1–1000; got \(poolSize)") }
        guard bodyLimit >= 1024 else { throw Error(description: "http.body.limit (HTTP_BODY_LIMIT) must be at least 1024 bytes; got \(bodyLimit)") }
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

extension BatonConfiguration {
    /// The pool configuration these settings describe.
    public func poolConfiguration(conninfo: String) -> PostgresPool.Configuration {
        PostgresPool.Configuration(
            conninfo: conninfo, maxConnections: poolSize, acquireTimeout: min(poolTimeout, databaseTimeout), callTimeout: databaseTimeout,
            limits: PostgresConnection.Limits(statement: statementTimeout, lock: lockTimeout, idleInTransaction: idleInTransactionTimeout))
    }
}

extension ConfigReader {
    /// A number or a switch that may be left unset (nil), but not set to something else:
    /// swift-configuration's own getters fall back to the default when a value does not convert,
    /// so `DATABASE_POOL_SIZE=ten` or `BATON_DIAGNOSTICS=on` used to be ignored without a word
    /// (and so was a number quoted in the config file, which is read here).
    /// Text at `key`, or nil when unset; empty text (`BATON_FLOWS_DIR=`) is unset too, as
    /// docs/operations.md says. A number or a boolean where text belongs (a JSON file's
    /// `"studio": true`) is refused: read as text it is nil, and the default would win without
    /// a word. A secret's value is not repeated in the error.
    func strictString(_ key: String, isSecret: Bool = false) throws -> String? {
        let config = ConfigKey(key)
        if let text = string(forKey: config, isSecret: isSecret) {
            return text.allSatisfy(\.isWhitespace) ? nil : text
        }
        let other = bool(forKey: config).map { "\($0)" } ?? int(forKey: config).map { "\($0)" } ?? double(forKey: config).map { "\($0)" }
        guard let other else { return nil }
        let environment = key.uppercased().replacingOccurrences(of: ".", with: "_")
        throw BatonConfiguration.Error(description: "\(key) (\(environment)) must be text; got \(isSecret ? "a number or a boolean" : other)")
    }

    func strictInt(_ key: String) throws -> Int? {
        let config = ConfigKey(key)
        return try strict(key, int(forKey: config), "a whole number", other: double(forKey: config).map { "\($0)" }) { Int($0) }
    }

    func strictDouble(_ key: String) throws -> Double? {
        try strict(key, double(forKey: ConfigKey(key)), "a number", other: bool(forKey: ConfigKey(key)).map { "\($0)" }) { Double($0) }
    }

    func strictBool(_ key: String) throws -> Bool? {
        let config = ConfigKey(key)
        // The words the environment provider takes for a switch; `other` is read only when
        // neither a switch nor text is there.
        return try strict(
            key, bool(forKey: config), "true or false", other: int(forKey: config).map { "\($0)" } ?? double(forKey: config).map { "\($0)" }
        ) {
            switch $0.lowercased() {
            case "true", "yes", "1": true
            case "false", "no", "0": false
            default: nil
            }
        }
    }

    /// `other`: the value read as another kind, when the key holds one (a decimal where a whole
    /// number belongs, in a JSON file); such a value has no text form to read. Read only when
    /// there is neither a value nor text.
    private func strict<T>(
        _ key: String, _ value: T?, _ expected: String, other: @autoclosure () -> String?, parse: (String) -> T?
    ) throws -> T? {
        if let value { return value }
        // Unset, or set to something that did not convert: only what is there tells them apart.
        let environment = key.uppercased().replacingOccurrences(of: ".", with: "_")
        guard let text = string(forKey: ConfigKey(key))?.trimmingCharacters(in: .whitespacesAndNewlines) else {
            guard let other = other() else { return nil }
            throw BatonConfiguration.Error(description: "\(key) (\(environment)) must be \(expected); got \(other)")
        }
        // Blank, or YAML's null, is unset.
        if text.isEmpty || text == "~" || text == "null" { return nil }
        if let parsed = parse(text) { return parsed }
        throw BatonConfiguration.Error(description: "\(key) (\(environment)) must be \(expected); got \"\(text.prefix(40))\"")
    }
}
