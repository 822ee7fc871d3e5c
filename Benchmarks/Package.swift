// swift-tools-version:6.2
// In-process benchmarks of Baton's hot paths (ordo-one/benchmark). A package of its own so
// the main package and CI do not build the benchmark tooling.
//
//   cd Benchmarks && swift package benchmark
import PackageDescription

// SwiftPM names a path dependency after its directory: "main" in /work/main, "wt-perf" in a
// worktree. Read it from where this manifest lives so the benchmarks build from any checkout.
let baton = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "main").lowercased()

// Baton's modules are built with nonisolated async functions running on their caller's executor
// (the main package's `NonisolatedNonsendingByDefault`); code that passes them async closures
// must agree, or the closure types differ and do not link.
let settings: [SwiftSetting] = [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]

let package = Package(
    name: "BatonBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/swift-extras/swift-extras-base64.git", from: "1.2.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .target(
            name: "BenchmarkScreens",
            dependencies: [.product(name: "BatonContract", package: baton), .product(name: "BatonJSON", package: baton)],
            path: "Benchmarks/BenchmarkScreens",
            swiftSettings: settings
        ),
        .executableTarget(
            name: "BatonBenchmarks",
            dependencies: [
                "BenchmarkScreens",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "BatonContract", package: baton),
                .product(name: "BatonFlows", package: baton),
                .product(name: "BatonJSON", package: baton),
                .product(name: "BatonRuntime", package: baton),
                .product(name: "BatonServer", package: baton),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ExtrasBase64", package: "swift-extras-base64"),
            ],
            path: "Benchmarks/BatonBenchmarks",
            swiftSettings: settings,
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // Fit + encode in a plain loop, for valgrind's instruction counts (docs/benchmarks.md).
        .executableTarget(
            name: "baton-fit-count",
            dependencies: ["BenchmarkScreens", .product(name: "BatonContract", package: baton), .product(name: "BatonJSON", package: baton)],
            path: "Benchmarks/FitCount",
            swiftSettings: settings
        ),
        // The database client alone, beside pgbench (Benchmarks/e2e/db-client-vs-pgbench.sh).
        .executableTarget(
            name: "baton-db-client-bench",
            dependencies: [.product(name: "BatonPostgres", package: baton), .product(name: "BatonExecutor", package: baton), .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio")],
            path: "Benchmarks/DatabaseClient",
            swiftSettings: settings
        ),
        // The HTTP stack alone, beside `baton serve` (Benchmarks/e2e/http-floor.sh).
        .executableTarget(
            name: "baton-http-floor",
            dependencies: [
                .product(name: "BatonExecutor", package: baton), .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/HTTPFloor",
            swiftSettings: settings
        ),
    ]
)
