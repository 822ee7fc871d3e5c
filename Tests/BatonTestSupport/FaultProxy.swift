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

    /// Runs the script (the first argument) and ends it once the test process that started it is
    /// gone: a proxy a test never released (a static, a crash) must not outlive the run, polling
    /// and holding ports on the next run's machine.
    static let orphanGuard = """
        import os, runpy, sys, threading, time
        parent = os.getppid()
        def watch():
            while os.getppid() == parent:
                time.sleep(0.5)
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
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

/// A TCP port on 127.0.0.1 that nothing listens on right now (the kernel's pick for port 0).
public enum FreePort {
    public static func find() throws -> Int {
        #if os(Linux)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw TestFailure("socket() failed: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(fd, socketAddress, length) == 0 && getsockname(fd, socketAddress, &length) == 0
            }
        }
        guard bound else { throw TestFailure("could not bind a loopback port: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
