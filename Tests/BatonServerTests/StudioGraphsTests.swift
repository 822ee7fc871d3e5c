import Foundation
import Testing

@testable import BatonServer

@Suite("Studio graphs: the dot tool run beside the server")
struct StudioGraphsTests {
    // The input is larger than a pipe holds, so the writer is still writing when the tool goes
    // away: a write that used to raise SIGPIPE (ending the whole process, this test's too) or
    // trap in FileHandle's non-throwing write.
    @Test("a tool that exits without reading its input is a failed run, not the end of the process")
    func toolThatReadsNothing() async throws {
        let input = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        let result = await StudioGraphs.run("/bin/sh", ["-c", "exec 0<&-; echo gone; exit 3"], input: input)
        #expect(result.status == 3)
        #expect(result.output.contains("gone"))
        // And one that reads it all still gets it all.
        let counted = await StudioGraphs.run("/usr/bin/wc", ["-c"], input: input)
        #expect(counted.status == 0)
        #expect(counted.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(input.count)")
    }
}
