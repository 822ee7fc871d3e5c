import Foundation

/// Runs programs that tests use as independent judges (promtool, python validators).
public enum ExternalTool {
    /// The absolute path of `name` on `PATH` (or a few usual places), if installed.
    public static func find(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/opt/homebrew/bin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// A tool installed by `scripts/bootstrap.sh --test` into `.build/tools-venv`.
    public static func findInToolsVenv(_ name: String) -> String? {
        let candidate = TestDatabase.repositoryRoot.appendingPathComponent(".build/tools-venv/bin/\(name)").path
        return FileManager.default.isExecutableFile(atPath: candidate) ? candidate : nil
    }

    /// Runs `executable` with `input` on stdin and returns its status and combined output.
    public static func run(_ executable: String, _ arguments: [String], input: [UInt8] = []) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = stdout
        try process.run()
        let writer = Thread {
            stdin.fileHandleForWriting.write(Data(input))
            try? stdin.fileHandleForWriting.close()
        }
        writer.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
