import BatonContract
import BatonJSON
import BenchmarkScreens
import Foundation

// Fit + encode of the 200-component screen in a plain loop, for counting instructions:
// ordo-one times these (BatonBenchmarks), while an instruction count is steady on a busy
// machine. Usage (docs/benchmarks.md, "Short strings read whole"):
//
//   swift build -c release --product baton-fit-count
//   cp .build/release/baton-fit-count /tmp/fc && strip -g /tmp/fc   # valgrind cannot read DWARF 5
//   valgrind --tool=callgrind /tmp/fc c3                            # then divide by the iterations
//
// Without valgrind it prints the best time per call of 40 batches.

let iterations = 40 * 200
let screen = largeScreen()
let fitter = ScreenFitter(registry: contract, isAllowedURL: { $0.hasPrefix("https://") })
let clients = [
    "c1": ScreenFitter.Client(contract: 1, capabilities: []),
    "c3": ScreenFitter.Client(contract: 3, capabilities: ["barcode_scanner", "share_sheet"]),
]
let which = CommandLine.arguments.dropFirst().first ?? "all"
guard ["all", "c1", "c3", "encode"].contains(which) else {
    print("usage: baton-fit-count [all|c1|c3|encode]   (\(iterations) calls each)")
    exit(2)
}

@inline(never) func keep(_ count: Int) { if count < 0 { print(count) } }

func measure(_ name: String, _ body: () -> Int) {
    var best = ContinuousClock.Duration.seconds(1_000)
    for _ in 0..<40 {
        let start = ContinuousClock.now
        for _ in 0..<200 { keep(body()) }
        best = min(best, (ContinuousClock.now - start) / 200)
    }
    print("\(name): best \(best / .microseconds(1)) µs per call over \(iterations) calls")
}

for name in ["c1", "c3"] where which == "all" || which == name {
    measure("fit + encode, contract \(name.dropFirst())") { fitter.encodeScreen(screen, for: clients[name]!).bytes.count }
}
if which == "all" || which == "encode" { measure("encode only") { JSONEncoding.encode(screen).count } }
