import BatonFlows
import BatonJSON
import BatonPostgres
import Crypto
import Foundation
import Logging
import Synchronization

/// Fits a reply to the client and encodes it: the contract layer replaces components the
/// client cannot render with their fallbacks, drops what it cannot show, and counts both.
public protocol ReplyFitter: Sendable {
    /// The wire bytes of `reply` as this client can render it, and what to count for it.
    /// - Parameter origin: the flow or screen that produced the reply (for logs and metrics).
    func fit(_ reply: JSONValue, profile: ClientProfile, origin: String) -> FittedReply
}

/// A reply fitted to one client, with what its fit adds to the counters.
///
/// Fitting runs inside the command's transaction, which may be retried; counting there would
/// count a retried body twice. So the count travels with the bytes and is published once, by
/// the caller, after the transaction committed and the reply is on its way.
public struct FittedReply: Sendable {
    public var bytes: [UInt8]
    /// Records the fit (metrics, logs of blocked URLs). Call once per delivered reply.
    public var publish: @Sendable () -> Void

    public init(bytes: [UInt8], publish: @escaping @Sendable () -> Void = {}) {
        self.bytes = bytes
        self.publish = publish
    }
}

/// Encodes replies as they are (tools and tests without a contract).
public struct PassThroughFitter: ReplyFitter {
    public init() {}
    public func fit(_ reply: JSONValue, profile: ClientProfile, origin: String) -> FittedReply {
        FittedReply(bytes: JSONEncoding.encode(reply))
    }
}

/// Where the runtime reports what happened (Prometheus in the server, nothing in tools).
public protocol RuntimeMetrics: Sendable {
    func commandFinished(flow: String, outcome: CommandOutcome, duration: Duration)
    func sessionStarted(flow: String)
    func sessionFinished(flow: String, result: SessionResult)
    /// A screen was answered: rendered, or from the screen cache (``ScreenCache``).
    func screenAnswered(held: Bool)
}

/// Metrics that go nowhere.
public struct NoRuntimeMetrics: RuntimeMetrics {
    public init() {}
    public func commandFinished(flow: String, outcome: CommandOutcome, duration: Duration) {}
    public func sessionStarted(flow: String) {}
    public func sessionFinished(flow: String, result: SessionResult) {}
    public func screenAnswered(held: Bool) {}
}

/// Runs commands: verifies the payload, then — in one transaction — locks the session, runs
/// the engine step with its effects, records the new state and the response, and commits.
/// The command log makes every command exactly-once: a repeat gets the stored bytes.
public final class FlowRuntime: Sendable {
    let registry: FlowRegistry
    let pool: PostgresPool
    /// Signs and checks payloads and device tokens.
    public let signer: PayloadSigner
    let metrics: any RuntimeMetrics
    let logger: Logger
    let clock: @Sendable () -> Date
    /// What is being served: swapped whole by a release, read once per request, so a request
    /// that started on one release finishes on it.
    private let served: Mutex<ServedFlows>
    /// The engines of the served definitions, and of older ones that sessions have needed since
    /// the release was served (loaded on demand); see ``pin(_:)``.
    private let pinned = Mutex<[String: FlowEngine]>([:])
    /// Makes the service calls of `call:` transitions.
    let services: any ServiceCaller
    /// How long a duplicate of a command whose service call is in flight waits for its reply
    /// before it is answered 409.
    let callWait: Duration
    /// The most one service call may take, retries included, so the command still answers
    /// within the request's deadline.
    let callBudget: Duration
    /// About how many bytes of fitted screens each release served holds (``ScreenCache``); 0 holds none.
    let screenCacheBytes: Int
    /// The default of ``screenCacheBytes``: with every cache full, a replica stays within 64 MB
    /// (docs/benchmarks.md, "Fitted screens held").
    public static let defaultScreenCacheBudget = 4 << 20
    /// Service calls in flight on this replica, by session and step.
    let flights = Mutex<[String: CallFlight]>([:])

