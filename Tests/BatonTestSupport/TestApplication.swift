import BatonContract
import BatonFlows
import BatonPostgres
import BatonRuntime
import BatonServer
import BatonServices
import Configuration
import Foundation
import JWTKit
import Logging

/// Builds Baton environments for HTTP tests: a fresh migrated database, an own metrics
/// registry, quiet logs, test keys.
public enum TestApplication {
    /// The payload signing keys tests use (two, to exercise rotation).
    public static let signingKeys = "test1:" + Data(repeating: 0x11, count: 32).base64EncodedString() + ",test0:"
        + Data(repeating: 0x22, count: 32).base64EncodedString()
    /// The HS256 secret tests sign bearer tokens with.
    public static let jwtSecret = "test-secret-for-bearer-tokens-0123456789"

    /// Configuration defaults with test-friendly overrides applied by `configure`.
    public static func configuration(_ configure: (inout BatonConfiguration) -> Void = { _ in }) throws -> BatonConfiguration {
        var configuration = try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: [:])))
        configuration.diagnostics = true
        configuration.flowsDirectory = TestDatabase.repositoryRoot.appendingPathComponent("Flows").path
        configuration.migrationsDirectory = TestDatabase.migrationsDirectory.path
        configuration.signingKeys = signingKeys
        configuration.jwtHS256Secret = jwtSecret
        // Tests serve their flow files unless they test releases.
        configuration.flowsSource = .files
        // The suite runs many tests at once on two cores: deadlines that fit production would
        // fire on a starved test. Fault tests set the production defaults back.
        configuration.databaseTimeout = .seconds(30)
        configuration.statementTimeout = .seconds(25)
        configuration.requestTimeout = .seconds(60)
        configure(&configuration)
        return configuration
    }

    /// An environment on a fresh database with every migration applied (or on `conninfo`).
    /// With `flows`, it runs those flows with `registry` (and fails the test on lint errors).
    public static func environment(
        conninfo: String? = nil, migrator: Migrator? = nil, poolSize: Int = 4, flows: URL? = nil,
        registry: FlowRegistry = FlowRegistry(), contract: URL? = nil, allowlist: URL? = nil,
        clock: @escaping @Sendable () -> Date = { Date() }, faults: PostgresFaults? = nil,
        services: (any ServiceCaller)? = nil, configure: (inout BatonConfiguration) -> Void = { _ in }
    ) async throws -> BatonEnvironment {
        let configuration = try configuration(configure)
        let metrics = BatonMetrics()
        let target: String
        if let conninfo { target = conninfo } else { target = try await TestDatabase.make(migrated: true) }
        var poolConfiguration = configuration.poolConfiguration(conninfo: target)
        poolConfiguration.maxConnections = poolSize
        poolConfiguration.faults = faults
        let pool = PostgresPool(configuration: poolConfiguration, acquireObserver: metrics.poolAcquireObserver)
        var logger = Logger(label: "baton-test")
        logger.logLevel = ProcessInfo.processInfo.environment["BATON_TEST_LOG"] != nil ? .debug : .critical
        let authenticator = try await BearerAuthenticator(
            hs256Secret: configuration.jwtHS256Secret, publicKeys: configuration.jwtPublicKeys, issuer: configuration.jwtIssuer,
            audience: configuration.jwtAudience, leeway: configuration.jwtLeeway, maxLifetime: configuration.jwtMaxLifetime)
        var runtime: FlowRuntime?
        var definitions: FlowDefinitions?
        let buckets = ClientBuckets()
        if let flows {
            let repositoryFlows = TestDatabase.repositoryRoot.appendingPathComponent("Flows")
            let ownAllowlist = FileManager.default.fileExists(atPath: flows.appendingPathComponent("deeplinks.yaml").path)
            let loaded = FlowDefinitions.load(
                directory: flows, catalog: registry.catalog, contractDirectory: contract ?? repositoryFlows,
                allowlistDirectory: allowlist ?? (ownAllowlist ? flows : repositoryFlows))
            guard loaded.isServable, let fitter = loaded.fitter(metrics: metrics, buckets: buckets, logger: logger) else {
                throw TestFailure("test flows do not lint:\n" + loaded.diagnostics.map(\.description).joined(separator: "\n"))
            }
            runtime = FlowRuntime(
                bundle: loaded.bundle, registry: registry, pool: pool, signer: try PayloadSigner(configuration: signingKeys),
                fitter: fitter, metrics: metrics, logger: logger, clock: clock,
                services: services ?? ServiceClient(settings: configuration.serviceSetting, metrics: metrics, logger: logger),
                callWait: configuration.serviceCallWait, callBudget: configuration.serviceCallBudget,
                screenCacheBytes: configuration.screenCacheBytes)
            definitions = loaded
            try await runtime?.publishDefinitions()
        }
        return BatonEnvironment(
            configuration: configuration, pool: pool,
            migrator: try migrator ?? Migrator(directory: TestDatabase.migrationsDirectory),
            metrics: metrics, logger: logger,
            services: [DatabaseService(pool: pool, embedded: nil, logger: logger)],
            runtime: runtime, authenticator: authenticator, contract: definitions?.contract, allowlist: definitions?.allowlist,
            buckets: buckets)
    }

    /// The signer tests mint payloads with (the same keys the environments verify with).
    public static var signer: PayloadSigner { try! PayloadSigner(configuration: signingKeys) }
}

/// Bearer tokens for tests.
public enum TestTokens {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var nbf: NotBeforeClaim?
        var iat: IssuedAtClaim?
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// An HS256 token for `user`, valid for an hour unless told otherwise; `kid` goes in the
    /// header (the token is signed with `secret` whatever it names).
    public static func token(
        _ user: String, expires: Date = Date().addingTimeInterval(3600), notBefore: Date? = nil, issuedAt: Date? = nil,
        issuer: String? = nil, audience: String? = nil, kid: String? = nil, secret: String = TestApplication.jwtSecret
    ) async throws -> String {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try await keys.sign(
            Claims(
                sub: SubjectClaim(value: user), exp: ExpirationClaim(value: expires), nbf: notBefore.map { NotBeforeClaim(value: $0) },
                iat: issuedAt.map { IssuedAtClaim(value: $0) }, iss: issuer.map { IssuerClaim(value: $0) },
                aud: audience.map { AudienceClaim(value: [$0]) }),
            kid: kid.map { JWKIdentifier(string: $0) })
    }

    /// `Authorization` header value for `user`.
    public static func bearer(_ user: String) async throws -> String { "Bearer " + (try await token(user)) }
}
