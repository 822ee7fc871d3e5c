// swift-tools-version:6.2
import PackageDescription

// NonisolatedNonsendingByDefault: a nonisolated async function runs on its caller's executor
// instead of hopping to the generic one on entry. Baton has no actors; the hop it saved was a
// check of the task's executor preference under a lock on every call (3 % of a command's CPU,
// docs/benchmarks.md). Every target that passes Baton an async closure needs it too, or the
// closure types differ (tests here, the Benchmarks package).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

// Tests import umbrella modules freely; member import visibility buys them nothing.
let testSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
    name: "baton",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "baton", targets: ["baton"]),
        .library(name: "BatonServer", targets: ["BatonServer"]),
        .library(name: "BatonPostgres", targets: ["BatonPostgres"]),
        .library(name: "BatonExecutor", targets: ["BatonExecutor"]),
        .library(name: "BatonJSON", targets: ["BatonJSON"]),
        .library(name: "BatonFlows", targets: ["BatonFlows"]),
        .library(name: "BatonContract", targets: ["BatonContract"]),
        .library(name: "BatonRuntime", targets: ["BatonRuntime"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-configuration.git", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // NIOHTTPTypes: the response parts Hummingbird's channel carries, for a channel handler.
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.8.1"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.8.0"),
        // Tests only: a self-signed certificate for the test cluster's TLS (jwt-kit already
        // depends on it).
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
    ],
    targets: [
        // libpq, found through pkg-config.
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"]), .brew(["libpq"])]
        ),
        // The one small wrapper everything that touches PostgreSQL goes through.
        // Where Swift concurrency's jobs run in the executables: NIO's event loops, as the
        // generic executor.
        .target(
            name: "BatonExecutor",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "BatonPostgres",
            dependencies: [
                "CLibPQ",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // JSON values with ordered keys and a fast deterministic encoder.
        .target(
            name: "BatonJSON",
            dependencies: [.product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: swiftSettings
        ),
        // Flows: format, loader, linter, graph, templates and the pure state-machine step.
        .target(
            name: "BatonFlows",
            dependencies: [
                "BatonJSON",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),
        // The component contract and the downgrade pass that fits screens to each client.
        .target(
            name: "BatonContract",
            dependencies: ["BatonFlows", "BatonJSON"],
            swiftSettings: swiftSettings
        ),
        // Deep links: a strict URL parser, the allowlist in Flows/deeplinks.yaml, and the
        // decisions for incoming links and outgoing openUrl targets. Pure: no I/O.
        .target(
            name: "BatonDeepLinks",
            dependencies: ["BatonFlows", "BatonJSON"],
            swiftSettings: swiftSettings
        ),
        // Runs commands: payloads, sessions, the command log, effects in one transaction.
        .target(
            name: "BatonRuntime",
            dependencies: [
                "BatonFlows",
                "BatonJSON",
                "BatonPostgres",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // `baton client`: a terminal walk-through of a running server.
        .target(
            name: "BatonClient",
            dependencies: ["BatonJSON"],
            swiftSettings: swiftSettings
        ),
        // The built-in flows' domain: playlists, favourites, shipments. Registers on the engine
        // like any application would.
        .target(
            name: "BatonBuiltinFlows",
            dependencies: [
                "BatonFlows",
                "BatonJSON",
                "BatonPostgres",
                "BatonRuntime",
            ],
            swiftSettings: swiftSettings
        ),
        // Calls to backend services (Flows/services.yaml): retries, circuit breaker, egress rule.
        .target(
            name: "BatonServices",
            dependencies: [
                "BatonFlows",
                "BatonJSON",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Flow tests: scenarios in Flows/tests/ walked against a runtime like a client would.
        .target(
            name: "BatonScenarios",
            dependencies: ["BatonFlows", "BatonJSON", "BatonPostgres", "BatonRuntime"],
            swiftSettings: swiftSettings
        ),
        // HTTP: routes, middleware, configuration, metrics, lifecycle.
        .target(
            name: "BatonServer",
            dependencies: [
                "BatonContract",
                "BatonDeepLinks",
                "BatonFlows",
                "BatonJSON",
                "BatonPostgres",
                "BatonRuntime",
                "BatonServices",
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "baton",
            dependencies: [
                "BatonBuiltinFlows",
                "BatonClient",
                "BatonDeepLinks",
                "BatonScenarios",
                "BatonContract",
                "BatonFlows",
                "BatonJSON",
                "BatonRuntime",
                "BatonServer",
                "BatonServices",
                "BatonPostgres",
                "BatonExecutor",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // Shared by the test targets: a throwaway PostgreSQL cluster and helpers.
        .target(
            name: "BatonTestSupport",
            dependencies: [
                "BatonContract",
                "BatonDeepLinks",
                "BatonFlows",
                "BatonPostgres",
                "BatonRuntime",
                "BatonServer",
                "BatonServices",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            path: "Tests/BatonTestSupport",
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonPostgresTests",
            dependencies: [
                "BatonPostgres", "BatonTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonJSONTests",
            dependencies: ["BatonJSON"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonFlowsTests",
            dependencies: ["BatonFlows", "BatonJSON", "BatonTestSupport"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonContractTests",
            dependencies: ["BatonContract", "BatonFlows", "BatonJSON"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonDeepLinksTests",
            dependencies: ["BatonDeepLinks", "BatonFlows", "BatonJSON"],
            swiftSettings: testSettings
        ),
        .testTarget(
            name: "BatonServerTests",
            dependencies: [
                "BatonBuiltinFlows",
                "BatonClient",
                "BatonScenarios",
                "BatonServer",
                "BatonServices",
                "BatonTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: testSettings
        ),
    ]
)
