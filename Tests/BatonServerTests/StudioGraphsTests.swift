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
        let result = await StudioGraphs.run("/bin/sh", ["-c", "exec 0<&-; echo gone; exit 3"], input: input, timeout: .seconds(30))
        #expect(result.status == 3)
        #expect(result.output.contains("gone"))
        // And one that reads it all still gets it all.
        let counted = await StudioGraphs.run("/usr/bin/wc", ["-c"], input: input, timeout: .seconds(30))
        #expect(counted.status == 0)
        #expect(counted.output.trimmingCharacters(in: .whitespacesAndNewlines) == "\(input.count)")
    }

    // Were the timeout not kept, the tool would exit 0 after its 30 s.
    @Test("a tool still running after its timeout is killed")
    func toolThatTakesTooLong() async throws {
        let result = await StudioGraphs.run("/bin/sh", ["-c", "exec sleep 30 <&-"], input: Array("digraph {}".utf8), timeout: .seconds(1))
        #expect(result.status == SIGKILL)
    }

    @Test("requests for a graph being drawn wait for the one dot; the drawing is kept")
    func oneDrawingAtATime() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("dot-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let runs = directory.appendingPathComponent("runs")
        let dot = directory.appendingPathComponent("dot")
        try "#!/bin/sh\ncat > /dev/null\necho run >> '\(runs.path)'\nsleep 1\necho '<svg>drawn</svg>'\n".write(to: dot, atomically: true, encoding: .utf8)
        chmod(dot.path, 0o755)
        let graphs = StudioGraphs(locate: { dot.path })
        let drawn = await withTaskGroup(of: Result<String, StudioGraphs.Problem>.self) { group in
            for _ in 0..<5 { group.addTask { await graphs.svg(flow: "f", hash: "h", dot: "digraph {}") } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(drawn.allSatisfy { (try? $0.get()) == "<svg>drawn</svg>\n" }, "\(drawn)")
        #expect(try await graphs.svg(flow: "f", hash: "h", dot: "digraph {}").get() == "<svg>drawn</svg>\n")
        #expect(try String(contentsOf: runs, encoding: .utf8) == "run\n")
    }
}
