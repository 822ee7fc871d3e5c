import BatonJSON
import Foundation

/// A backend service flows may call, as declared in `Flows/services.yaml`. The file holds no
/// addresses or secrets: those come from configuration keys named after the service
/// (`baton.service.<name>.url`, environment `BATON_SERVICE_<NAME>_URL`).
public struct ServiceDefinition: Sendable, Equatable {
    /// How requests authenticate.
    public enum Auth: Sendable, Equatable {
        case none
        /// `Authorization: Bearer <token>`; the token is the secret configuration value
        /// `baton.service.<name>.token` (`BATON_SERVICE_<NAME>_TOKEN`).
        case bearer
        /// `X-Baton-Timestamp` and `X-Baton-Signature: sha256=<hex>` over
        /// `<timestamp>\n<method>\n<target>\n<body>`, keyed with the secret configuration value
        /// `baton.service.<name>.secret` (`BATON_SERVICE_<NAME>_SECRET`).
        case hmac
    }

    public var name: String
    public var auth: Auth
    /// Loopback, private and link-local addresses are allowed only for internal services.
    public var isInternal: Bool
    public var connectTimeout: Duration
    /// Per attempt; a call may override it.
    public var attemptTimeout: Duration
    /// Attempts in all (1 = no retry).
    public var attempts: Int
    /// The first retry waits about this long (with jitter), doubling each time up to `maxBackoff`.
    public var backoff: Duration
    public var maxBackoff: Duration
    /// Consecutive failures that open the circuit.
    public var circuitFailures: Int
    /// How long the circuit stays open before one probe call is let through.
    public var circuitOpen: Duration
    /// Calls in flight at once from one replica; more wait (within their timeout).
    public var concurrency: Int
    public var location: SourceLocation

    public init(
        name: String, auth: Auth = .none, isInternal: Bool = false, connectTimeout: Duration = .seconds(1),
        attemptTimeout: Duration = .seconds(2), attempts: Int = 3, backoff: Duration = .milliseconds(100),
        maxBackoff: Duration = .seconds(1), circuitFailures: Int = 5, circuitOpen: Duration = .seconds(30), concurrency: Int = 32,
        location: SourceLocation = SourceLocation(file: "services.yaml", line: 1, column: 1)
    ) {
        self.name = name
        self.auth = auth
        self.isInternal = isInternal
        self.connectTimeout = connectTimeout
        self.attemptTimeout = attemptTimeout
        self.attempts = attempts
        self.backoff = backoff
        self.maxBackoff = maxBackoff
        self.circuitFailures = circuitFailures
        self.circuitOpen = circuitOpen
        self.concurrency = concurrency
        self.location = location
    }

    /// The configuration key of the base URL.
    public var urlKey: String { "baton.service.\(name).url" }
    /// The configuration key of the bearer token.
    public var tokenKey: String { "baton.service.\(name).token" }
    /// The configuration key of the HMAC secret.
    public var secretKey: String { "baton.service.\(name).secret" }
    /// The environment variable of a configuration key (`baton.service.tracking.url` →
    /// `BATON_SERVICE_TRACKING_URL`).
    public static func environmentName(_ key: String) -> String {
        key.uppercased().replacingOccurrences(of: ".", with: "_").replacingOccurrences(of: "-", with: "_")
    }

    /// The longest a call can take, every attempt and backoff included: how long a session
    /// waiting on it is left alone before another request may take the call over.
    public func worstCase(attemptTimeout override: Duration? = nil) -> Duration {
        let attempt = (override ?? attemptTimeout) + connectTimeout
        var total = attempt * attempts
        var wait = backoff
        for _ in 1..<max(1, attempts) {
            total += wait
            wait = min(wait * 2, maxBackoff)
        }
        return total
    }
}

/// Reads `Flows/services.yaml`.
public enum ServiceDefinitions {
    public static let fileName = "services.yaml"

    public enum Keys {
        public static let top: Set<String> = ["services"]
        public static let service: Set<String> = ["auth", "internal", "timeout", "retry", "circuit", "concurrency", "description"]
        public static let timeout: Set<String> = ["connect", "attempt"]
        public static let retry: Set<String> = ["attempts", "backoff", "maxBackoff"]
        public static let circuit: Set<String> = ["failures", "open"]
    }

    /// Loads the services from `source` (the file's text), with every problem found.
    public static func load(source: String, file: String) -> ([String: ServiceDefinition], [Diagnostic]) {
        switch YAMLSource.parse(source, file: file) {
        case .failure(let diagnostic): return ([:], [diagnostic])
        case .success(let root):
            var reader = ServicesReader()
            let services = reader.read(root)
            return (services, reader.diagnostics)
        }
    }

