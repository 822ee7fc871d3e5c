import AsyncHTTPClient
import BatonJSON
import Foundation
import NIOCore
import NIOHTTP1

/// A real Prometheus server on loopback, run as a child process, for end-to-end tests of the
/// scrape configuration, the alert rules and the dashboard's queries.
public final class PrometheusServer: @unchecked Sendable {
    // Touched only by the test that owns it.
    public let process = Process()
    public let port: Int
    /// Holds the configuration, the rule files beside it, the TSDB and the log.
    public let directory: URL
    public let logFile: URL

    /// Starts `executable` (the `prometheus` binary) on `configuration`, written to
    /// `prometheus.yml` in a fresh directory together with `files` (name → contents), so
    /// relative `rule_files` resolve there.
    public init(executable: String, configuration: String, files: [String: String] = [:]) throws {
        port = try FreePort.find()
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("baton-prometheus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let configFile = directory.appendingPathComponent("prometheus.yml")
        try configuration.write(to: configFile, atomically: true, encoding: .utf8)
        for (name, contents) in files {
            try contents.write(to: directory.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        logFile = directory.appendingPathComponent("prometheus.log")
        guard FileManager.default.createFile(atPath: logFile.path, contents: nil) else { throw TestFailure("cannot create \(logFile.path)") }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = [
            "--config.file=\(configFile.path)",
            "--storage.tsdb.path=\(directory.appendingPathComponent("data").path)",
            "--web.listen-address=127.0.0.1:\(port)",
        ]
        let log = try FileHandle(forWritingTo: logFile)
        process.standardOutput = log
        process.standardError = log
        try process.run()
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// What Prometheus has logged so far.
    public var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    /// Waits until `/-/ready` answers 200 (configuration and rules loaded, TSDB open).
    public func waitUntilReady(timeout: Duration = .seconds(30)) async throws {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if !process.isRunning { throw TestFailure("prometheus exited early (status \(process.terminationStatus)):\n\(log)") }
            if let (status, _) = try? await get("/-/ready"), status == .ok { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw TestFailure("prometheus did not become ready within \(timeout):\n\(log)")
    }

    /// `GET /api/v1/<endpoint>`: the `data` member of a successful answer.
    public func api(_ endpoint: String, _ parameters: [(String, String)] = []) async throws -> JSONValue {
        var components = URLComponents()
        components.queryItems = parameters.map { URLQueryItem(name: $0.0, value: $0.1) }
        // `+` is a literal in URLComponents' encoding but a space to Prometheus' form parser.
        let query = (components.percentEncodedQuery ?? "").replacingOccurrences(of: "+", with: "%2B")
        let (status, body) = try await get("/api/v1/\(endpoint)" + (query.isEmpty ? "" : "?" + query))
        let answer = try JSONValue.parse(Array(body.utf8))
        guard status == .ok, answer["status"] == "success", let data = answer["data"] else {
            throw TestFailure("prometheus /api/v1/\(endpoint) \(parameters): \(status) \(body.prefix(500))")
        }
        return data
    }

    /// One sample of an instant vector: its labels and value.
    public struct Sample: Sendable, CustomStringConvertible {
        public var labels: [String: String]
        public var value: Double
        public var description: String { "\(labels) \(value)" }
    }

    /// An instant query evaluated now.
    public func query(_ expression: String) async throws -> [Sample] {
        let data = try await api("query", [("query", expression)])
        guard data["resultType"] == "vector", let result = data["result"]?.arrayValue else {
            throw TestFailure("prometheus: '\(expression)' is not an instant vector: \(data)")
        }
        return try result.map { item in
            var labels: [String: String] = [:]
            for (name, value) in item["metric"]?.objectValue ?? [:] { labels[name] = value.stringValue }
            guard let text = item["value"]?.arrayValue?.last?.stringValue, let value = Double(text) else {
                throw TestFailure("prometheus: a sample without a value in \(item)")
            }
            return Sample(labels: labels, value: value)
        }
    }

    /// Sends SIGTERM and waits for the exit (SIGKILL after `timeout`).
    public func stop(timeout: Duration = .seconds(15)) async {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now > deadline {
                kill(process.processIdentifier, SIGKILL)
                break
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
    }

    private func get(_ path: String) async throws -> (HTTPResponseStatus, String) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: baseURL + path), timeout: .seconds(10))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return (response.status, String(buffer: bytes))
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}
