import Foundation
import Testing

@testable import BatonBuiltinFlows

/// The loaders' hand-written formatting against the Foundation forms it replaced.
@Suite struct BuiltinFormattingTests {
    @Test(arguments: [0, 5, 9, 10, 59, 60, 61, 119, 600, 3599, 3600, 7265])
    func durationMatchesPrintf(seconds: Int) {
        #expect(formatDuration(seconds) == "\(seconds / 60):" + String(format: "%02d", seconds % 60))
    }

    @Test func negativeDurationMatchesPrintf() {
        #expect(formatDuration(-5) == "0:" + String(format: "%02d", -5))
    }

    @Test func uuidIsTheLowercasedCanonicalForm() {
        for _ in 0..<1000 {
            let id = UUID()
            #expect(id.lowercased == id.uuidString.lowercased())
        }
        let fixed = UUID(uuidString: "00FF10AB-CDEF-4123-8456-789ABCDEF012")!
        #expect(fixed.lowercased == "00ff10ab-cdef-4123-8456-789abcdef012")
    }
}
