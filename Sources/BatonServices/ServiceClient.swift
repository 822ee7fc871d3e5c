import AsyncHTTPClient
import BatonFlows
import BatonJSON
import Crypto
import Dispatch
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Synchronization

/// Where a service client reports what happened (Prometheus in the server).
public protocol ServiceMetrics: Sendable {
    /// One call ended: `outcome` is the status class (`2xx`, `4xx`, …) or the failure name.
    func callFinished(service: String, outcome: String, duration: Duration)
    /// The service's circuit opened or closed.
    func circuitChanged(service: String, isOpen: Bool)
}

/// Metrics that go nowhere.
public struct NoServiceMetrics: ServiceMetrics {
    public init() {}
    public func callFinished(service: String, outcome: String, duration: Duration) {}
    public func circuitChanged(service: String, isOpen: Bool) {}
}

/// Calls the backend services of `services.yaml` over HTTP (AsyncHTTPClient): per-attempt
/// timeouts, retries with exponential backoff and jitter, a circuit breaker, a concurrency
/// limit, and an egress rule, all per service. Never throws: every failure is a
/// ``ServiceFailure`` the flow handles. Logs never carry bodies, tokens or signatures.
public final class ServiceClient: ServiceCaller {
    /// One service as configured: its declaration and where it lives.
    public struct Endpoint: Sendable {
        public var definition: ServiceDefinition
        /// `http(s)://host[:port][/base/path]`, without a trailing slash.
        public var baseURL: String
        public var host: String
        /// The bearer token or HMAC secret, for `auth: bearer` / `auth: hmac`.
        public var secret: String?

        /// Checks a configured base URL: http or https, a host, no user info, query or fragment.
        public init(definition: ServiceDefinition, baseURL: String, secret: String? = nil) throws(ServiceConfigurationError) {
            guard let components = URLComponents(string: baseURL), let scheme = components.scheme?.lowercased(),
                scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
            else {
                throw ServiceConfigurationError("\(definition.urlKey) must be an http:// or https:// URL with a host; got '\(baseURL.prefix(80))'")
            }
            guard components.user == nil, components.password == nil, components.query == nil, components.fragment == nil else {
                throw ServiceConfigurationError("\(definition.urlKey) must not carry user info, a query or a fragment (secrets go in \(definition.tokenKey))")
            }
            if definition.auth != .none, (secret ?? "").isEmpty {
                let key = definition.auth == .bearer ? definition.tokenKey : definition.secretKey
                throw ServiceConfigurationError(
                    "service '\(definition.name)' uses auth \(definition.auth == .bearer ? "bearer" : "hmac"): set \(key) (\(ServiceDefinition.environmentName(key)))")
            }
            self.definition = definition
            var trimmed = baseURL
            while trimmed.hasSuffix("/") { trimmed.removeLast() }
            self.baseURL = trimmed
            self.host = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
            self.secret = secret
        }
    }

    private let settings: @Sendable (String) -> String?
    private let services = Mutex<[String: Service]>([:])
    private let metrics: any ServiceMetrics
    private let logger: Logger
    private let resolve: @Sendable (String) -> [String]

    /// - Parameters:
    ///   - settings: reads a configuration key (`baton.service.<name>.url`, `.token`, `.secret`).
    ///   - resolve: the addresses a host name stands for (the egress rule checks them all); the
    ///     system resolver by default.
    public init(
        settings: @escaping @Sendable (String) -> String?, metrics: any ServiceMetrics = NoServiceMetrics(), logger: Logger,
        resolve: @escaping @Sendable (String) -> [String] = EgressRule.resolve
    ) {
        self.settings = settings
        self.metrics = metrics
        self.logger = logger
        self.resolve = resolve
    }