    /// Parses `250ms`, `2s`, `1m`.
    static func duration(_ text: String) -> Duration? {
        if text.hasSuffix("ms"), let amount = Int(text.dropLast(2)), amount >= 0 { return .milliseconds(amount) }
        if text.hasSuffix("s"), let amount = Int(text.dropLast()), amount >= 0 { return .seconds(amount) }
        if text.hasSuffix("m"), let amount = Int(text.dropLast()), amount >= 0 { return .seconds(amount * 60) }
        return nil
    }
}

private struct ServicesReader: ShapeReader {
    var diagnostics: [Diagnostic] = []

    mutating func error(_ message: String, _ location: SourceLocation) {
        diagnostics.append(.error(message, at: location))
    }

    mutating func read(_ root: SourceNode) -> [String: ServiceDefinition] {
        _ = pairs(root, allowed: ServiceDefinitions.Keys.top, what: "services.yaml")
        guard let servicesNode = root["services"] else {
            error("services.yaml needs 'services:', a mapping of service names to settings", root.location)
            return [:]
        }
        guard case .mapping(let entries, _) = servicesNode else {
            error("'services' must map service names to settings", servicesNode.location)
            return [:]
        }
        var services: [String: ServiceDefinition] = [:]
        for (key, node) in entries {
            let name = key.text
            guard !name.isEmpty, name.count <= 40, name.first!.isLetter,
                name.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "_") })
            else {
                error("service name '\(name)' must be lowercase letters, digits or '_' (it names configuration keys)", key.location)
                continue
            }
            services[name] = service(name, node, at: key.location)
        }
        return services
    }

    private mutating func duration(_ node: SourceNode?, _ what: String, within range: ClosedRange<Duration>) -> Duration? {
        guard let scalar = text(node, what) else { return nil }
        guard let value = ServiceDefinitions.duration(scalar.text), range.contains(value) else {
            error("\(what) must be a duration such as 500ms or 2s, between \(range.lowerBound) and \(range.upperBound); found '\(scalar.text)'", scalar.location)
            return nil
        }
        return value
    }

    private mutating func service(_ name: String, _ node: SourceNode, at location: SourceLocation) -> ServiceDefinition {
        var service = ServiceDefinition(name: name, location: location)
        if case .scalar = node { return service }
        _ = pairs(node, allowed: ServiceDefinitions.Keys.service, what: "service '\(name)'")
        if let auth = text(node["auth"], "auth") {
            switch auth.text {
            case "none": service.auth = .none
            case "bearer": service.auth = .bearer
            case "hmac": service.auth = .hmac
            default: error("auth must be none, bearer or hmac; found '\(auth.text)'", auth.location)
            }
        }
        if let isInternal = bool(node["internal"], "internal") { service.isInternal = isInternal }
        if let timeout = node["timeout"] {
            _ = pairs(timeout, allowed: ServiceDefinitions.Keys.timeout, what: "timeout")
            if let value = duration(timeout["connect"], "timeout.connect", within: .milliseconds(10) ... .seconds(30)) {
                service.connectTimeout = value
            }
            if let value = duration(timeout["attempt"], "timeout.attempt", within: .milliseconds(10) ... .seconds(30)) {
                service.attemptTimeout = value
            }
        }
        if let retry = node["retry"] {
            _ = pairs(retry, allowed: ServiceDefinitions.Keys.retry, what: "retry")
            if let attempts = int(retry["attempts"], "retry.attempts", minimum: 1) {
                if attempts > 10 { error("retry.attempts must be 1–10", retry.location) } else { service.attempts = attempts }
            }
            if let value = duration(retry["backoff"], "retry.backoff", within: .zero ... .seconds(10)) { service.backoff = value }
            if let value = duration(retry["maxBackoff"], "retry.maxBackoff", within: .zero ... .seconds(30)) { service.maxBackoff = value }
        }
        if let circuit = node["circuit"] {
            _ = pairs(circuit, allowed: ServiceDefinitions.Keys.circuit, what: "circuit")
            if let failures = int(circuit["failures"], "circuit.failures", minimum: 1) { service.circuitFailures = failures }
            if let value = duration(circuit["open"], "circuit.open", within: .milliseconds(100) ... .seconds(3600)) {
                service.circuitOpen = value
            }
        }
        if let concurrency = int(node["concurrency"], "concurrency", minimum: 1) { service.concurrency = min(concurrency, 1024) }
        return service
    }
}
