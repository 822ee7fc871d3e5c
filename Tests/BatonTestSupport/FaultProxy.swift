import Foundation

/// `../shared/tools/tcp_fault_proxy.py` in front of a TCP server: cut, refuse, delay or
/// blackhole the connections that go through it.
public final class FaultProxy: @unchecked Sendable {
    // Touched only by the test that owns it.
    private let process = Process()
    /// Where clients connect instead of the server.
    public let port: Int
    private let controlPort: Int

    /// The proxy script, from the shared folder beside the repository.
    public static var script: URL {
        TestDatabase.repositoryRoot.appendingPathComponent("../shared/tools/tcp_fault_proxy.py").standardizedFileURL
    }

    /// Python that ends its process once the test process that started it is gone: a helper
    /// server a test never released (a static, a crash) must not outlive the run, polling and
    /// holding ports on the next run's machine. For the start of a test's Python script.
    public static let parentWatch = """
        import os, threading, time
        parent = os.getppid()
        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()

        """

    /// Runs the script (the first argument) under ``parentWatch``.
    static let orphanGuard = parentWatch + """
        import runpy, sys
        sys.argv = sys.argv[1:]
        runpy.run_path(sys.argv[0], run_name="__main__")
        """

    public init(upstreamHost: String, upstreamPort: Int) async throws {
        guard FileManager.default.fileExists(atPath: Self.script.path) else {
            throw TestFailure("\(Self.script.path) is missing: the fault tests need ../shared beside the repository")
        }
        port = try FreePort.find()
        controlPort = try FreePort.find()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.orphanGuard, Self.script.path, String(port), upstreamHost, String(upstreamPort), String(controlPort)]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Ready when the control port answers.
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if (try? send("status")) != nil { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("the fault proxy did not start")
    }

    /// Sends a control command (`cut`, `down`, `up`, `latency N`, `blackhole`, `status`) and
    /// returns the proxy's answer.
    @discardableResult
    public func send(_ command: String) throws -> String {
        let socket = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw TestFailure("socket() failed") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(controlPort).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestFailure("cannot reach the fault proxy's control port") }
        let line = Array((command + "\n").utf8)
        _ = line.withUnsafeBytes { write(socket, $0.baseAddress, $0.count) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = read(socket, &buffer, buffer.count)
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
public enum FreePort {
    /// A loopback port free now, below the ephemeral range. Linux gives the local ports of
    /// outgoing connections from 32768 up (macOS from 49152): a listener that binds a port from
    /// there a moment after it was found free can find it taken by any client the test process
    /// opened meanwhile (CI once saw "Address already in use" when Baton restarted).
    /// Where test ports are drawn from (also by ``Loopback/holdingPort(listening:_:)``).
    static let range = 20_000..<32_000

    public static func find() throws -> Int {
        for _ in 0..<100 {
            let candidate = Int.random(in: range)
            if Loopback.withSocket(port: candidate, { bind($0, $1, $2) == 0 }) == true { return candidate }
        }
        throw TestFailure("no free loopback port between 20000 and 32000")
    }
}