    /// The endpoint `definition` is configured with, or why it cannot be called.
    public func endpoint(for definition: ServiceDefinition) throws(ServiceConfigurationError) -> Endpoint {
        guard let url = settings(definition.urlKey), !url.isEmpty else {
            throw ServiceConfigurationError(
                "service '\(definition.name)' has no address: set \(definition.urlKey) (\(ServiceDefinition.environmentName(definition.urlKey)))")
        }
        let secret: String? =
            switch definition.auth {
            case .none: nil
            case .bearer: settings(definition.tokenKey)
            case .hmac: settings(definition.secretKey)
            }
        return try Endpoint(definition: definition, baseURL: url, secret: secret)
    }

    /// Whether the service's circuit is open now.
    public func isCircuitOpen(_ service: String) -> Bool { services.withLock { $0[service] }?.isCircuitOpen ?? false }

    /// The client of a service as `definition` declares it: made on first use, and again when a
    /// release changes the declaration (its breaker and limit start afresh).
    private func service(for definition: ServiceDefinition) throws(ServiceConfigurationError) -> Service {
        if let existing = services.withLock({ $0[definition.name] }), existing.endpoint.definition == definition { return existing }
        let fresh = Service(endpoint: try endpoint(for: definition), resolve: resolve)
        return services.withLock { services in
            // Two first calls at once: the first one stored wins, so both share one breaker.
            if let raced = services[definition.name], raced.endpoint.definition == definition { return raced }
            services[definition.name] = fresh
            return fresh
        }
    }

    public func call(_ request: ServiceRequest, service definition: ServiceDefinition) async -> ServiceResult {
        let started = ContinuousClock.now
        let service: Service
        do {
            service = try self.service(for: definition)
        } catch {
            logger.error("a flow called a service that is not configured", metadata: ["service": .string(request.service), "problem": .string(error.description)])
            metrics.callFinished(service: request.service, outcome: ServiceFailure.refused.rawValue, duration: ContinuousClock.now - started)
            return .failure(.refused)
        }
        let result = await service.call(request, logger: logger, metrics: metrics)
        let label: String
        switch result {
        case .response(let status, _): label = "\(status / 100)xx"
        case .failure(let failure): label = failure.rawValue
        }
        metrics.callFinished(service: request.service, outcome: label, duration: ContinuousClock.now - started)
        return result
    }
}

/// A service's configuration is unusable (reported before `serve` starts).
public struct ServiceConfigurationError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// One configured service: its HTTP client, breaker and concurrency limit.
private final class Service: Sendable {
    let endpoint: ServiceClient.Endpoint
    let http: HTTPClient
    /// One circuit per attempt timeout its callers give the service: a caller that waits 800 ms
    /// (a screen load) learns from its own timeouts and fails fast once they pile up, and its
    /// failures do not refuse callers that wait 2 s (a flow's call). Other failures (a 5xx, a
    /// lost connection) count in the caller's own circuit.
    private let breakers = Mutex<[Int64: CircuitBreaker]>([:])
    let slots: ConcurrencyLimit
    let resolve: @Sendable (String) -> [String]
    var definition: ServiceDefinition { endpoint.definition }

    init(endpoint: ServiceClient.Endpoint, resolve: @escaping @Sendable (String) -> [String]) {
        self.endpoint = endpoint
        self.resolve = resolve
        self.http = Self.httpClient(connectTimeout: endpoint.definition.connectTimeout)
        self.slots = ConcurrencyLimit(endpoint.definition.concurrency)
    }

    /// The circuit of callers that give the service `timeout` per attempt.
    func breaker(for timeout: Duration) -> CircuitBreaker {
        breakers.withLock { breakers in
            if let breaker = breakers[timeout.nanoseconds] { return breaker }
            let breaker = CircuitBreaker(failures: definition.circuitFailures, open: definition.circuitOpen)
            breakers[timeout.nanoseconds] = breaker
            return breaker
        }
    }

    /// Whether any of the service's circuits is open.
    var isCircuitOpen: Bool { breakers.withLock { $0.values.contains { $0.isOpen } } }