    public init(
        bundle: FlowBundle, registry: FlowRegistry, pool: PostgresPool, signer: PayloadSigner,
        fitter: any ReplyFitter = PassThroughFitter(), metrics: any RuntimeMetrics = NoRuntimeMetrics(), logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }, release: String = "files", services: any ServiceCaller = NoServices(),
        callWait: Duration = .seconds(5), callBudget: Duration = .seconds(8), screenCacheBytes: Int = FlowRuntime.defaultScreenCacheBudget
    ) {
        self.screenCacheBytes = screenCacheBytes
        self.callBudget = callBudget
        self.services = services
        self.callWait = callWait
        self.registry = registry
        self.pool = pool
        self.signer = signer
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        let served = ServedFlows(bundle: bundle, fitter: fitter, release: release, screenCacheBytes: screenCacheBytes)
        self.served = Mutex(served)
        pin(served)
    }

    /// The flows and screens being served now.
    public var bundle: FlowBundle { served.withLock { $0.bundle } }

    /// The effects, guards and loaders flows may call (what a bundle is linted against).
    public var catalog: FlowCatalog { registry.catalog }

    /// The release being served (`files` when serving `Flows/` from disk), and the ramp, if any.
    public var release: (id: String, ramp: (id: String, percent: Int)?) {
        served.withLock { served in (served.release, served.ramp.map { ($0.release, $0.percent) }) }
    }

    /// Serves other definitions from now on. Requests already running finish on the ones they
    /// started with; sessions keep the definition they started on (by hash).
    ///
    /// With a ramp, new sessions of the flows the ramp changes start on the ramp's definitions
    /// for `percent`% of subjects (by a stable hash of the subject, so a subject always lands on
    /// the same side); screens and everything else come from the ramp's bundle at once.
    ///
    /// The definitions are stored by hash first: a session's row refers to its definition, so
    /// a flow served before its definition is stored cannot start (the insert would break the
    /// reference). If they cannot be stored, nothing changes and the error is thrown.
    public func serve(
        bundle: FlowBundle, fitter: any ReplyFitter, release: String, ramp: (bundle: FlowBundle, release: String, percent: Int)? = nil
    ) async throws {
        let next = ServedFlows(bundle: bundle, fitter: fitter, release: release, ramp: ramp, screenCacheBytes: screenCacheBytes)
        try await store(next)
        served.withLock { current in
            current = next
            pin(next)
        }
    }

    /// The definitions whose engines are kept now (for tests).
    var keptEngineHashes: Set<String> { pinned.withLock { Set($0.keys) } }

    /// Keeps the engines of the definitions `served` holds, and only those. An engine of an
    /// older definition is made again from `flow_definitions` when a session needs it: with the
    /// screens served now (screens switch with a release, for every session), and without the
    /// cache growing with every release the process has served.
    private func pin(_ served: ServedFlows) {
        var engines: [String: FlowEngine] = [:]
        for engine in served.current.values { engines[engine.flow.hash] = engine }
        for engine in served.ramp?.engines.values ?? [:].values { engines[engine.flow.hash] = engine }
        pinned.withLock { $0 = engines }
    }

    /// Stores the served definitions by hash, so sessions can always find the rules they
    /// started on. Called at startup and whenever a release is served.
    public func publishDefinitions() async throws {
        try await store(served.withLock { $0 })
    }

    private func store(_ served: ServedFlows) async throws {
        let definitions = Array(served.current.values.map(\.flow)) + Array(served.ramp?.engines.values.map(\.flow) ?? [])
        try await pool.withTransaction { db in try await SessionStore.publish(db, definitions: definitions) }
    }

    // MARK: - Commands

    /// Runs one command (PROTOCOL §3).
    ///
    /// A command's identity is the whole request: subject, payload and input. The identical
    /// request gets the stored reply of its first run, byte for byte, whatever the payload's
    /// expiry; a request that differs from what its step already processed (another input, or
    /// a start action whose session has moved on) is answered `refresh` and changes nothing.
    public func execute(payload: String, input: CommandInput, identity: ClientIdentity, profile: ClientProfile) async throws
        -> CommandReply
    {
        let started = ContinuousClock.now
        let now = clock()
        let claims: PayloadClaims
        let expired: Bool
        switch signer.verify(payload, now: now) {
        case .failure(.invalid(let message)):
            metrics.commandFinished(flow: "unknown", outcome: .invalid, duration: ContinuousClock.now - started)
            throw CommandError(.invalidPayload, message)
        case .failure(.expired(let verified)):
            (claims, expired) = (verified, true)
        case .success(let verified):
            (claims, expired) = (verified, false)
        }
        do {
            try authorize(claims, identity: identity)
        } catch {
            metrics.commandFinished(flow: flowLabel(claims.flow), outcome: .invalid, duration: ContinuousClock.now - started)
            throw error
        }
        let request = CommandRequest(
            claims: claims, expired: expired, input: input, inputDigest: input.digest, identity: identity, profile: profile, now: now,
            served: served.withLock { $0 })
        // Start payloads name their session: every rendered start action is its own instance,
        // and repeats of one find the session it started.
        let startID = claims.isStart ? PayloadSigner.sessionID(forStartPayload: payload) : nil
        // The body reads the claims from the request: captured, they were copied whole once more.
        return try await run(flow: claims.flow, started: started) { [self] db in
            if let startID { return try await start(request, id: startID, parameters: request.claims.parameters ?? [:], db: db) }
            return try await step(request, db: db)
        }
    }

    /// Starts `flow` for the request's subject without a payload (deep links): a new session
    /// every time, answered with the flow's first response.
    public func startFlow(
        _ flow: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile, idempotency: IdempotencyKey? = nil
    ) async throws -> CommandReply {
        try await resolveLink(.flow(flow), parameters: parameters, identity: identity, profile: profile, idempotency: idempotency)
    }

    /// What a deep link opens.
    public enum LinkTarget: Sendable, Equatable {
        case flow(String)
        case screen(String)
    }

    /// Why the parameters a deep link carries cannot open `target`, as its flow or screen checks
    /// them (required, pattern, length); nil when they can, or when the target is not served
    /// (``resolveLink(_:parameters:identity:profile:idempotency:)`` says so). The allowlist's own
    /// pattern may be wider than the target's: such a link is refused as a link, not as a request.
    public func linkParameterProblem(_ target: LinkTarget, parameters: JSONObject) -> String? {
        let served = self.served.withLock { $0 }
        switch target {
        case .flow(let flow):
            return served.current[flow].flatMap { ParameterCheck.problem(parameters, specs: $0.flow.parameters) }
        case .screen(let name):
            return served.bundle.screens[name].flatMap { ParameterCheck.problem(parameters, specs: $0.parameters) }
        }
    }

    /// Opens a deep link's target for the caller: a flow starts (a new session) and answers
    /// with its first response; a screen answers `{"type":"screen","presentation":"push",…}`.
    ///
    /// With an idempotency key (the IETF httpapi draft's semantics), the first request with a
    /// key runs and its reply is stored in the same transaction as its session: the same key
    /// with the same request answers that reply again, the same key with another request is
    /// refused (422), and a key whose first request is still running answers 409.
    public func resolveLink(
        _ target: LinkTarget, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile, idempotency: IdempotencyKey?
    ) async throws -> CommandReply {
        let started = ContinuousClock.now
        let now = clock()
        let served = self.served.withLock { $0 }
        let flowName: String
        var startClaims: (CommandRequest, UUID)?
        var screenTemplate: ScreenTemplate?
        var fetched: [String: ServiceResult] = [:]
        switch target {
        case .flow(let flow):
            flowName = flow
            guard let engine = served.current[flow] else { throw CommandError(.notFound, "there is no flow '\(flow.prefix(64))'") }
            guard let subject = identity.subject(for: engine.flow.audience) else {
                throw CommandError(
                    identity.isAnonymous ? .unauthenticated : .forbidden,
                    "flow '\(flow)' needs a \(engine.flow.audience == .device ? "device (X-Device-Id)" : "signed-in user")", flow: flow)
            }
            let claims = PayloadClaims(
                subject: subject.description, flow: flow, sessionID: nil, step: 0, event: "start", expires: 0, parameters: parameters)
            // The session id is chosen before the transaction, so a retry of this same request
            // after an ambiguous COMMIT finds the session it may already have started. With an
            // idempotency key it is the key's: a retry with the key finds the session the key's
            // first request started, and answers from it (see below).
            startClaims = (
                CommandRequest(
                    claims: claims, expired: false, input: .none, inputDigest: CommandInput.none.digest, identity: identity,
                    profile: profile, now: now, served: served),
                idempotency.map(Self.sessionID(for:)) ?? UUID()
            )
        case .screen(let name):
            flowName = ""
            guard let template = served.bundle.screens[name] else { throw CommandError(.notFound, "there is no screen '\(name.prefix(64))'") }
            screenTemplate = template
            fetched = await fetch(template, parameters: parameters, identity: identity, served: served)
        }
        return try await run(flow: flowName, started: started) { [self, startClaims, screenTemplate, fetched] db in
            var earlier: [UInt8]?
            if let idempotency { earlier = try await IdempotencyStore.claim(db, idempotency) }
            if let earlier, !earlier.isEmpty || startClaims == nil {
                return StepResult(reply: CommandReply(body: earlier, replayed: true, outcome: .replayed, flow: flowName))
            }
            // An empty stored reply: the key's first request started its flow, which stopped at a
            // service call, so its answer is the session's. Starting again with the key's session
            // id finds that session, and answers as a repeated start does: the logged answer, or
            // a wait for the call in flight (409 past it), or the call taken over.
            var result: StepResult
            if let (request, id) = startClaims {
                result = try await start(request, id: id, parameters: parameters, db: db)
            } else if let screenTemplate {
                // Rendered inside the transaction: its bytes are stored with the key for replay.
                let scope = try await screenScope(screenTemplate, parameters: parameters, identity: identity, fetched: fetched, db: db)
                let encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: now, served: served)
                let fitted = try screen(screenTemplate, scope: scope, encoder: encoder, profile: profile, served: served)
                var body: [UInt8] = Array(#"{"type":"screen","presentation":"push","screen":"#.utf8)
                body += fitted.bytes
                body.append(UInt8(ascii: "}"))
                result = StepResult(
                    reply: CommandReply(body: body, replayed: false, outcome: .screen, flow: ""), tallies: [fitted.publish])
            } else {
                preconditionFailure("a link target is a flow or a screen")
            }
            if let idempotency, earlier == nil {
                let answered = result.calling == nil && result.awaiting == nil
                IdempotencyStore.record(db, idempotency, response: answered ? result.reply.body : [])
            }
            return result
        }
    }

    /// The session a deep link's flow starts under an idempotency key: the same for every
    /// request with the key (and the request it was first used for), and for no other.
    static func sessionID(for key: IdempotencyKey) -> UUID {
        var bytes = Array(SHA256.hash(data: Array("baton-link-session\u{1F}\(key.scope)\u{1F}\(key.key)\u{1F}\(key.requestDigest)".utf8)).prefix(16))
        bytes[6] = bytes[6] & 0x0F | 0x80  // version 8: custom
        bytes[8] = bytes[8] & 0x3F | 0x80  // RFC 9562 variant
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10], bytes[11],
            bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// A start action's payload for `flow`, as a screen rendered now for this client would carry
    /// it (for tools and tests that start flows directly).
    public func mintStart(flow: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile) throws -> String {
        let served = self.served.withLock { $0 }
        guard served.current[flow] != nil else { throw CommandError(.notFound, "there is no flow '\(flow)'") }
        let encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: clock(), served: served)
        guard let payload = try encoder.start(flow: flow, parameters: parameters, title: nil)?["payload"]?.stringValue else {
            throw CommandError(.forbidden, "flow '\(flow)' cannot run for this client")
        }
        return payload
    }

    // MARK: - Screens

    /// Renders a screen template for this client: loaders run in one read-only snapshot,
    /// start actions are signed, the result is fitted to the client's contract. The ETag is
    /// the hash of the bytes with payloads masked (see ``ScreenReply``).
    public func renderScreen(_ name: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile) async throws
        -> ScreenReply
    {
        let served = self.served.withLock { $0 }
        guard let template = served.bundle.screens[name] else { throw CommandError(.notFound, "there is no screen '\(name.prefix(64))'") }
        var encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: clock(), served: served)
        let fetched = await fetch(template, parameters: parameters, identity: identity, served: served)
        let scope: TemplateScope
        let started: Int64
        // The client's sessions (it may have used this screen's start actions).
        let subjects = [identity.user.map { "user:\($0)" }, identity.device.map { "device:\($0)" }].compactMap { $0 }
        do {
            // Only the loaders hold the connection: rendering, signing and fitting run after the
            // snapshot, on the request's own thread.
            (scope, started) = try await pool.withTransaction(isolation: .readOnlySnapshot) { [self] db in
                let latest = subjects.isEmpty ? nil : SessionStore.latestStartAhead(db, subjects: subjects)
                let scope = try await screenScope(template, parameters: parameters, identity: identity, fetched: fetched, db: db)
                guard let latest else { return (scope, 0) }
                return (scope, try await SessionStore.latestStart(db, latest))
            }
        } catch {
            throw Self.commandError(error, flow: nil) ?? error
        }
        // The same data for the same kind of request: the held screen with fresh payloads.
        let key = ScreenCache.Key(
            screen: name, parameters: parameters, user: identity.user, device: identity.device, profile: profile,
            startExpiry: encoder.startExpiry, latestStart: started)
        var miss: ScreenCache.Miss?
        switch served.screens.lookup(key, scope: scope) {
        case .held(let entry)?:
            if let body = served.screens.answer(entry, identity: identity, signer: signer) {
                entry.publish()
                metrics.screenAnswered(held: true)
                return ScreenReply(body: body, etag: entry.etag)
            }
        case .miss(let recording)?: miss = recording
        case nil: break
        }
        encoder.mintLog = miss?.log
        let fitted: FittedReply
        do {
            fitted = try screen(template, scope: scope, encoder: encoder, profile: profile, served: served)
        } catch {
            throw Self.commandError(error, flow: nil) ?? error
        }
        miss?.reserve(fitted.bytes.count)
        let reply = ScreenReply(
            body: fitted.bytes, subject: identity.primarySubject?.description ?? "", validUntil: encoder.startExpiry, served: served.etagSeed,
            latestStart: started
        ) {
            miss?.add($0, payload: $1)
        }
        if let miss { served.screens.hold(miss, etag: reply.etag, publish: fitted.publish) }
        fitted.publish()
        metrics.screenAnswered(held: false)
        return reply
    }

    /// Fetches a screen template's service loads, all at once, before its transaction.
    private func fetch(_ template: ScreenTemplate, parameters: JSONObject, identity: ClientIdentity, served: ServedFlows) async
        -> [String: ServiceResult]
    {
        guard !template.serviceLoads.isEmpty, ParameterCheck.problem(parameters, specs: template.parameters) == nil else { return [:] }
        let subject = identity.primarySubject ?? FlowSubject(kind: .device, id: "anonymous")
        let requests = ScreenRendering.serviceRequests(template, parameters: parameters, subject: subject)
        return await withTaskGroup(of: (String, ServiceResult).self) { group in
            for (load, request) in requests {
                group.addTask { [self] in (load, await send(request, served: served)) }
            }
            var results: [String: ServiceResult] = [:]
            for await (load, result) in group { results[load] = result }
            return results
        }
    }

    /// What a screen template renders from: its loaders run on the caller's transaction.
    private func screenScope(
        _ template: ScreenTemplate, parameters: JSONObject, identity: ClientIdentity, fetched: [String: ServiceResult],
        db: PostgresConnection
    ) async throws -> TemplateScope {
        let subject = identity.primarySubject ?? FlowSubject(kind: .device, id: "anonymous")
        let host = DatabaseFlowHost(registry: registry, connection: db, logger: logger)
        return try await ScreenRendering.load(
            template, parameters: parameters, host: host, call: FlowCall(subject: subject, flow: "", sessionID: nil), fetched: fetched)
    }

    /// A screen rendered from its scope, its start actions signed, fitted to the client.
    private func screen(
        _ template: ScreenTemplate, scope: TemplateScope, encoder: ReplyEncoder, profile: ClientProfile, served: ServedFlows
    ) throws -> FittedReply {
        let screen = try encoder.mintActions(in: ScreenRendering.render(template, scope: scope))
        return served.fitter.fit(screen, profile: profile, origin: "screen:\(template.name)")
    }

    // MARK: - Transactions

    /// One command as it arrived: verified claims, the input and its digest, the client.
    ///
    /// A class: the transaction body, its retries and a step's service call all hold the
    /// request, and as a struct of the claims, the input, the client and the served definitions
    /// each copy retained about 30 references (`Benchmarks/e2e/counts.sh`).
    final class CommandRequest: Sendable {
        let claims: PayloadClaims
        /// The payload is genuine but past its expiry: only a replay of what it already did is
        /// answered; anything else gets `payload_expired`.
        let expired: Bool
        let input: CommandInput
        let inputDigest: String
        let identity: ClientIdentity
        let profile: ClientProfile
        let now: Date
        /// The definitions served when the request arrived: it finishes on them.
        let served: ServedFlows

        init(
            claims: PayloadClaims, expired: Bool, input: CommandInput, inputDigest: String, identity: ClientIdentity,
            profile: ClientProfile, now: Date, served: ServedFlows
        ) {
            self.claims = claims
            self.expired = expired
            self.input = input
            self.inputDigest = inputDigest
            self.identity = identity
            self.profile = profile
            self.now = now
            self.served = served
        }
    }

    /// What a transaction body decided: the reply, and what to count once it is delivered.
    struct StepResult: Sendable {
        var reply: CommandReply
        var startedFlow: String?
        var finished: SessionResult?
        /// The fits of the reply's parts, published after COMMIT.
        var tallies: [@Sendable () -> Void] = []
        /// The step stopped at a service call: ``reply`` is not the answer yet.
        var calling: CallWork? = nil
        /// Another request's call for this step is in flight: ``reply`` is not the answer yet.
        var awaiting: CallWait? = nil
    }

    /// Runs a command: `body` in a transaction (see ``transaction(flow:_:)``); then, if the
    /// step stopped at a service call, the call and the transaction that applies it, or, if
    /// another request's call for the step is in flight, the wait for its answer. Publishes
    /// what the command returned, once.
    private func run(flow: String, started: ContinuousClock.Instant, _ body: @escaping @Sendable (PostgresConnection) async throws -> StepResult)
        async throws -> CommandReply
    {
        do {
            var result = try await transaction(flow: flow, body)
            let startedFlow = result.startedFlow
            if let wait = result.awaiting {
                result = try await waitForCall(wait)
            } else if var work = result.calling {
                // The command's calls end within the budget counted from the command's start,
                // so the time its first transaction took is not given to them again.
                work.deadline = started + callBudget
                result = try await call(work)
            }
            result.startedFlow = result.startedFlow ?? startedFlow
            report(result, started: started)
            return result.reply
        } catch {
            if let mapped = Self.commandError(error, flow: flow.isEmpty ? nil : flow) {
                metrics.commandFinished(flow: flowLabel(flow), outcome: .invalid, duration: ContinuousClock.now - started)
                if let postgres = error as? PostgresError, postgres.isDataRejection {
                    // Input reached a database rule the flow's own validation should have
                    // stopped: worth a warning (without the values, which may be user input).
                    logger.warning(
                        "the database refused a command's data",
                        metadata: ["flow": .string(flow), "sqlstate": .string(postgres.sqlState ?? ""), "constraint": .string(postgres.constraint ?? "")])
                }
                throw mapped
            }
            throw error
        }
    }

    /// Makes a step's service calls, one after another, until the step answers. Duplicates of
    /// the command arriving meanwhile on this replica wait for that answer.
    private func call(_ first: CallWork) async throws -> StepResult {
        let key = Self.flightKey(first.session, first.calling.step)
        let flight = CallFlight()
        let ours = flights.withLock { flights -> Bool in
            if flights[key] != nil { return false }
            flights[key] = flight
            return true
        }
        if !ours {
            return try await waitForCall(CallWait(session: first.session, calling: first.calling, flow: first.command.claims.flow))
        }
        do {
            var result = try await perform(first)
            while var next = result.calling {
                // A step that goes from one call to the next: the calls share the command's
                // budget, and a request whose deadline passed makes no more (the flow's loop
                // guard ends a loop through a call; this ends the wait for it).
                try Task.checkCancellation()
                next.deadline = first.deadline
                result = try await perform(next)
            }
            flights.withLock { _ = $0.removeValue(forKey: key) }
            flight.finish(.success(result.reply.body))
            return result
        } catch {
            flights.withLock { _ = $0.removeValue(forKey: key) }
            flight.finish(.failure(error))
            throw error
        }
    }

    /// Runs `body` in a transaction and returns what it decided.
    ///
    /// If the connection breaks after COMMIT was sent, nobody knows whether the transaction
    /// committed. The body is then run again in a new transaction, and the command log
    /// decides: if the first attempt committed, the body finds its log entry and answers a
    /// replay of the same bytes, and the first attempt's result is delivered (not marked as a
    /// replay, counted once); if it did not, this is the command's first and only run.
    func transaction(flow: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> StepResult) async throws -> StepResult {
        let attempt = Mutex<StepResult?>(nil)
        do {
            return try await pool.withTransaction { db in
                let result = try await body(db)
                attempt.withLock { $0 = result }
                return result
            }
        } catch let error as PostgresError where error.code == .commitOutcomeUnknown {
            let first = attempt.withLock { $0 }
            logger.warning("the outcome of COMMIT is unknown (the connection broke, or the deadline passed, after it was sent); the command log decides", metadata: ["flow": .string(flow)])
            return try await pool.withTransaction { db in
                let again = try await body(db)
                if again.reply.replayed, let first, first.reply.body == again.reply.body { return first }
                // A step that stopped at a call committed its calling record: going on with
                // the first attempt's call is going on with the same key.
                if let first, first.calling != nil, again.awaiting != nil { return first }
                return again
            }
        }
    }

    /// The one mapping of what a flow, an effect, a guard, a loader or the database can throw
    /// to a client-facing ``CommandError``. Nil for what is not the client's doing (the database
    /// being unavailable, a definition bug): the server maps those itself.
    static func commandError(_ error: any Error, flow: String?) -> CommandError? {
        switch error {
        case let error as CommandError:
            return error
        case let error as FlowEngineError where error.kind != .definition:
            return CommandError(.invalidRequest, error.message, flow: flow)
        case let error as FlowCallError:
            return CommandError(error, flow: flow)
        case let error as PostgresError where error.isDataRejection:
            return CommandError(.invalidRequest, "the input was refused: it breaks a data rule", flow: flow)
        default:
            return nil
        }
    }

    // MARK: - Steps (on the connection's loop, inside the transaction)

    private func start(_ request: CommandRequest, id: UUID, parameters: JSONObject, db: PostgresConnection) async throws -> StepResult {
        let claims = request.claims
        guard let engine = request.served.engine(starting: claims.flow, for: claims.subject) else {
            throw CommandError(.notFound, "flow '\(claims.flow)' no longer exists", flow: claims.flow)
        }
        guard let subject = FlowSubject(claims.subject), engine.flow.audience.admits(subject.kind) else {
            throw CommandError(.forbidden, "flow '\(claims.flow)' cannot run as \(claims.subject)", flow: claims.flow)
        }
        let session = SessionRow(
            id: id, subject: claims.subject, flow: claims.flow, definitionHash: engine.flow.hash, state: engine.flow.start,
            step: 0, context: [:], status: "active", expiresAt: request.now.addingTimeInterval(engine.flow.ttl.seconds))
        let call = FlowCall(
            subject: subject, flow: claims.flow, sessionID: id.lowercased, clientAddress: request.identity.address)
        // The claim on the session id travels with the first statement the flow sends (one round
        // trip fewer), so the flow starts before the claim's answer is known. A start that finds
        // its session claimed already (a repeat) has its flow's statements refused from then on,
        // undoes what the flow did (ROLLBACK goes with the next statement) and answers from the
        // session. An expired start action may still be a retry of one that ran: look, never start.
        if !request.expired {
            let claim = SessionStore.claimAhead(db, session: session)
            let host = DatabaseFlowHost(registry: registry, connection: db, logger: logger)
            let started = await Result { try await engine.start(parameters: parameters, host: host, call: call) }
            let claimed: Bool
            do {
                claimed = try await SessionStore.claimed(db, claim)
            } catch {
                _ = try started.get() // the flow's own failure (a deadline, a lost connection) says more
                throw error
            }
            if claimed {
                return try await settle(
                    try started.get(), session: session, engine: engine, command: request, event: "start", startedFlow: claims.flow, db: db)
            }
            try db.restartTransaction()
        }
        guard let (existing, logged) = try await SessionStore.lock(db, id: id, step: 0, event: "start") else {
            return StepResult(reply: expiredBody(flow: claims.flow, parameters: parameters, request: request))
        }
        guard existing.subject.hasSameBytes(as: claims.subject) else {
            throw CommandError(.forbidden, "this action belongs to someone else", flow: claims.flow)
        }
        if logged == nil, existing.step == 0, let calling = Calling(existing) {
            return continueCalling(calling, session: existing, command: request, event: "start", db: db)
        }
        // The same button again (a double tap, a retry) gets the session's first answer —
        // unless the session has moved past it: then this screen is out of date.
        guard let logged, logged.matches(request.inputDigest), existing.step <= 1 else {
            return StepResult(reply: stale(flow: claims.flow))
        }
        return StepResult(reply: replay(logged.response, flow: claims.flow))
    }

    private func step(_ request: CommandRequest, db: PostgresConnection) async throws -> StepResult {
        let claims = request.claims
        guard let id = claims.sessionID else { throw CommandError(.invalidPayload, "the payload names no session") }
        guard case (let session, var logged)? = try await SessionStore.lock(db, id: id, step: claims.step, event: claims.event) else {
            // A genuine payload for a session that is gone (cleaned up): start over.
            return StepResult(reply: expiredBody(flow: claims.flow, parameters: nil, request: request))
        }
        guard session.subject.hasSameBytes(as: claims.subject) else {
            throw CommandError(.forbidden, "this action belongs to someone else", flow: claims.flow)
        }
        if logged == nil, session.step != claims.step {
            // We may have waited for the lock while a copy of this command ran and committed:
            // the join above read the log from before the wait, a fresh statement sees it.
            logged = try await SessionStore.logged(db, id: id, step: claims.step, event: claims.event)
        }
        if let logged {
            // Processed before: the identical request gets its reply, any other is stale.
            guard logged.matches(request.inputDigest) else { return StepResult(reply: stale(flow: session.flow)) }
            return StepResult(reply: replay(logged.response, flow: session.flow))
        }
        // The identical command while this step's call is in flight waits for its answer,
        // whatever the payload's or the session's expiry: it is the same tap, and the answer is
        // coming. (Once the call's lease has run out, expiry decides as for any step.)
        // (Read once: the step's call, if the session is on this step.)
        let calling = session.status == "active" && session.step == claims.step ? Calling(session) : nil
        if let calling, calling.until > clock() {
            return continueCalling(calling, session: session, command: request, event: claims.event, db: db)
        }
        let parameters = session.context["params"]?.objectValue
        if session.status == "active", session.expiresAt < request.now {
            SessionStore.markExpired(db, id: id)
            return StepResult(reply: expiredBody(flow: session.flow, parameters: parameters, request: request), finished: .expired)
        }
        if request.expired || session.status == "expired" {
            return StepResult(reply: expiredBody(flow: session.flow, parameters: parameters, request: request))
        }
        // Another event already moved the session on (or it ended): the client is looking at
        // something stale and should refresh it.
        guard session.status == "active", session.step == claims.step else {
            return StepResult(reply: stale(flow: session.flow))
        }
        // The replica that made this step's call died mid-call (its lease ran out).
        if let calling {
            return continueCalling(calling, session: session, command: request, event: claims.event, db: db)
        }
        let engine = try await engine(hash: session.definitionHash, served: request.served, db: db)
        guard let subject = FlowSubject(session.subject) else {
            throw CommandError(.forbidden, "the session's subject is not valid", flow: session.flow)
        }
        let call = FlowCall(
            subject: subject, flow: session.flow, sessionID: id.lowercased, clientAddress: request.identity.address)
        let host = DatabaseFlowHost(registry: registry, connection: db, logger: logger)
        let result = try await engine.handle(
            event: claims.event, input: request.input, session: FlowSessionState(state: session.state, context: session.context),
            host: host, call: call)
        return try await settle(result, session: session, engine: engine, command: request, event: claims.event, db: db)
    }

    // MARK: - Helpers

    private func authorize(_ claims: PayloadClaims, identity: ClientIdentity) throws {
        guard !identity.isAnonymous else {
            throw CommandError(.unauthenticated, "sign in (Authorization: Bearer …) or identify the device (X-Device-Id)", flow: claims.flow)
        }
        guard identity.speaks(for: claims.subject) else {
            throw CommandError(.forbidden, "this action was issued to someone else", flow: claims.flow)
        }
    }

    /// The engine for a definition hash: current files first, then definitions stored by
    /// earlier deployments (a session keeps the rules it started on).
    func engine(hash: String, served: ServedFlows, db: PostgresConnection) async throws -> FlowEngine {
        if let engine = pinned.withLock({ $0[hash] }) { return engine }
        guard let stored = try await SessionStore.definitionSource(db, hash: hash) else {
            throw FlowEngineError(kind: .definition, message: "no flow definition with hash \(hash.prefix(12)) is stored")
        }
        let (flow, diagnostics) = FlowLoader.load(source: stored.source, file: "stored/\(hash.prefix(12))/\(stored.flow).yaml")
        guard let flow, !diagnostics.hasErrors else {
            throw FlowEngineError(kind: .definition, message: "stored definition \(hash.prefix(12)) of '\(stored.flow)' no longer loads")
        }
        let engine = FlowEngine(flow: flow, screens: served.bundle.screens)
        // Kept only if made with the screens served now: a request still on the release before
        // must not leave its screens behind once the next one is served.
        // (Under the served lock, as in `serve`: a release cannot come between check and store.)
        self.served.withLock { current in
            if current === served { pinned.withLock { $0[hash] = engine } }
        }
        return engine
    }

    func encode(_ reply: FlowReply, session: SessionRow, request: CommandRequest) throws -> (FittedReply, CommandOutcome) {
        let encoder = makeEncoder(
            session: ReplyEncoder.Session(
                subject: session.subject, flow: session.flow, id: session.id, step: session.step,
                expires: Int(session.expiresAt.timeIntervalSince1970), parameters: session.context["params"]?.objectValue),
            identity: request.identity, profile: request.profile, now: request.now, served: request.served)
        let fitted = request.served.fitter.fit(try encoder.encode(reply), profile: request.profile, origin: "flow:\(session.flow)")
        return (fitted, Self.outcome(of: reply))
    }

    func makeEncoder(
        session: ReplyEncoder.Session?, identity: ClientIdentity, profile: ClientProfile, now: Date, served: ServedFlows
    ) -> ReplyEncoder {
        ReplyEncoder(signer: signer, identity: identity, profile: profile, session: session, audiences: served.audiences, now: now)
    }

    static func outcome(of reply: FlowReply) -> CommandOutcome {
        switch reply {
        case .done: .done
        case .refresh: .refresh
        case .input: .input
        case .screen: .screen
        case .error: .error
        }
    }

    func replay(_ logged: [UInt8], flow: String) -> CommandReply {
        CommandReply(body: logged, replayed: true, outcome: .replayed, flow: flow)
    }

    /// What a command that is not the one its step processed gets: it changes nothing, and the
    /// client reloads what it shows.
    func stale(flow: String) -> CommandReply {
        CommandReply(body: Self.staleBody, replayed: false, outcome: .stale, flow: flow)
    }

    static let staleBody = JSONEncoding.encode(["type": "refresh", "message": "This screen was out of date and has been refreshed."])

    /// The answer to an expired payload: an error with an action that starts the flow again
    /// (with the session's parameters).
    private func expiredBody(flow: String, parameters: JSONObject?, request: CommandRequest) -> CommandReply {
        let encoder = makeEncoder(session: nil, identity: request.identity, profile: request.profile, now: request.now, served: request.served)
        var object: JSONObject = [
            "type": "error", "code": "payload_expired", "message": "This has expired. Start again to continue.",
        ]
        if request.served.current[flow] != nil, let restart = try? encoder.start(flow: flow, parameters: parameters, title: "Start again") {
            object["retry"] = restart
        }
        return CommandReply(body: JSONEncoding.encode(.object(object)), replayed: false, outcome: .error, flow: flow)
    }

    private func report(_ result: StepResult, started: ContinuousClock.Instant) {
        for tally in result.tallies { tally() }
        let flow = flowLabel(result.reply.flow)
        metrics.commandFinished(flow: flow, outcome: result.reply.outcome, duration: ContinuousClock.now - started)
        if result.startedFlow != nil { metrics.sessionStarted(flow: flow) }
        if let finished = result.finished { metrics.sessionFinished(flow: flow, result: finished) }
    }

    /// A flow name safe for a metric label: a known flow, else "unknown".
    func flowLabel(_ flow: String) -> String { served.withLock { $0.bundle.flows[flow] != nil } ? flow : "unknown" }

    /// Marks active sessions past their expiry as expired and forgets idempotency keys older
    /// than a day (run periodically).
    public func expireSessions(limit: Int = 1000) async throws -> Int {
        let flows = try await pool.withTransaction { db in
            try await IdempotencyStore.sweep(db, limit: limit)
            return try await SessionStore.expireDue(db, limit: limit)
        }
        for flow in flows { metrics.sessionFinished(flow: flowLabel(flow), result: .expired) }
        return flows.count
    }
}

extension FlowDefinition.Audience {
    /// Whether a subject of this kind may run the flow.
    func admits(_ kind: FlowSubject.Kind) -> Bool {
        switch self {
        case .user: kind == .user
        case .device: kind == .device
        case .any: true
        }
    }
}

extension Duration {
    /// In seconds, fractions kept (for `Date` arithmetic and metrics).
    package var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
