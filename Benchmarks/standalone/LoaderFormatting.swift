// The loaders' formatting, Foundation against hand-written (docs/benchmarks.md, "Loaders").
// A standalone program: the functions are internal to BatonBuiltinFlows, which the ordo-one
// package does not link.  nice -n 10 swiftc -O Benchmarks/standalone/LoaderFormatting.swift -o /tmp/lf && /tmp/lf
import Foundation

// Old and new forms of the loaders' formatting (Sources/BatonBuiltinFlows/Support.swift).
func oldDuration(_ seconds: Int) -> String { "\(seconds / 60):" + String(format: "%02d", seconds % 60) }
func newDuration(_ seconds: Int) -> String {
    let remainder = seconds % 60
    return "\(seconds / 60):" + ((0..<10).contains(remainder) ? "0\(remainder)" : "\(remainder)")
}
func oldUUID(_ id: UUID) -> String { id.uuidString.lowercased() }
func newUUID(_ id: UUID) -> String {
    withUnsafeBytes(of: id.uuid) { bytes in
        String(unsafeUninitializedCapacity: 36) { output in
            let digits: StaticString = "0123456789abcdef"
            var index = 0
            for (position, byte) in bytes.enumerated() {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    output[index] = UInt8(ascii: "-")
                    index += 1
                }
                output[index] = digits.utf8Start[Int(byte >> 4)]
                output[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                index += 2
            }
            return index
        }
    }
}

@inline(never) func sink(_ s: String) { if s.utf8.count == 999 { print(s) } }

func measure(_ name: String, _ n: Int, _ body: (Int) -> String) {
    var best = Double.infinity
    for _ in 0..<5 {
        let start = ContinuousClock.now
        for i in 0..<n { sink(body(i)) }
        let elapsed = ContinuousClock.now - start
        let ns = Double(elapsed.components.attoseconds) / 1e9 + Double(elapsed.components.seconds) * 1e9
        best = min(best, ns / Double(n))
    }
    print(name, String(format: "%.0f ns", best))
}
let ids = (0..<1024).map { _ in UUID() }
measure("duration, String(format:)", 200_000) { oldDuration(100 + $0 % 500) }
measure("duration, interpolation ", 200_000) { newDuration(100 + $0 % 500) }
measure("uuid, uuidString.lowercased()", 200_000) { oldUUID(ids[$0 & 1023]) }
measure("uuid, hand-written hex     ", 200_000) { newUUID(ids[$0 & 1023]) }
