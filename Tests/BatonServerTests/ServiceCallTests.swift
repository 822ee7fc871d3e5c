import BatonBuiltinFlows
import BatonFlows
import BatonJSON
import BatonPostgres
import BatonRuntime
import BatonScenarios
import BatonServer
import BatonServices
import BatonTestSupport
import Crypto
import Foundation
import HTTPTypes
import HummingbirdTesting
import Logging
import NIOCore
import Synchronization
import Testing

/// Issue 13: flows call backend services. The client against a real HTTP server the tests
/// start (retries, backoff, the circuit, timeouts, egress), and the runtime's two transactions
/// around a call (exactly once across the network, no connection held while it is in flight).
@Suite("Service calls")
struct ServiceCallTests {
    static var logger: Logger {
        var logger = Logger(label: "service-test")
        logger.logLevel = ProcessInfo.processInfo.environment["BATON_TEST_LOG"] != nil ? .debug : .critical
        return logger
    }

    static func client(
        _ server: TrackingServer, metrics: any ServiceMetrics = NoServiceMetrics(), logger: Logger = Self.logger,
        resolve: @escaping @Sendable (String) -> [String] = EgressRule.resolve
    ) -> ServiceClient {
        let url = server.baseURL
        return ServiceClient(
            settings: { $0 == "baton.service.tracking.url" ? url : ($0 == "baton.service.tracking.token" ? "sesame" : nil) },
            metrics: metrics, logger: logger, resolve: resolve)
    }

    static func tracking(
        internal isInternal: Bool = true, attempts: Int = 3, attempt: Duration = .seconds(2), backoff: Duration = .milliseconds(100),
        failures: Int = 5, open: Duration = .seconds(30), auth: ServiceDefinition.Auth = .none
    ) -> ServiceDefinition {
        ServiceDefinition(
            name: "tracking", auth: auth, isInternal: isInternal, connectTimeout: .seconds(1), attemptTimeout: attempt, attempts: attempts,
            backoff: backoff, maxBackoff: .seconds(1), circuitFailures: failures, circuitOpen: open)
    }

    static func get(_ code: String) -> ServiceRequest { ServiceRequest(service: "tracking", method: "GET", path: "/v1/parcels/\(code)") }

    // MARK: - The client

    @Test("503s are retried with exponential backoff until an attempt succeeds; a keyless write is never retried")
    func retries() async throws {
        let server = try await TrackingServer()
        let client = Self.client(server)
        server.configure { $0.failNext = 2 }
        let started = ContinuousClock.now
        let result = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(backoff: .milliseconds(200)))
        let elapsed = ContinuousClock.now - started
        guard case .response(200, let body) = result else { Issue.record("expected 200, got \(result)"); return }
        #expect(body["code"] == "3SDEMO0000001")
        #expect(server.requests.count == 3, "two 503s, then the answer")
        // Equal jitter: at least half of each step (200 ms, then 400 ms) is waited.
        #expect(elapsed >= .milliseconds(300), "backoff was waited: \(elapsed)")