    /// HTTP clients live as long as the process, like `HTTPClient.shared` (so nothing has to shut
    /// them down, and a release that changes a service reuses its connections): one per
    /// connect timeout, all refusing redirects. Attempt timeouts are per request.
    private static let clients = Mutex<[Int64: HTTPClient]>([:])

    static func httpClient(connectTimeout: Duration) -> HTTPClient {
        clients.withLock { clients in
            if let client = clients[connectTimeout.nanoseconds] { return client }
            var configuration = HTTPClient.Configuration()
            // Baton never follows redirects: a service answers where it was configured, or not at all.
            configuration.redirectConfiguration = .disallow
            configuration.timeout = .init(connect: .nanoseconds(connectTimeout.nanoseconds))
            configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
            let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            clients[connectTimeout.nanoseconds] = client
            return client
        }
    }

    func call(_ request: ServiceRequest, logger: Logger, metrics: any ServiceMetrics) async -> ServiceResult {
        var logger = logger
        logger[metadataKey: "service"] = .string(definition.name)
        logger[metadataKey: "method"] = .string(request.method)
        logger[metadataKey: "path"] = .string(request.path)
        let attemptTimeout = request.timeout ?? definition.attemptTimeout
        let deadline = ContinuousClock.now + (request.budget ?? definition.worstCase(attemptTimeout: request.timeout))
        switch await egressRefusal(waitingUntil: min(deadline, .now + attemptTimeout)) {
        case .allowed: break
        case .refused(let refusal):
            logger.error("service call refused by the egress rule", metadata: ["reason": .string(refusal)])
            return .failure(.refused)
        case .unresolved:
            logger.warning("service call gave up waiting for the service's host to resolve", metadata: ["host": .string(endpoint.host)])
            return .failure(.timeout)
        }
        guard await slots.acquire(within: min(attemptTimeout, deadline - .now)) else {
            logger.warning("service call waited too long for a free slot", metadata: ["concurrency": .stringConvertible(definition.concurrency)])
            return .failure(.timeout)
        }
        defer { slots.release() }
        let breaker = breaker(for: attemptTimeout)
        switch breaker.admit() {
        case .refuse:
            return .failure(.circuitOpen)
        case .admit, .probe:
            break
        }
        // Writes are retried only with an idempotency key: without one a retry could apply twice.
        let mayRetry = request.method == "GET" || request.idempotencyKey != nil
        let attempts = mayRetry ? max(1, min(request.attempts ?? definition.attempts, definition.attempts)) : 1
        var wait = definition.backoff
        var last: Attempt = .failure(.failed)
        // Whether an attempt waited out the whole attempt timeout: only that says the service is
        // too slow for this caller. A shorter one (the last of a budget, a cancelled request)
        // says nothing of the service.
        var waitedFullTimeout = false
        for attempt in 1...attempts {
            let sent = ContinuousClock.now
            last = await send(request, timeout: min(attemptTimeout, deadline - .now), logger: logger)
            if case .failure(.timeout, _) = last, ContinuousClock.now - sent >= attemptTimeout { waitedFullTimeout = true }
            logger.debug(
                "service call attempt",
                metadata: ["attempt": .stringConvertible(attempt), "result": .string(last.reason), "duration": .stringConvertible(ContinuousClock.now - sent)])
            // Another attempt only if it can still get a fair share of its timeout in the budget.
            guard last.isRetryable, attempt < attempts, !Task.isCancelled, deadline - .now > wait + attemptTimeout / 4 else { break }
            logger.info("service call failed; retrying", metadata: ["attempt": .stringConvertible(attempt), "reason": .string(last.reason)])
            // Exponential backoff with "equal jitter": half the step fixed, half random.
            let step = wait.nanoseconds
            try? await Task.sleep(for: .nanoseconds(step / 2 + Int64.random(in: 0...max(0, step / 2))))
            wait = min(wait * 2, definition.maxBackoff)
        }
        let result = last.result
        let failed: Bool?
        switch result {
        case .response(let status, _): failed = status >= 500
        case .failure(.timeout): failed = waitedFullTimeout ? true : nil
        case .failure(let failure): failed = failure == .failed
        }
        let wasOpen = isCircuitOpen
        var change: Bool?
        if let failed { change = breaker.record(success: !failed) } else { breaker.abstain() }
        if let change {
            let timeout = ["attempt.timeout": Logger.MetadataValue.stringConvertible(attemptTimeout)]
            if change {
                let open = ["open.seconds": Logger.MetadataValue.stringConvertible(definition.circuitOpen.components.seconds)]
                logger.error("service circuit opened", metadata: timeout.merging(open) { $1 })
            } else {
                logger.notice("service circuit closed", metadata: timeout)
            }
            // The gauge says whether any of the service's circuits is open.
            if isCircuitOpen != wasOpen { metrics.circuitChanged(service: definition.name, isOpen: !wasOpen) }
        }
        if case .failure(let failure) = result {
            logger.warning("service call failed", metadata: ["failure": .string(failure.rawValue), "reason": .string(last.reason)])
        }
        return result
    }

