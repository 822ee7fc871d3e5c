// swift-tools-version:6.2
// In-process benchmarks of Baton's hot paths (ordo-one/benchmark). A package of its own so
// the main package and CI do not build the benchmark tooling.
//
//   cd Benchmarks && swift package benchmark
import PackageDescription

let package = Package(
    name: "BatonBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "BatonBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "BatonContract", package: "main"),
                .product(name: "BatonFlows", package: "main"),
                .product(name: "BatonJSON", package: "main"),
                .product(name: "BatonRuntime", package: "main"),
            ],
            path: "Benchmarks/BatonBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