        server.configure { $0.failNext = 3 }
        let exhausted = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(attempts: 3, backoff: .milliseconds(10)))
        #expect(exhausted == .response(status: 503, body: .null), "after every attempt the last status stands")
        #expect(server.requests.count == 6)

        server.configure { $0.failNext = 1 }
        let write = ServiceRequest(service: "tracking", method: "POST", path: "/v1/parcels/3SDEMO0000001/redirect", body: ["location": "UT-0001"])
        let unkeyed = await client.call(write, service: Self.tracking())
        #expect(unkeyed == .response(status: 503, body: .null))
        #expect(server.requests.count == 7, "a write without an idempotency key is sent once")
        await server.stop()
    }

    @Test("consecutive failures open the circuit: calls fail fast without reaching the service; a probe after the pause closes it")
    func circuit() async throws {
        let server = try await TrackingServer()
        let metrics = BatonMetrics()
        let client = Self.client(server, metrics: metrics)
        let service = Self.tracking(attempts: 1, failures: 2, open: .milliseconds(600))
        func gauge() -> Bool { String(decoding: metrics.render(), as: UTF8.self).contains(#"baton_service_circuit_open{service="tracking"} 1"#) }
        server.configure { $0.forceStatus = 500 }
        for _ in 0..<2 { _ = await client.call(Self.get("3SDEMO0000001"), service: service) }
        #expect(client.isCircuitOpen("tracking"))
        #expect(gauge(), "the open circuit is on /metrics")
        let refused = await client.call(Self.get("3SDEMO0000001"), service: service)
        #expect(refused == .failure(.circuitOpen))
        #expect(server.requests.count == 2, "an open circuit sends nothing")

        server.configure { $0.forceStatus = nil }
        try await Task.sleep(for: .milliseconds(700))
        let probe = await client.call(Self.get("3SDEMO0000001"), service: service)
        guard case .response(200, _) = probe else { Issue.record("the probe should pass: \(probe)"); return }
        #expect(!client.isCircuitOpen("tracking"))
        #expect(!gauge())
        #expect(server.requests.count == 3)
        await server.stop()
    }

    @Test("callers with a shorter timeout (screen loads) have their own circuit: their timeouts make them fail fast, and refuse no caller that waits longer")
    func circuitPerTimeout() async throws {
        let server = try await TrackingServer()
        let metrics = BatonMetrics()
        let client = Self.client(server, metrics: metrics)
        server.configure { $0.delay = .milliseconds(600) }
        let service = Self.tracking(attempts: 1, attempt: .seconds(2), failures: 2)
        var quick = Self.get("3SDEMO0000001")
        quick.timeout = .milliseconds(200)
        for _ in 0..<2 { #expect(await client.call(quick, service: service) == .failure(.timeout)) }
        #expect(await client.call(quick, service: service) == .failure(.circuitOpen), "the impatient callers' circuit is open: they fail fast")
        #expect(server.requests.count == 2)
        #expect(String(decoding: metrics.render(), as: UTF8.self).contains(#"baton_service_circuit_open{service="tracking"} 1"#))
        // A service that answers in 600 ms is healthy for a caller allowed 2 s.
        guard case .response(200, _) = await client.call(Self.get("3SDEMO0000001"), service: service) else {
            Issue.record("a caller with the service's own timeout gets its answer")
            return
        }
        await server.stop()
    }

    /// A service that does not answer in time, one way or another.
    enum Silence: String, CaseIterable, Sendable {
        /// Nothing comes back.
        case silent
        /// The head and the body's first bytes come at once, the rest 5 s later.
        case stalledBody
    }

    @Test("a silent service, or one that stalls mid-body, is a timeout within attempts × the attempt timeout, retried, never a hang", arguments: Silence.allCases)
    func timeouts(_ silence: Silence) async throws {
        let server = try await TrackingServer()
        let client = Self.client(server)
        server.configure { behaviour in
            switch silence {
            case .silent: behaviour.delay = .seconds(5)
            case .stalledBody: behaviour.stallBody = .seconds(5)
            }
        }
        let started = ContinuousClock.now
        let result = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(attempts: 2, attempt: .milliseconds(300), backoff: .milliseconds(50)))
        let elapsed = ContinuousClock.now - started
        #expect(result == .failure(.timeout))
        #expect(server.requests.count == 2, "a timeout is retried")
        #expect(elapsed < .seconds(3), "bounded by the attempts' timeouts, not the service's 5 s: \(elapsed)")
        await server.stop()
    }

    @Test("a body that trickles in within the attempt's time is an answer")
    func slowBody() async throws {
        let server = try await TrackingServer()
        let client = Self.client(server)
        server.configure { $0.stallBody = .milliseconds(100) }
        guard case .response(200, let body) = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(attempts: 1)) else {
            Issue.record("a slow body within the attempt's time is an answer")
            return
        }
        #expect(body["code"] == "3SDEMO0000001")
        await server.stop()
    }

    @Test("a body a session cannot keep (a NUL character, or nested past 48 levels) is bad_response; an error page's is dropped")
    func unkeepableBodies() async throws {
        let server = try await TrackingServer()
        let client = Self.client(server)
        let service = Self.tracking(attempts: 1)
        func answer(_ body: String, status: Int? = nil) async -> ServiceResult {
            server.configure { $0.parcelBody = Array(body.utf8) }
            return await client.call(Self.get("3SDEMO0000001"), service: service)
        }
        #expect(await answer(#"{"code":"3SDEMO0000001","status":"On\u0000its way"}"#) == .failure(.badResponse))
        #expect(await answer(#"{"code":"3SDEMO0000001","\u0000":1}"#) == .failure(.badResponse), "in a member's name too")
        #expect(await answer(String(repeating: "[", count: 49) + String(repeating: "]", count: 49)) == .failure(.badResponse))
        let deepest = String(repeating: "[", count: 48) + String(repeating: "]", count: 48)
        guard case .response(200, _) = await answer(deepest) else {
            Issue.record("48 levels are kept")
            return
        }
        #expect(await answer(#"{"status":"On\u0001its way"}"#) == .response(status: 200, body: ["status": "On\u{01}its way"]))
        await server.stop()
    }

    @Test("egress: private and loopback addresses only for internal services; names resolving to them too; redirects are not followed")
    func egress() async throws {
        let server = try await TrackingServer()
        let external = Self.tracking(internal: false)
        let client = Self.client(server)
        #expect(await client.call(Self.get("3SDEMO0000001"), service: external) == .failure(.refused))
        #expect(server.requests.isEmpty, "nothing left for a refused address")

        // A public-looking name that resolves to the metadata address or a private one.
        for address in ["169.254.169.254", "10.1.2.3", "192.168.0.7", "::1", "fd00::1", "::ffff:127.0.0.1"] {
            #expect(EgressRule.refusal(host: "tracking.example.com", isInternal: false, resolve: { _ in [address] }) != nil, "\(address)")
        }
        #expect(EgressRule.refusal(host: "tracking.example.com", isInternal: false, resolve: { _ in ["93.184.216.34"] }) == nil)
        #expect(EgressRule.refusal(host: "10.0.0.1", isInternal: true, resolve: { _ in [] }) == nil)

        // Only http(s) base URLs with a host, without credentials, query or fragment.
        for bad in ["ftp://tracking", "http://user:pw@tracking", "http://tracking/?x=1", "tracking", "http:///v1"] {
            #expect(throws: ServiceConfigurationError.self) { try ServiceClient.Endpoint(definition: external, baseURL: bad) }
        }
        // A path built from input cannot leave the service's path: references are one encoded segment.
        let spec = ServiceCallSpec(
            service: "tracking", method: "GET", path: try TemplateString(parsing: "/v1/parcels/{{input.value}}"),
            location: SourceLocation(file: "x", line: 1, column: 1))
        let rendered = spec.render(TemplateScope(["input": ["value": "../../admin?x=1#y"]]))
        #expect(rendered.path == "/v1/parcels/%2E%2E%2F%2E%2E%2Fadmin%3Fx%3D1%23y")
        await server.stop()
    }

    @Test("a host that resolves slowly (a resolver gone silent) is a timeout within the call's time, and one lookup serves the calls waiting meanwhile")
    func slowResolution() async throws {
        let server = try await TrackingServer()
        let lookups = Mutex(0)
        let url = "http://tracking.example.test:\(server.port)"
        let client = ServiceClient(
            settings: { $0 == "baton.service.tracking.url" ? url : nil }, logger: Self.logger,
            resolve: { _ in
                lookups.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: 3)
                return ["93.184.216.34"]
            })
        let service = Self.tracking(internal: false, attempts: 1, attempt: .milliseconds(300))
        let started = ContinuousClock.now
        async let first = client.call(Self.get("3SDEMO0000001"), service: service)
        async let second = client.call(Self.get("3SDEMO0000001"), service: service)
        let (a, b) = await (first, second)
        #expect(a == .failure(.timeout) && b == .failure(.timeout))
        #expect(ContinuousClock.now - started < .seconds(2), "bounded by the call's time, not the resolver's 3 s")
        #expect(lookups.withLock { $0 } == 1, "one lookup at a time for a service")
        #expect(server.requests.isEmpty)
        await server.stop()
    }

    @Test("a status that is no final HTTP answer (past 599) is a failed call, counted as failed, never as '9xx'")
    func statusOutOfRange() async throws {
        let server = try await TrackingServer()
        let metrics = BatonMetrics()
        let client = Self.client(server, metrics: metrics)
        server.configure { $0.forceStatus = 999 }
        let result = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(attempts: 1))
        #expect(result == .failure(.failed), "\(result)")
        let text = String(decoding: metrics.render(), as: UTF8.self)
        #expect(text.contains(#"outcome="failed""#) && !text.contains(#"outcome="9xx""#), "\(text)")
        await server.stop()
    }

    @Test("bearer auth sends the configured token; logs and metrics never see it")
    func bearer() async throws {
        let server = try await TrackingServer()
        let log = LogCapture()
        let metrics = BatonMetrics()
        let client = Self.client(server, metrics: metrics, logger: log.logger(level: .trace))
        // A retried attempt and a success: every line the client logs on its way.
        server.configure { $0.failNext = 1 }
        let result = await client.call(Self.get("3SDEMO0000001"), service: Self.tracking(auth: .bearer))
        guard case .response(200, _) = result else { Issue.record("expected 200, got \(result)"); return }
        #expect(server.requestHeaders.count == 2 && server.requestHeaders.allSatisfy { $0["authorization"] == "Bearer sesame" })
        #expect(log.lines.count >= 2, "the retry and the answer are logged: \(log.lines)")
        let logged = log.lines.filter { "\($0.message) \($0.metadata)".contains("sesame") }
        #expect(logged.isEmpty, "\(logged)")
        let exposition = String(decoding: metrics.render(), as: UTF8.self)
        #expect(exposition.contains("tracking"), "the call is counted")
        #expect(!exposition.contains("sesame"))
        await server.stop()
    }

    // MARK: - Flows over HTTP

    /// Flows/services.yaml with the tracking service's attempts allowed 10 s: for tests whose
    /// service answers slowly on purpose, with time to spare on a loaded machine.
    static func patientServices() throws -> String {
        try String(contentsOf: BuiltinFlowsTests.flows.appendingPathComponent("services.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "timeout: { connect: 1s, attempt: 2s }", with: "timeout: { connect: 1s, attempt: 10s }")
    }

    /// The repository's flows against `server`; with `files`, a copy of Flows/ with those
    /// files (path → text) added or replaced. `configure` runs after the tracking URL is set.
    func environment(
        _ server: TrackingServer, poolSize: Int = 4, callWait: Duration = .seconds(5), files: [String: String] = [:],
        configure: (inout BatonConfiguration) -> Void = { _ in }
    ) async throws -> BatonEnvironment {
        var flows = BuiltinFlowsTests.flows
        if !files.isEmpty {
            flows = FileManager.default.temporaryDirectory.appendingPathComponent("flows-services-\(UUID().uuidString)")
            try FileManager.default.copyItem(at: BuiltinFlowsTests.flows, to: flows)
            for (path, text) in files { try text.write(to: flows.appendingPathComponent(path), atomically: true, encoding: .utf8) }
        }
        let url = server.baseURL
        let environment = try await TestApplication.environment(
            poolSize: poolSize, flows: flows, registry: BuiltinFlowsTests.registry(),
            configure: { configuration in
            let configured = configuration.serviceSetting
            configuration.serviceSetting = { $0 == "baton.service.tracking.url" ? url : configured($0) }
            configuration.serviceCallWait = callWait
            configure(&configuration)
        })
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        return environment
    }

    func action(_ answer: JSONValue, titled title: String) throws -> String {
        try #require(ScenarioRunner.payload(titled: title, in: answer), "no action titled \(title) in \(answer)")
    }

    /// Walks to the pickup-point choice for `code`; returns the choice answer.
    func choosePoint(_ client: some TestClientProtocol, code: String, headers: HTTPFields) async throws -> JSONValue {
        let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
        let ask = try await client.command(try action(home, titled: "Track a parcel"), headers: headers).json
        let status = try await client.command(try action(ask, titled: "submit"), input: ["text": .string(code)], headers: headers).json
        #expect(status["screen"]?["title"] == .string("Parcel \(code)"), "\(status)")
        return try await client.command(try action(status, titled: "Deliver to a pickup point"), headers: headers).json
    }

    @Test("track-parcel against the real server: status, then a redirect applied once, with a key derived from session, step and event")
    func trackAndRedirect() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let choice = try await choosePoint(client, code: "3SDEMO0000001", headers: headers)
            let submit = try action(choice, titled: "submit")
            let done = try await client.command(submit, input: ["choice": "UT-0002"], headers: headers)
            #expect(done.json == ["type": "done", "message": "Parcel 3SDEMO0000001 will go to your pickup point; expected 2026-11-27.", "refresh": true])
            #expect(server.redirects == ["3SDEMO0000001": "UT-0002"])
            // A GET carries no body; the POST carries exactly the rendered one.
            let lookup = try #require(server.requestHeaders.first)
            #expect(lookup["content-length"] == nil && lookup["transfer-encoding"] == nil, "\(lookup)")
            #expect(server.requestHeaders.last?["content-length"] == "22", "{\"location\":\"UT-0002\"}")
            let key = try #require(server.requests.last?.key)
            #expect(key.hasPrefix("baton-") && key.count == 38)
            #expect(server.applied == [key: 1])
            // The same tap again is the stored reply; the service is not called again.
            let again = try await client.command(submit, input: ["choice": "UT-0002"], headers: headers)
            #expect(again.headers[.idempotentReplay] == "true")
            #expect(again.body == done.body)
            #expect(server.requests.filter { $0.method == "POST" }.count == 1)
            // Counted per call, by outcome (the lookup and the redirect both answered 2xx).
            let metrics = try await client.execute(uri: "/metrics", method: .get).text
            #expect(metrics.contains(#"baton_service_calls_total{service="tracking",outcome="2xx"} 2"#), "\(metrics)")
            #expect(metrics.contains(#"baton_service_call_duration_seconds_count{service="tracking"} 2"#))
            // Nothing is left marked as calling.
            let calling = try await environment.pool.query("SELECT count(*) FROM flow_sessions WHERE context ? 'calling'")
            #expect(try calling[0].decode(Int.self, at: 0) == 0)
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("404 re-asks with the code; a failing service answers the declared unavailable outcome within the deadline")
    func outcomes() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
            let ask = try await client.command(try action(home, titled: "Track a parcel"), headers: headers).json
            let unknown = try await client.command(try action(ask, titled: "submit"), input: ["text": "3SDEMO0000099"], headers: headers).json
            #expect(unknown["error"] == "We don't know parcel 3SDEMO0000099. Check the code and try again.")
            #expect(unknown["input"]?["value"] == "3SDEMO0000099")

            server.configure { $0.forceStatus = 500 }
            let failed = try await client.command(try action(unknown, titled: "submit"), input: ["text": "3SDEMO0000001"], headers: headers).json
            #expect(failed["type"] == "error")
            #expect(failed["message"] == "Tracking is not answering right now. Try again in a moment.")

            server.configure { $0.forceStatus = nil; $0.delay = .seconds(30) }
            let retry = try await client.command(try action(failed, titled: "retry"), headers: headers).json
            let started = ContinuousClock.now
            let silent = try await client.command(try action(retry, titled: "submit"), input: ["text": "3SDEMO0000001"], headers: headers).json
            #expect(silent["message"] == "Tracking is not answering right now. Try again in a moment.")
            // The call's 8 s budget (3 attempts of 2 s, backoff) plus the command's own work: inside the
            // 10 s request deadline of production, with a margin for this loaded test machine.
            #expect(ContinuousClock.now - started < .seconds(12))
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("a parcel answer the session cannot keep (a NUL character, deep nesting) answers the flow's unavailable outcome, and the step goes on")
    func unkeepableAnswerInAFlow() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            for body in [#"{"code":"3SDEMO0000001","status":"On\u0000its way"}"#, String(repeating: "[", count: 60) + String(repeating: "]", count: 60)] {
                let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
                let ask = try await client.command(try action(home, titled: "Track a parcel"), headers: headers).json
                server.configure { $0.parcelBody = Array(body.utf8) }
                let response = try await client.command(try action(ask, titled: "submit"), input: ["text": "3SDEMO0000001"], headers: headers)
                #expect(response.status == .ok, "\(response.text)")
                #expect(response.json["message"] == "Tracking is not answering right now. Try again in a moment.")
                let calling = try await environment.pool.query("SELECT count(*) FROM flow_sessions WHERE context ? 'calling'")
                #expect(try calling[0].decode(Int.self, at: 0) == 0, "the step was applied; nothing is left calling")
                // The next command on the session still reads its context.
                let retry = try await client.command(try action(response.json, titled: "retry"), headers: headers)
                #expect(retry.status == .ok, "\(retry.text)")
                server.configure { $0.parcelBody = nil }
                let status = try await client.command(try action(retry.json, titled: "submit"), input: ["text": "3SDEMO0000001"], headers: headers).json
                #expect(status["screen"]?["title"] == "Parcel 3SDEMO0000001", "\(status)")
            }
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("calls one after another in one command share the command's budget: the second gets what the first left, not a budget of its own")
    func chainedCallsShareTheBudget() async throws {
        let server = try await TrackingServer()
        let twice = """
            flow: twice
            title: Two lookups
            auth: user
            start: first
            states:
              first:
                call: { service: tracking, path: /v1/parcels/3SDEMO0000001 }
                outcomes: { 2xx: second, unavailable: late }
              second:
                call: { service: tracking, path: /v1/parcels/3SDEMO0000002 }
                outcomes: { 2xx: shown, unavailable: late }
              late:
                error: { message: Out of time. }
              shown:
                done: { message: Both answered. }
            """
        // A request deadline of 8 s: a call budget of 6 s; each attempt may take 10 s.
        let environment = try await environment(server, files: ["twice.yaml": twice, "services.yaml": try Self.patientServices()]) {
            $0.requestTimeout = .seconds(8)
        }
        // Each answer takes 3.5 s: the first fits the budget; the second, with 2.5 s left at most,
        // does not. (Each with a budget of its own, both would answer.)
        server.configure { $0.delay = .milliseconds(3500) }
        let runtime = try #require(environment.runtime)
        let identity = ClientIdentity(user: "henk")
        let profile = ClientProfile(contract: 3)
        let payload = try runtime.mintStart(flow: "twice", parameters: [:], identity: identity, profile: profile)
        let reply = try await runtime.execute(payload: payload, input: .none, identity: identity, profile: profile)
        let answer = try JSONValue.parse(reply.body)
        #expect(answer["message"] == "Out of time.", "\(answer)")
        #expect(server.requests.count <= 2, "no call beyond the step's two")
        await environment.pool.close()
        await server.stop()
    }

    @Test("a path reference that is missing, empty, '.' or '..' is refused before the call leaves (no call to the resource above it); a value is called")
    func emptyPathReference() async throws {
        let server = try await TrackingServer()
        let lookup = """
            flow: lookup
            title: One lookup
            auth: user
            params:
              code: { required: false }
            start: look
            states:
              look:
                call: { service: tracking, method: GET, path: "/v1/parcels/{{params.code}}" }
                outcomes: { 2xx: shown, unavailable: refused }
              refused:
                error: { message: Not looked up. }
              shown:
                done: { message: Looked up. }
            """
        let environment = try await environment(server, files: ["lookup.yaml": lookup])
        let runtime = try #require(environment.runtime)
        let identity = ClientIdentity(user: "henk")
        let profile = ClientProfile(contract: 3)
        // "." and ".." are dot segments even encoded (RFC 3986 §6.2.2.2): a service or a proxy
        // that normalises %2E%2E resolves them to the resource above.
        for parameters: JSONObject in [[:], ["code": .null], ["code": ""], ["code": "."], ["code": ".."]] {
            let payload = try runtime.mintStart(flow: "lookup", parameters: parameters, identity: identity, profile: profile)
            let reply = try await runtime.execute(payload: payload, input: .none, identity: identity, profile: profile)
            #expect(try JSONValue.parse(reply.body)["message"] == "Not looked up.", "\(parameters)")
        }
        #expect(server.requests.isEmpty, "\(server.requests)")
        let payload = try runtime.mintStart(flow: "lookup", parameters: ["code": "3SDEMO0000001"], identity: identity, profile: profile)
        let reply = try await runtime.execute(payload: payload, input: .none, identity: identity, profile: profile)
        #expect(try JSONValue.parse(reply.body)["message"] == "Looked up.")
        #expect(server.requests.count == 1)

        let spec = ServiceCallSpec(
            service: "tracking", method: "GET", path: try TemplateString(parsing: "/v1/parcels/{{params.code}}/events"),
            location: SourceLocation(file: "x", line: 1, column: 1))
        #expect(spec.render(TemplateScope(["params": [:]])).unsendable == "the path's {{params.code}} is empty")
        #expect(spec.render(TemplateScope(["params": ["code": 0]])).unsendable == nil)
        await environment.pool.close()
        await server.stop()
    }

    @Test("a deep link whose flow starts with a service call: a retry with the same Idempotency-Key gets the first answer, during the call and after it, and the service is called once")
    func deepLinkStartingWithACall() async throws {
        let server = try await TrackingServer()
        let flow = """
            flow: parcel-link
            title: A parcel from a link
            auth: any
            params:
              code: { pattern: "^3S[A-Z0-9]{8,11}$" }
            start: lookup
            states:
              lookup:
                call: { service: tracking, path: "/v1/parcels/{{params.code}}" }
                outcomes: { 2xx: shown, unavailable: sorry }
              sorry:
                error: { message: Tracking is not answering. }
              shown:
                done: { message: "Parcel {{result.code}}: {{result.status}}" }
            """
        let links = try String(contentsOf: BuiltinFlowsTests.flows.appendingPathComponent("deeplinks.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "\nlinks:\n", with: "\nlinks:\n" + """
              parcel:
                description: A parcel's status
                urls:
                  - exampleapp://parcel
                query:
                  code: { pattern: "^3S[A-Z0-9]{8,11}$", maxLength: 13 }
                platforms: [appclip, ios, android]
                flow: parcel-link
                params:
                  code: code

            """)
        // 10 s attempts: the 1.5 s answer below must never be retried as an attempt that timed out
        // (under ThreadSanitizer it was, and the service counted a third request).
        let environment = try await environment(
            server, files: ["parcel-link.yaml": flow, "deeplinks.yaml": links, "services.yaml": try Self.patientServices()])
        var headers = deviceHeaders("6d7e8f90-a1b2-4c3d-8e4f-5a6b7c8d9e0f")
        headers[HTTPField.Name("X-Client-Platform")!] = "appclip"
        headers[.contentType] = "application/json"
        let linkHeaders = headers
        try await buildApplication(environment).test(.router) { client in
            @Sendable func resolve(_ code: String, key: String) async throws -> TestResponse {
                var withKey = linkHeaders
                withKey[HTTPField.Name("Idempotency-Key")!] = key
                return try await client.execute(
                    uri: "/v3/deeplinks/resolve", method: .post, headers: withKey,
                    body: ByteBuffer(bytes: JSONEncoding.encode(["url": .string("exampleapp://parcel?code=\(code)")])))
            }
            let first = try await resolve("3SDEMO0000001", key: "tap-1")
            #expect(first.json["message"] == "Parcel 3SDEMO0000001: On its way", "\(first.text)")
            let retry = try await resolve("3SDEMO0000001", key: "tap-1")
            #expect(retry.status == .ok)
            #expect(Array(buffer: retry.body) == Array(buffer: first.body), "\(retry.text)")
            #expect(retry.headers[.idempotentReplay] == "true")
            #expect(server.requests.count == 1, "the retry is answered from the session, not by calling again")

            // A retry while the first request's call is still in flight waits for its answer.
            server.configure { $0.delay = .milliseconds(1500) }
            async let slow = resolve("3SDEMO0000002", key: "tap-2")
            for _ in 0..<100 where server.requests.count < 2 { try await Task.sleep(for: .milliseconds(20)) }
            try #require(server.requests.count == 2, "the first request's call never reached the service: the retry would not be during it")
            let during = try await resolve("3SDEMO0000002", key: "tap-2")
            let original = try await slow
            #expect(original.json["message"] == "Parcel 3SDEMO0000002: On its way", "\(original.text)")
            #expect(Array(buffer: during.body) == Array(buffer: original.body), "\(during.text)")
            #expect(server.requests.count == 2, "one call for the key's two requests")
            #expect(try await environment.pool.query("SELECT count(*) FROM flow_sessions WHERE flow = 'parcel-link'")[0].decode(Int.self, at: 0) == 2)
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("a double tap during a call that outlasts the session's ttl waits for the call's answer, not payload_expired")
    func doubleTapPastTheTTL() async throws {
        let server = try await TrackingServer()
        let flow = """
            flow: quick-lookup
            title: Quick lookup
            auth: user
            ttl: 4s
            start: ask
            states:
              ask:
                input: { title: Code }
                on:
                  submit:
                    call: { service: tracking, path: "/v1/parcels/{{input.value}}" }
                    outcomes: { 2xx: shown, unavailable: sorry }
                  cancel: gone
              sorry:
                error: { message: Tracking is not answering. }
              shown:
                done: { message: "Parcel {{result.code}}" }
              gone:
                done: {}
            """
        // Each attempt may take 10 s; a request deadline of 12 s gives the call its 8 s budget.
        let environment = try await environment(server, files: ["quick-lookup.yaml": flow, "services.yaml": try Self.patientServices()]) {
            $0.requestTimeout = .seconds(12)
        }
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let runtime = try #require(environment.runtime)
            let start = try runtime.mintStart(flow: "quick-lookup", parameters: [:], identity: ClientIdentity(user: "henk"), profile: ClientProfile(contract: 3))
            let ask = try await client.command(start, headers: headers).json
            let submit = try #require(ask.payload("submit"))
            server.configure { $0.delay = .seconds(6) }
            async let first = client.command(submit, input: ["text": "3SDEMO0000001"], headers: headers)
            // Past the session's 4 s (counted from its start, before the tap), while the call is
            // still in flight.
            try await Task.sleep(for: .milliseconds(4500))
            let second = try await client.command(submit, input: ["text": "3SDEMO0000001"], headers: headers)
            let answer = try await first
            #expect(answer.json["message"] == "Parcel 3SDEMO0000001", "\(answer.text)")
            #expect(second.status == .ok)
            #expect(second.body == answer.body, "\(second.text)")
            #expect(server.requests.count == 1, "one call for the two taps")
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("a double tap during a slow redirect calls the service once; both taps get the one answer")
    func doubleTapDuringCall() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let choice = try await choosePoint(client, code: "3SDEMO0000002", headers: headers)
            let submit = try action(choice, titled: "submit")
            // Slow, but well inside the service's 2 s attempt timeout: at 1.5 s a loaded CI machine
            // once let the attempt time out, and the retry (same key, applied once) made a second POST.
            server.configure { $0.delay = .milliseconds(1000) }
            async let first = client.command(submit, input: ["choice": "UT-0001"], headers: headers)
            try await Task.sleep(for: .milliseconds(300))
            async let second = client.command(submit, input: ["choice": "UT-0001"], headers: headers)
            let (a, b) = try await (first, second)
            #expect(a.status == .ok && b.status == .ok)
            #expect(a.body == b.body)
            #expect(a.json["type"] == "done")
            let replays = [a, b].filter { response in response.headers[.idempotentReplay] == "true" }.count
            #expect(replays == 1, "the second is the first's answer")
            #expect(server.requests.filter { $0.method == "POST" }.count == 1, "one call downstream")
            #expect(server.applied.values.reduce(0, +) == 1)
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("a call's answer applied after waiting for the session's row, which another request finished meanwhile: the identical command gets that request's stored answer")
    func applyAfterATakeoverFinished() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        let holder = PostgresPool(configuration: .init(conninfo: environment.pool.configuration.conninfo, maxConnections: 1))
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let choice = try await choosePoint(client, code: "3SDEMO0000003", headers: headers)
            let submit = try action(choice, titled: "submit")
            server.configure { $0.delay = .milliseconds(800) }
            async let tapped = client.command(submit, input: ["choice": "UT-0001"], headers: headers)
            for _ in 0..<300 where !server.requests.contains(where: { $0.method == "POST" }) { try await Task.sleep(for: .milliseconds(10)) }
            // While the call is in flight, another request (a takeover, as on another replica)
            // holds the session's row, and then finishes the step with its own answer.
            let taken = #"{"type":"done","message":"Answered by the takeover.","refresh":true}"#
            try await holder.withConnection { db in
                try await db.execute("BEGIN")
                let row = try await db.query(
                    """
                    SELECT id, (context->'calling'->>'step')::int, context->'calling'->>'event', context->'calling'->>'digest'
                    FROM flow_sessions WHERE context ? 'calling' FOR UPDATE
                    """)[0]
                let (id, step, event, digest) = (
                    try row.decode(UUID.self, at: 0), try row.decode(Int.self, at: 1), try row.decode(String.self, at: 2),
                    try row.decode(String.self, at: 3))
                // Until the call's answer is being applied: its transaction waits for this row.
                var waited = false
                for _ in 0..<1000 where !waited {
                    let waiting = try await environment.pool.query(
                        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE OF s%'")
                    waited = try waiting[0].decode(Int.self, at: 0) > 0
                    if !waited { try await Task.sleep(for: .milliseconds(10)) }
                }
                try #require(waited, "the call's answer never waited for the session's row")
                try await db.query("UPDATE flow_sessions SET step = step + 1, context = context - 'calling' WHERE id = $1", [id])
                try await db.query(
                    "INSERT INTO command_log (session_id, step, event, response, outcome, input_digest) VALUES ($1, $2, $3, $4, 'done', $5)",
                    [id, step, event, taken, digest])
                try await db.execute("COMMIT")
            }
            let answer = try await tapped
            #expect(answer.status == .ok)
            #expect(answer.text == taken, "the stored answer, not refresh: \(answer.text)")
        }
        await holder.close()
        await environment.pool.close()
        await server.stop()
    }

    @Test("a redirect applied whose answer is lost is retried with the same key and applied once")
    func lostAnswer() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let choice = try await choosePoint(client, code: "3SDEMO0000003", headers: headers)
            server.configure { $0.dropAfterApplying = 1 }
            let done = try await client.command(try action(choice, titled: "submit"), input: ["choice": "UT-0001"], headers: headers).json
            #expect(done["type"] == "done", "\(done)")
            let posts = server.requests.filter { $0.method == "POST" }
            #expect(posts.count == 2, "the first answer was lost, so Baton tried again")
            #expect(Set(posts.map(\.key)).count == 1, "with the same key")
            #expect(server.applied.values.reduce(0, +) == 1, "and the service applied it once")
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("50 concurrent slow calls with a pool of 8 hold no connection: other commands and screens still answer at once")
    func poolNotHeld() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server, poolSize: 8)
        try await buildApplication(environment).test(.router) { client in
            // 50 users, each at the code input.
            var submits: [(String, HTTPFields)] = []
            for index in 0..<50 {
                let headers = try await userHeaders("slow\(index)")
                let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
                let ask = try await client.command(try action(home, titled: "Track a parcel"), headers: headers).json
                submits.append((try action(ask, titled: "submit"), headers))
            }
            // Slower than a database call, within the tracking service's 2 s attempt timeout.
            server.configure { $0.delay = .milliseconds(1200) }
            let quickDone: ContinuousClock.Instant
            var slowDone: [ContinuousClock.Instant] = []
            (quickDone, slowDone) = try await withThrowingTaskGroup(of: ContinuousClock.Instant.self) { group in
                for (payload, headers) in submits {
                    group.addTask {
                        let answer = try await client.command(payload, input: ["text": "3SDEMO0000001"], headers: headers)
                        #expect(answer.json["type"] == "screen", "\(answer.json)")
                        return .now
                    }
                }
                // Wait until the calls are out, then use the database while they hang.
                // (services.yaml lets 32 calls to tracking out at once; the rest wait for a slot.)
                for _ in 0..<100 where server.requests.filter({ $0.method == "GET" }).count < 32 {
                    try await Task.sleep(for: .milliseconds(20))
                }
                #expect(server.requests.count >= 32, "32 calls are in flight at once, the others queue for the service")
                // A command that has not reached its call yet may hold a connection for a moment;
                // while the calls hang, the pool empties (a call that held one would keep 8 busy).
                // The figure asserted is the one the loop saw: reading it again could catch the
                // next command's brief transaction.
                var statistics = environment.pool.statistics
                for _ in 0..<30 where statistics.inUse > 0 {
                    try await Task.sleep(for: .milliseconds(10))
                    statistics = environment.pool.statistics
                }
                #expect(statistics.inUse == 0, "no connection is held by a call in flight: \(statistics)")
                let headers = try await userHeaders("quick")
                let screen = try await client.execute(uri: "/v3/screens/catalog", method: .get, headers: headers)
                #expect(screen.status == .ok)
                let home = try await client.execute(uri: "/v3/screens/home", method: .get, headers: headers).json
                let ask = try await client.command(try action(home, titled: "New playlist"), headers: headers).json
                let created = try await client.command(try action(ask, titled: "submit"), input: ["text": "While waiting"], headers: headers)
                #expect(created.json["type"] == "done")
                let quick = ContinuousClock.now
                var finished: [ContinuousClock.Instant] = []
                for try await instant in group { finished.append(instant) }
                return (quick, finished)
            }
            #expect(slowDone.count == 50)
            #expect(slowDone.allSatisfy { $0 > quickDone }, "the quick commands answered while every slow call was still in flight")
        }
        await environment.pool.close()
        await server.stop()
    }
}

/// The real binary, killed while a call is in flight.
@Suite("Service calls across a crash", .serialized)
struct ServiceCallCrashTests {
    @Test("Baton SIGKILLed mid-call: after a restart the client's retry makes the call again with the same key; the service applies it once")
    func killedMidCall() async throws {
        let server = try await TrackingServer()
        let environment = [
            "BATON_SERVICE_TRACKING_URL": server.baseURL, "BATON_JWT_HS256_SECRET": TestApplication.jwtSecret,
            "BATON_SIGNING_KEYS": TestApplication.signingKeys,
        ]
        let seed = try BatonProcess(arguments: ["seed", "demo"], environment: environment)
        #expect(try await seed.stop(signal: 0, timeout: .seconds(120)) == 0, "\(seed.log)")
        var baton = try BatonProcess(arguments: ["serve"], environment: environment, reusing: seed.dataDirectory)
        try await baton.waitUntilReady()
        let bearer = try await TestTokens.bearer("henk")
        let headers = [("Authorization", bearer), ("Content-Type", "application/json")]
        func command(_ baton: BatonProcess, _ payload: String, _ input: JSONObject? = nil) async throws -> BatonProcess.Reply {
            var body: JSONObject = ["payload": .string(payload)]
            if let input { body["input"] = .object(input) }
            return try await baton.send(.POST, "/v3/command", headers: headers, body: String(decoding: JSONEncoding.encode(.object(body)), as: UTF8.self))
        }
        func json(_ reply: BatonProcess.Reply) throws -> JSONValue { try JSONValue.parse(Array(reply.body.utf8)) }
        func action(_ answer: JSONValue, _ title: String) throws -> String {
            try #require(ScenarioRunner.payload(titled: title, in: answer), "no \(title) in \(answer)\n\(baton.log)")
        }
        let home = try json(try await baton.get("/v3/screens/home", headers: headers))
        let ask = try json(try await command(baton, try action(home, "Track a parcel")))
        let status = try json(try await command(baton, try action(ask, "submit"), ["text": "3SDEMO0000001"]))
        let choice = try json(try await command(baton, try action(status, "Deliver to a pickup point")))
        let submit = try action(choice, "submit")

        // The service applies the redirect at once but answers only much later: Baton dies first.
        server.configure { $0.delayAfterApplying = .seconds(60) }
        let first = baton
        let pending = Task { try? await command(first, submit, ["choice": "UT-0003"]) }
        for _ in 0..<200 where server.applied.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        #expect(server.applied.count == 1, "the call reached the service")
        _ = try await baton.stop(signal: SIGKILL)
        // (The dead replica may have retried its silent attempt with the same key before it died.)
        let postsBeforeCrash = server.requests.filter { $0.method == "POST" }.count
        pending.cancel()
        server.configure { $0.delayAfterApplying = .zero }

        baton = try BatonProcess(arguments: ["serve"], environment: environment, reusing: seed.dataDirectory)
        try await baton.waitUntilReady()
        // The client retries, honouring Retry-After while the dead replica's lease runs out.
        var reply = try await command(baton, submit, ["choice": "UT-0003"])
        let deadline = ContinuousClock.now + .seconds(60)
        while reply.status == .conflict, ContinuousClock.now < deadline {
            #expect(reply.headers.first(name: "Retry-After") != nil)
            try await Task.sleep(for: .seconds(1))
            reply = try await command(baton, submit, ["choice": "UT-0003"])
        }
        #expect(reply.status == .ok, "\(reply.status) \(reply.body)\n\(baton.log)")
        #expect(try json(reply)["type"] == "done")
        let posts = server.requests.filter { $0.method == "POST" }
        #expect(posts.count == postsBeforeCrash + 1, "the call was made again after the crash, once")
        #expect(Set(posts.map(\.key)).count == 1, "with the same Idempotency-Key")
        #expect(server.applied.values.reduce(0, +) == 1, "so the service applied it once")
        _ = try await baton.stop()
        await server.stop()
        try? FileManager.default.removeItem(at: seed.dataDirectory)
    }
}

extension ServiceCallTests {
    @Test("a screen loads from a service with a short timeout; when the service fails or is silent the screen renders its fallback")
    func screenServiceLoad() async throws {
        let server = try await TrackingServer()
        let environment = try await environment(server)
        try await buildApplication(environment).test(.router) { client in
            let headers = try await userHeaders("henk")
            let screen = try await client.execute(uri: "/v3/screens/parcel?code=3SDEMO0000001", method: .get, headers: headers).json
            #expect(screen.value(atPath: "sections.0.components.0.text") == "On its way", "\(screen)")

            server.configure { $0.forceStatus = 500 }
            let failed = try await client.execute(uri: "/v3/screens/parcel?code=3SDEMO0000001", method: .get, headers: headers)
            #expect(failed.status == .ok)
            #expect(failed.json.value(atPath: "sections.0.components.0.id") == "unavailable", "\(failed.json)")

            server.configure { $0.forceStatus = nil; $0.delay = .seconds(10) }
            let started = ContinuousClock.now
            let silent = try await client.execute(uri: "/v3/screens/parcel?code=3SDEMO0000001", method: .get, headers: headers)
            #expect(silent.json.value(atPath: "sections.0.components.0.text") == "We can't show this parcel's status right now. Try again in a moment.")
            #expect(ContinuousClock.now - started < .seconds(5), "one attempt of 800 ms, not the service's three of 2 s (6 s and more)")
            let gets = server.requests.filter { $0.method == "GET" }.count
            #expect(gets == 3, "one call per render, no retry")
        }
        await environment.pool.close()
        await server.stop()
    }

    @Test("lint: a call must handle success and every failure, name known services and valid outcomes")
    func lint() throws {
        let source = """
            flow: lookup
            start: ask
            states:
              ask:
                input: { title: Code }
                on:
                  submit:
                    call: { service: trackng, path: "/v1/parcels/{{input.value}}" }
                    outcomes:
                      200: done
                      timeuot: done
                      404: { error: Unknown }
              done:
                done: {}
            """
        let (flow, loadDiagnostics) = FlowLoader.load(source: source, file: "Flows/lookup.yaml")
        #expect(loadDiagnostics.isEmpty, "\(loadDiagnostics)")
        var linter = FlowLinter(catalog: FlowCatalog())
        linter.services = ["tracking": ServiceDefinition(name: "tracking")]
        let messages = linter.lint(try #require(flow)).map(\.description)
        #expect(messages.contains { $0.hasPrefix("Flows/lookup.yaml:8:") && $0.contains("unknown service 'trackng'") && $0.contains("did you mean 'tracking'") }, "\(messages)")
        #expect(messages.contains { $0.contains("'timeuot' is not a call outcome") && $0.contains("did you mean 'timeout'") }, "\(messages)")
        #expect(messages.contains { $0.contains("does not handle timeout, circuit_open, failed, bad_response, refused") }, "\(messages)")
    }

    @Test("lint: action states that lead back to themselves with no answer between (a call retried by its own outcome) are a loop")
    func lintLoop() throws {
        func errors(_ source: String) throws -> [String] {
            let (flow, loadDiagnostics) = FlowLoader.load(source: source, file: "Flows/poll.yaml")
            #expect(loadDiagnostics.isEmpty, "\(loadDiagnostics)")
            var linter = FlowLinter(catalog: FlowCatalog())
            linter.services = ["tracking": ServiceDefinition(name: "tracking")]
            return linter.lint(try #require(flow)).filter { $0.severity == .error }.map(\.description)
        }
        let looping = try errors(
            """
            flow: poll
            start: check
            states:
              check:
                call: { service: tracking, path: /v1/parcels/3SDEMO0000001 }
                outcomes: { 2xx: shown, unavailable: wait }
              wait:
                match: "{{result.failure}}"
                cases: { timeout: check }
                otherwise: sorry
              sorry:
                error: { message: Tracking is not answering. }
              shown:
                done: {}
            """)
        #expect(looping.count == 1, "\(looping.joined(separator: "\n"))")
        #expect(looping.first?.contains("action states 'check' → 'wait' → 'check' form a loop") == true, "\(looping)")
        // Two loops that share a state: the first one found calls nothing (a warning), and the one
        // through the call was not looked for. Each set of states that lead back to each other is
        // judged now.
        let tangled = try errors(
            """
            flow: poll
            params:
              x: { required: false }
              y: { required: false }
            start: a
            states:
              a:
                match: "{{params.x}}"
                cases: { one: b }
                otherwise: sorry
              b:
                match: "{{params.y}}"
                cases: { again: a, retry: c }
                otherwise: sorry
              c:
                call: { service: tracking, method: POST, path: /v1/parcels/3SDEMO0000001/redirect, body: { location: UT-0001 } }
                outcomes: { 2xx: shown, 409: b, unavailable: sorry }
              sorry:
                error: { message: Tracking is not answering. }
              shown:
                done: {}
            """)
        #expect(tangled.count == 1, "\(tangled.joined(separator: "\n"))")
        #expect(tangled.first?.contains("'c' → 'b' → 'c'") == true && tangled.first?.contains("calling the service") == true, "\(tangled)")
        // The same retry through a state that answers (the user taps "retry") is no loop.
        let answering = try errors(
            """
            flow: poll
            start: check
            states:
              check:
                call: { service: tracking, path: /v1/parcels/3SDEMO0000001 }
                outcomes: { 2xx: shown, unavailable: sorry }
              sorry:
                error: { message: Tracking is not answering., retry: retry }
                on: { retry: check }
              shown:
                done: {}
            """)
        #expect(answering.isEmpty, "\(answering)")
    }
}

extension ServiceCallTests {
    @Test("no more calls than the service's concurrency are in flight at once; the others wait their turn")
    func concurrencyLimit() async throws {
        let server = try await TrackingServer()
        let client = Self.client(server)
        var limited = Self.tracking(attempt: .seconds(5))
        limited.concurrency = 2
        let service = limited
        server.configure { $0.delay = .milliseconds(300) }
        let results = await withTaskGroup(of: ServiceResult.self) { group in
            for _ in 0..<6 { group.addTask { await client.call(Self.get("3SDEMO0000001"), service: service) } }
            var results: [ServiceResult] = []
            for await result in group { results.append(result) }
            return results
        }
        #expect(results.allSatisfy { if case .response(200, _) = $0 { true } else { false } }, "\(results)")
        #expect(server.mostInFlight == 2, "at most 2 at once, got \(server.mostInFlight)")
        await server.stop()
    }

    @Test("hmac auth signs timestamp, method, target and body with the configured secret")
    func hmac() async throws {
        let server = try await TrackingServer()
        let url = server.baseURL
        let client = ServiceClient(
            settings: { $0 == "baton.service.tracking.url" ? url : ($0 == "baton.service.tracking.secret" ? "s3cret" : nil) },
            logger: Self.logger)
        let write = ServiceRequest(
            service: "tracking", method: "POST", path: "/v1/parcels/3SDEMO0000001/redirect", body: ["location": "UT-0001"],
            idempotencyKey: "baton-test")
        _ = await client.call(write, service: Self.tracking(auth: .hmac))
        let headers = try #require(server.requestHeaders.last)
        let timestamp = try #require(headers["x-baton-timestamp"])
        let message = Array("\(timestamp)\nPOST\n/v1/parcels/3SDEMO0000001/redirect\n{\"location\":\"UT-0001\"}".utf8)
        let expected = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Array("s3cret".utf8)))
        #expect(headers["x-baton-signature"] == "sha256=" + expected.map { String(format: "%02x", $0) }.joined())
        #expect(headers["authorization"] == nil)
        // A service that needs a secret without one configured is not called.
        let unconfigured = ServiceClient(settings: { $0 == "baton.service.tracking.url" ? url : nil }, logger: Self.logger)
        #expect(await unconfigured.call(write, service: Self.tracking(auth: .hmac)) == .failure(.refused))
        await server.stop()
    }

    // `serve --dev --host ::1` used to point the demo at 127.0.0.1, where nothing listened.
    @Test("the demo tracking API is called where the server listens: IPv6 in brackets, a wildcard or localhost on 127.0.0.1")
    func demoTrackingURL() {
        let cases = [
            ("127.0.0.1", "127.0.0.1"), ("0.0.0.0", "127.0.0.1"), ("localhost", "127.0.0.1"), ("::1", "[::1]"), ("::", "[::1]"),
            ("192.168.1.20", "192.168.1.20"), ("fd00::7", "[fd00::7]"),
        ]
        for (host, reached) in cases {
            #expect(DemoTrackingController.url(host: host, port: 8080) == "http://\(reached):8080/demo/tracking", "\(host)")
        }
    }

    @Test("the demo tracking API answers parcels from the demo shipments and redirects once per parcel, by Idempotency-Key")
    func demoTracking() async throws {
        let environment = try await TestApplication.environment(
            flows: BuiltinFlowsTests.flows, registry: BuiltinFlowsTests.registry(), configure: { $0.demoTracking = true })
        _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
        try await buildApplication(environment).test(.router) { client in
            let parcel = try await client.execute(uri: "/demo/tracking/v1/parcels/3SDEMO0000004", method: .get)
            #expect(parcel.status == .ok)
            #expect(parcel.json["status"] == "Registered; waiting to be dropped off")
            #expect(try await client.execute(uri: "/demo/tracking/v1/parcels/3SNOTREAL000", method: .get).status == .notFound)
            func redirect(_ key: String, to location: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/demo/tracking/v1/parcels/3SDEMO0000004/redirect", method: .post,
                    headers: [HTTPField.Name("Idempotency-Key")!: key, .contentType: "application/json"],
                    body: ByteBuffer(bytes: JSONEncoding.encode(["location": .string(location)])))
            }
            #expect(try await redirect("k1", to: "UT-0002").status == .ok)
            #expect(try await redirect("k1", to: "UT-0002").status == .ok, "the same key answers the same")
            let other = try await redirect("k2", to: "UT-0003")
            #expect(other.status == .conflict)
            #expect(other.json["error"]?["message"] == "This parcel is already on its way to another pickup point.")
            let after = try await client.execute(uri: "/demo/tracking/v1/parcels/3SDEMO0000004", method: .get).json
            #expect(after["status"] == "Waiting to be dropped off; it will go to pickup point Neude parcel point")
        }
        await environment.pool.close()
    }
}

extension ServiceCallTests {
    @Test("scenario stubs answer by method and path (a trailing * is a prefix); a call no stub answers is reported")
    func scenarioStubs() async throws {
        let (scenario, diagnostics) = Scenario.load(
            source: """
                scenario: stubs
                as: user:ann
                services:
                  tracking:
                    - { method: GET, path: /v1/parcels/3SDEMO0000001, status: 200, body: { code: 3SDEMO0000001 } }
                    - { method: POST, path: /v1/parcels/*, failure: timeout }
                steps:
                  - screen: home
                """, file: "Flows/tests/stubs.yaml")
        #expect(diagnostics.isEmpty, "\(diagnostics)")
        let stubs = ScenarioServices(stubs: try #require(scenario).services)
        let service = ServiceDefinition(name: "tracking")
        #expect(await stubs.call(Self.get("3SDEMO0000001"), service: service) == .response(status: 200, body: ["code": "3SDEMO0000001"]))
        let write = ServiceRequest(service: "tracking", method: "POST", path: "/v1/parcels/3SDEMO0000001/redirect")
        #expect(await stubs.call(write, service: service) == .failure(.timeout))
        #expect(await stubs.call(Self.get("3SDEMO0000009"), service: service) == .failure(.refused))
        #expect(stubs.takeUnmatched() == ["no stub answers GET /v1/parcels/3SDEMO0000009 on service 'tracking'"])

        let (_, bad) = Scenario.load(
            source: "scenario: bad\nas: user:ann\nservices: { tracking: [ { path: /x, failure: slow } ] }\nsteps: [ { screen: home } ]",
            file: "Flows/tests/bad.yaml")
        #expect(bad.contains { $0.message.hasPrefix("failure must be one of timeout") }, "\(bad)")
    }
}

extension ServiceCallTests {
    @Test("a flow state showing a template that loads from a service is warned: the flow renders its fallback")
    func serviceLoadInFlowWarned() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("flows-\(UUID().uuidString.prefix(8))/Flows")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("screens"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory.deletingLastPathComponent()) }
        try "services:\n  tracking: { internal: true }\n".write(to: directory.appendingPathComponent("services.yaml"), atomically: true, encoding: .utf8)
        try String(contentsOf: BuiltinFlowsTests.flows.appendingPathComponent("screens/parcel.yaml"), encoding: .utf8)
            .replacingOccurrences(of: "action: { type: startFlow, flow: track-parcel, title: Track a parcel }", with: "action: { type: command, event: done }")
            .write(to: directory.appendingPathComponent("screens/parcel.yaml"), atomically: true, encoding: .utf8)
        try """
            flow: show
            start: show
            states:
              show:
                screen: { template: parcel, params: { code: "3SDEMO0000001" } }
                on:
                  done: finished
              finished:
                done: {}
            """.write(to: directory.appendingPathComponent("show.yaml"), atomically: true, encoding: .utf8)
        let bundle = FlowBundle.load(directory: directory, catalog: FlowCatalog())
        let warnings = bundle.diagnostics.filter { $0.severity == .warning }.map(\.description)
        #expect(warnings.contains { $0.hasPrefix("Flows/show.yaml:5:") && $0.contains("loads 'parcel' from a service") }, "\(bundle.diagnostics)")
    }
}