    /// The egress verdict for the service's host, kept for half a minute. Resolving blocks (and
    /// a resolver that does not answer can take tens of seconds), so it runs on a thread of its
    /// own, once at a time for the service, and a call waits for it only until its deadline or
    /// its cancellation.
    private let verdict = Mutex<(refusal: String?, until: ContinuousClock.Instant)?>(nil)
    /// The lookup under way, if one is: its verdict is the refusal, or nil for allowed.
    private let resolving = Mutex<SharedResult<String?>?>(nil)

    enum EgressVerdict { case allowed, refused(String), unresolved }

    private func egressRefusal(waitingUntil deadline: ContinuousClock.Instant) async -> EgressVerdict {
        if definition.isInternal { return .allowed }
        if let cached = verdict.withLock({ $0 }), cached.until > .now { return cached.refusal.map(EgressVerdict.refused) ?? .allowed }
        let (resolution, start) = resolving.withLock { current -> (SharedResult<String?>, Bool) in
            if let current { return (current, false) }
            let fresh = SharedResult<String?>()
            current = fresh
            return (fresh, true)
        }
        if start {
            let (host, resolve) = (endpoint.host, self.resolve)
            DispatchQueue.global().async { [self] in
                let refusal = EgressRule.refusal(host: host, isInternal: false, resolve: resolve)
                verdict.withLock { $0 = (refusal, .now + .seconds(30)) }
                resolving.withLock { $0 = nil }
                resolution.finish(refusal)
            }
        }
        guard let refusal = await resolution.value(until: deadline) else { return .unresolved }
        return refusal.map(EgressVerdict.refused) ?? .allowed
    }

    /// One attempt's result.
    enum Attempt {
        case response(status: Int, body: JSONValue)
        case failure(ServiceFailure, reason: String = "")

        static func failure(_ failure: ServiceFailure) -> Attempt { .failure(failure, reason: failure.rawValue) }

        /// Connect errors, timeouts and 502/503/504 are worth another attempt.
        var isRetryable: Bool {
            switch self {
            case .response(let status, _): [502, 503, 504].contains(status)
            case .failure(let failure, _): failure == .timeout || failure == .failed
            }
        }

        var reason: String {
            switch self {
            case .response(let status, _): "status \(status)"
            case .failure(let failure, let reason): reason.isEmpty ? failure.rawValue : reason
            }
        }

        var result: ServiceResult {
            switch self {
            case .response(let status, let body): .response(status: status, body: body)
            case .failure(let failure, _): .failure(failure)
            }
        }
    }

    /// The largest response body read (a bigger one is `bad_response`).
    static let bodyLimit = 1 << 20

