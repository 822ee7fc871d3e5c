import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// The real `baton` executable, run as a child process for end-to-end tests.
public final class BatonProcess: @unchecked Sendable {
    // Touched only by the test that owns it.
    public let process = Process()
    public let port: Int
    public let dataDirectory: URL
    public let logFile: URL

    /// Where `swift build` put the `baton` executable (beside the test bundle).
    public static var executable: URL? {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<5 {
            let candidate = directory.appendingPathComponent("baton")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        return nil
    }

    /// Starts `baton <arguments>` with an embedded cluster in a fresh directory, serving on
    /// `port` (else a free one); with `openFileLimit`, under that soft limit on open files (set
    /// by a shell that then `exec`s baton, so the process is still baton's).
    public init(
        arguments: [String], environment: [String: String] = [:], reusing directory: URL? = nil, port: Int? = nil,
        openFileLimit: Int? = nil
    ) throws {
        guard let executable = Self.executable else {
            throw TestFailure("the baton executable is not built; run `swift build` (scripts/test.sh does) before the tests")
        }
        self.port = try port ?? FreePort.find()
        dataDirectory = directory ?? URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dataDirectory, withIntermediateDirectories: true)
        chmod(dataDirectory.path, 0o755)
        logFile = dataDirectory.appendingPathComponent("baton-\(UUID().uuidString.prefix(6)).log")
        guard FileManager.default.createFile(atPath: logFile.path, contents: nil) else { throw TestFailure("cannot create \(logFile.path)") }
        let serves = arguments.first == "serve"
        let batonArguments = arguments + ["--data-dir", dataDirectory.path] + (serves ? ["--port", String(self.port)] : [])
        if let openFileLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", #"ulimit -Sn \#(openFileLimit) && exec "$0" "$@""#, executable.path] + batonArguments
        } else {
            process.executableURL = executable
            process.arguments = batonArguments
        }
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.currentDirectoryURL = TestDatabase.repositoryRoot
        let log = try FileHandle(forWritingTo: logFile)
        process.standardOutput = log
        process.standardError = log
        // Commands that read a terminal (`client`) see its end at once.
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Waits until `/readyz` answers 200.
    public func waitUntilReady(timeout: Duration = .seconds(90)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !process.isRunning { throw TestFailure("baton exited early (status \(process.terminationStatus)):\n\(log)") }
            if let response = try? await get("/readyz"), response.status == .ok { return }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw TestFailure("baton did not become ready within \(timeout):\n\(log)")
    }

    /// What the process has logged so far.
    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    public struct Reply: Sendable {
        public var status: HTTPResponseStatus
        public var headers: HTTPHeaders
        public var body: String
    }

    public func get(_ path: String, headers: [(String, String)] = []) async throws -> Reply {
        try await send(.GET, path, headers: headers)
    }

    public func send(_ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: String? = nil) async throws -> Reply {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(string: body)) }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return Reply(status: response.status, headers: response.headers, body: String(buffer: bytes))
    }

    /// Sends `signal` (0: none, just wait) and waits for the process to exit; returns its status.
    public func stop(signal: Int32 = SIGTERM, timeout: Duration = .seconds(60)) async throws -> Int32 {
        if signal != 0, process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                kill(process.processIdentifier, SIGKILL)
                throw TestFailure("baton did not exit within \(timeout) of signal \(signal):\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// A test precondition that did not hold.
public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
