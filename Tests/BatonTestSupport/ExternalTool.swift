import Foundation

/// Runs programs that tests use as independent judges (promtool, python validators, the
/// baton executable's own subcommands).
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
    ///
    /// The waiting happens on a thread of its own, never on the test process's cooperative
    /// pool: that pool has one thread per core, and a test blocking it (a browser walk takes
    /// 20 s) starves every other test's tasks, including the HTTP servers tests start.
    public static func run(
        _ executable: String, _ arguments: [String], input: [UInt8] = [],
        in directory: URL? = nil, environment: [String: String]? = nil
    ) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result {
                    try runBlocking(executable, arguments, input: input, in: directory, environment: environment)
                })
            }.start()
        }
    }

    private static func runBlocking(
        _ executable: String, _ arguments: [String], input: [UInt8], in directory: URL?, environment: [String: String]?
    ) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        if let environment { process.environment = environment }
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