    private func send(_ request: ServiceRequest, timeout: Duration, logger: Logger) async -> Attempt {
        var http = HTTPClientRequest(url: endpoint.baseURL + request.target)
        http.method = HTTPMethod(rawValue: request.method)
        http.headers.add(name: "Accept", value: "application/json")
        http.headers.add(name: "User-Agent", value: "baton")
        var body: [UInt8] = []
        if let json = request.body, request.method != "GET" {
            body = JSONEncoding.encode(json)
            http.headers.add(name: "Content-Type", value: "application/json")
            http.body = .bytes(ByteBuffer(bytes: body))
        }
        if let key = request.idempotencyKey { http.headers.add(name: "Idempotency-Key", value: key) }
        switch definition.auth {
        case .none: break
        case .bearer: http.headers.add(name: "Authorization", value: "Bearer \(endpoint.secret ?? "")")
        case .hmac:
            let timestamp = String(Int(Date().timeIntervalSince1970))
            var message = Array("\(timestamp)\n\(request.method)\n\(request.target)\n".utf8)
            message += body
            let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array((endpoint.secret ?? "").utf8)))
            http.headers.add(name: "X-Baton-Timestamp", value: timestamp)
            http.headers.add(name: "X-Baton-Signature", value: "sha256=" + Hex.encode(bytesOf: mac))
        }
        return await Self.within(timeout) { [http, client = self.http, connect = definition.connectTimeout] in
            await Self.exchange(http, client: client, timeout: timeout, connectTimeout: connect)
        }
    }

    /// Runs one attempt, or answers a timeout once `timeout` has passed, whatever stage the
    /// attempt is at. AsyncHTTPClient's own deadline ends when the response's head arrives; a
    /// service that sends its head and then stalls or trickles its body would otherwise hold
    /// the attempt (and its concurrency slot) until the request's deadline.
    static func within(_ timeout: Duration, _ attempt: @escaping @Sendable () async -> Attempt) async -> Attempt {
        let first = await withTaskGroup(of: Attempt?.self) { group in
            group.addTask { await attempt() }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        return first ?? .failure(.timeout, reason: "no whole answer within \(timeout)")
    }

    /// The deepest a service's JSON body may nest: it is kept in the session's context (as
    /// `result`, one level down), which is read back with the parser's default limit of 64.
    static let bodyDepth = 48

    private static func exchange(_ http: HTTPClientRequest, client: HTTPClient, timeout: Duration, connectTimeout: Duration) async -> Attempt {
        do {
            let response = try await client.execute(http, timeout: .nanoseconds(Int64(timeout.nanoseconds)))
            let status = Int(response.status.code)
            // A final answer is 2xx to 5xx (RFC 9110 §15): a 101 (the connection switched to
            // another protocol) or a code past 599 is none, and would be counted as `1xx` or `9xx`.
            guard (200..<600).contains(status) else {
                return .failure(.failed, reason: "the service answered with status \(status), which is no final HTTP answer")
            }
            if (300..<400).contains(status) {
                // A redirect could send the call (and its credentials) elsewhere: never followed.
                return .failure(.refused, reason: "the service answered with a redirect (\(status)), which Baton does not follow")
            }
            let bytes: ByteBuffer
            do {
                bytes = try await response.body.collect(upTo: Self.bodyLimit)
            } catch is NIOTooManyBytesError {
                return status < 300 ? .failure(.badResponse, reason: "the body is larger than 1 MiB") : .response(status: status, body: .null)
            } catch {
                // The answer broke off (or the attempt's time ran out, which `within` answers):
                // whether the request was applied is unknown, so this is a failed attempt
                // (retried: a write carries its idempotency key).
                return .failure(.failed, reason: "the answer broke off: \(type(of: error))")
            }
            let raw = Array(bytes.readableBytesView)
            if raw.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .response(status: status, body: .null) }
            // A body the session cannot keep is no answer: nested past `bodyDepth`, or with a
            // NUL character (`\u0000`), which PostgreSQL's jsonb refuses.
            guard let json = try? JSONValue.parse(raw, maxDepth: Self.bodyDepth), !json.containsNUL else {
                // Only a success's body matters to the flow; an error page is just the status.
                return status < 300
                    ? .failure(.badResponse, reason: "the body is not JSON a session can keep (over \(Self.bodyDepth) levels deep, or a NUL)")
                    : .response(status: status, body: .null)
            }
            return .response(status: status, body: json)
        } catch let error as HTTPClientError where [.deadlineExceeded, .readTimeout, .connectTimeout].contains(error) {
            return .failure(.timeout, reason: "no answer within \(timeout)")
        } catch let error as ChannelError {
            if case .connectTimeout = error { return .failure(.timeout, reason: "could not connect within \(connectTimeout)") }
            return .failure(.failed, reason: "connection: \(error)")
        } catch is CancellationError {
            return .failure(.timeout, reason: "cancelled")
        } catch {
            return .failure(.failed, reason: "\(type(of: error)): \(String(describing: error).prefix(120))")
        }
    }
}

extension Duration {
    var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}

/// Consecutive failures open the circuit for a while; then one probe call is let through, and
/// its result closes the circuit or opens it again.
final class CircuitBreaker: Sendable {
    enum Admission { case admit, probe, refuse }

    private struct State {
        var failures = 0
        var openUntil: ContinuousClock.Instant?
        var probing = false
    }

    private let threshold: Int
    private let openFor: Duration
    private let state = Mutex(State())

    init(failures: Int, open: Duration) {
        self.threshold = failures
        self.openFor = open
    }

    var isOpen: Bool { state.withLock { $0.openUntil != nil } }

    func admit() -> Admission {
        state.withLock { state in
            guard let until = state.openUntil else { return .admit }
            if ContinuousClock.now < until || state.probing { return .refuse }
            state.probing = true
            return .probe
        }
    }

    /// A call that says nothing of the service's health (it timed out before the service's own
    /// attempt timeout): nothing is counted; if it was the probe, the next call probes.
    func abstain() {
        state.withLock { $0.probing = false }
    }

    /// Records a call's result; returns true when the circuit just opened, false when it just
    /// closed, nil when nothing changed.
    func record(success: Bool) -> Bool? {
        state.withLock { state in
            let wasOpen = state.openUntil != nil
            state.probing = false
            if success {
                state.failures = 0
                state.openUntil = nil
                return wasOpen ? false : nil
            }
            state.failures += 1
            if wasOpen || state.failures >= threshold {
                state.openUntil = .now + openFor
                return wasOpen ? nil : true
            }
            return nil
        }
    }
}

/// At most `limit` calls at once; others wait their turn, for a bounded time.
final class ConcurrencyLimit: Sendable {
    private struct State {
        var available: Int
        var waiters: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID = 0
    }

    private let state: Mutex<State>

    init(_ limit: Int) { state = Mutex(State(available: limit)) }

    /// Takes a slot, waiting at most `timeout`; false if none came free.
    func acquire(within timeout: Duration) async -> Bool {
        let taken = state.withLock { state -> Bool in
            guard state.available > 0 else { return false }
            state.available -= 1
            return true
        }
        if taken { return true }
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withCheckedContinuation { continuation in
            // Checked again under the same lock as the queueing, so a release in between is not missed.
            let immediate = state.withLock { state -> Bool in
                if state.available > 0 {
                    state.available -= 1
                    return true
                }
                state.waiters.append((id, continuation))
                return false
            }
            if immediate { return continuation.resume(returning: true) }
            Task {
                try? await Task.sleep(for: timeout)
                let expired = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                    guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                    return state.waiters.remove(at: index).continuation
                }
                expired?.resume(returning: false)
            }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.waiters.isEmpty {
                state.available += 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}
