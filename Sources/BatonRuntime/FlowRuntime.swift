import BatonFlows
import BatonJSON
import BatonPostgres
import Foundation
import Logging
import Synchronization

/// Fits a reply to the client and encodes it: the contract layer replaces components the
/// client cannot render with their fallbacks, drops what it cannot show, and counts both.
public protocol ReplyFitter: Sendable {
    /// The wire bytes of `reply` as this client can render it.
    /// - Parameter origin: the flow or screen that produced the reply (for logs and metrics).
    func encode(_ reply: JSONValue, profile: ClientProfile, origin: String) -> [UInt8]
}

/// Encodes replies as they are (tools and tests without a contract).
public struct PassThroughFitter: ReplyFitter {
    public init() {}
    public func encode(_ reply: JSONValue, profile: ClientProfile, origin: String) -> [UInt8] { JSONEncoding.encode(reply) }
}

/// Where the runtime reports what happened (Prometheus in the server, nothing in tools).
public protocol RuntimeMetrics: Sendable {
    func commandFinished(flow: String, outcome: CommandOutcome, duration: Duration)
    func sessionStarted(flow: String)
    func sessionFinished(flow: String, result: SessionResult)
}

/// Metrics that go nowhere.
public struct NoRuntimeMetrics: RuntimeMetrics {
    public init() {}
    public func commandFinished(flow: String, outcome: CommandOutcome, duration: Duration) {}
    public func sessionStarted(flow: String) {}
    public func sessionFinished(flow: String, result: SessionResult) {}
}

/// Runs commands: verifies the payload, then — in one transaction — locks the session, runs
/// the engine step with its effects, records the new state and the response, and commits.
/// The command log makes every command exactly-once: a repeat gets the stored bytes.
public final class FlowRuntime: Sendable {
    public let bundle: FlowBundle
    let registry: FlowRegistry
    let pool: PostgresPool
    let signer: PayloadSigner
    let fitter: any ReplyFitter
    let metrics: any RuntimeMetrics
    let logger: Logger
    let clock: @Sendable () -> Date
    /// Engines of the current files, by flow name and by hash.
    let current: [String: FlowEngine]
    let audiences: [String: FlowDefinition.Audience]
    /// Engines for older definitions that running sessions still use, loaded on demand.
    private let pinned = Mutex<[String: FlowEngine]>([:])

    public init(
        bundle: FlowBundle, registry: FlowRegistry, pool: PostgresPool, signer: PayloadSigner,
        fitter: any ReplyFitter = PassThroughFitter(), metrics: any RuntimeMetrics = NoRuntimeMetrics(), logger: Logger,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.bundle = bundle
        self.registry = registry
        self.pool = pool
        self.signer = signer
        self.fitter = fitter
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        self.current = bundle.engines
        self.audiences = bundle.flows.mapValues(\.audience)
        pinned.withLock { cache in
            for engine in bundle.engines.values { cache[engine.flow.hash] = engine }
        }
    }

    /// Stores the current definitions by hash, so sessions can always find the rules they
    /// started on. Called once at startup.
    public func publishDefinitions() async throws {
        let definitions = Array(bundle.flows.values)
        try await pool.withTransaction { db in try SessionStore.publish(db, definitions: definitions) }
    }

    // MARK: - Commands

    /// Runs one command.
    public func execute(payload: String, input: CommandInput, identity: ClientIdentity, profile: ClientProfile) async throws
        -> CommandReply
    {
        let started = ContinuousClock.now
        let now = clock()
        let claims: PayloadClaims
        switch signer.verify(payload, now: now) {
        case .failure(.invalid(let message)):
            metrics.commandFinished(flow: "unknown", outcome: .invalid, duration: ContinuousClock.now - started)
            throw CommandError(.invalidPayload, message)
        case .failure(.expired(let expired)):
            try authorize(expired, identity: identity)
            let result = try await expiredReply(expired, identity: identity, profile: profile, now: now)
            report(result, started: started)
            return result.reply
        case .success(let verified):
            claims = verified
        }
        try authorize(claims, identity: identity)
        do {
            let result = try await pool.withTransaction { [self] db in
                try claims.isStart
                    ? start(claims, payload: payload, identity: identity, profile: profile, now: now, db: db)
                    : step(claims, input: input, identity: identity, profile: profile, now: now, db: db)
            }
            report(result, started: started)
            return result.reply
        } catch let error as CommandError {
            metrics.commandFinished(flow: flowLabel(claims.flow), outcome: .invalid, duration: ContinuousClock.now - started)
            throw error
        } catch let error as FlowEngineError where error.kind != .definition {
            metrics.commandFinished(flow: flowLabel(claims.flow), outcome: .invalid, duration: ContinuousClock.now - started)
            throw CommandError(.invalidRequest, error.message, flow: claims.flow)
        } catch let error as FlowCallError {
            metrics.commandFinished(flow: flowLabel(claims.flow), outcome: .invalid, duration: ContinuousClock.now - started)
            throw CommandError(error, flow: claims.flow)
        } catch let error as PostgresError where error.isDataRejection {
            // Input reached a database rule the flow's own validation should have stopped: the
            // command is refused (the transaction rolled back); the gap is worth a warning.
            metrics.commandFinished(flow: flowLabel(claims.flow), outcome: .invalid, duration: ContinuousClock.now - started)
            logger.warning("the database refused a command's data", metadata: ["flow": .string(claims.flow), "sqlstate": .string(error.sqlState ?? "")])
            throw CommandError(.invalidRequest, "the input was refused: it breaks a data rule", flow: claims.flow)
        }
    }

    /// Starts `flow` for the request's subject without a payload (deep links): a new session
    /// every time, answered with the flow's first response.
    public func startFlow(_ flow: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile) async throws
        -> CommandReply
    {
        let started = ContinuousClock.now
        guard let engine = current[flow] else { throw CommandError(.notFound, "there is no flow '\(flow)'") }
        guard let subject = identity.subject(for: engine.flow.audience) else {
            throw CommandError(
                identity.isAnonymous ? .unauthenticated : .forbidden,
                "flow '\(flow)' needs a \(engine.flow.audience == .device ? "device (X-Device-Id)" : "signed-in user")", flow: flow)
        }
        let claims = PayloadClaims(
            subject: subject.description, flow: flow, sessionID: nil, step: 0, event: "start", expires: 0,
            parameters: parameters)
        let now = clock()
        do {
            let result = try await pool.withTransaction { [self] db in
                try start(claims, payload: nil, identity: identity, profile: profile, now: now, db: db)
            }
            report(result, started: started)
            return result.reply
        } catch let error as FlowEngineError where error.kind != .definition {
            throw CommandError(.invalidRequest, error.message, flow: flow)
        }
    }

    /// A start action's payload for `flow`, as a screen rendered now for this client would carry
    /// it (for tools and tests that start flows directly).
    public func mintStart(flow: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile) async throws -> String {
        guard current[flow] != nil else { throw CommandError(.notFound, "there is no flow '\(flow)'") }
        let now = clock()
        return try await pool.withConnection { [self] db in
            let encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: now, db: db)
            guard let payload = try encoder.start(flow: flow, parameters: parameters, title: nil)?["payload"]?.stringValue else {
                throw CommandError(.forbidden, "flow '\(flow)' cannot run for this client")
            }
            return payload
        }
    }

    // MARK: - Screens

    /// Renders a screen template for this client: loaders run in one read-only snapshot,
    /// start actions are signed, the result is fitted to the client's contract. The ETag is
    /// the hash of the exact bytes.
    public func renderScreen(_ name: String, parameters: JSONObject, identity: ClientIdentity, profile: ClientProfile) async throws
        -> ScreenReply
    {
        guard let template = bundle.screens[name] else { throw CommandError(.notFound, "there is no screen '\(name.prefix(64))'") }
        let subject = identity.primarySubject ?? FlowSubject(kind: .device, id: "anonymous")
        let now = clock()
        do {
            return try await pool.withTransaction(isolation: .readOnlySnapshot) { [self] db in
                let host = DatabaseFlowHost(registry: registry, database: db, logger: logger)
                let screen = try ScreenRendering.render(
                    template, parameters: parameters, host: host, call: FlowCall(subject: subject, flow: "", sessionID: nil))
                let encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: now, db: db)
                let body = fitter.encode(try encoder.mintActions(in: screen), profile: profile, origin: "screen:\(name)")
                return ScreenReply(body: body)
            }
        } catch let error as FlowEngineError where error.kind == .invalidParameters {
            throw CommandError(.invalidRequest, error.message)
        } catch let error as FlowCallError {
            throw CommandError(error, flow: nil)
        } catch let error as PostgresError where error.isDataRejection {
            throw CommandError(.invalidRequest, "a parameter was refused: it breaks a data rule")
        }
    }

    // MARK: - Steps (on the database thread, inside the transaction)

    struct StepResult: Sendable {
        var reply: CommandReply
        var startedFlow: String?
        var finished: SessionResult?
    }

    private func start(
        _ claims: PayloadClaims, payload: String?, identity: ClientIdentity, profile: ClientProfile, now: Date,
        db: PostgresConnection
    ) throws -> StepResult {
        guard let engine = current[claims.flow] else {
            throw CommandError(.notFound, "flow '\(claims.flow)' no longer exists", flow: claims.flow)
        }
        guard let subject = FlowSubject(claims.subject), engine.flow.audience.admits(subject.kind) else {
            throw CommandError(.forbidden, "flow '\(claims.flow)' cannot run as \(claims.subject)", flow: claims.flow)
        }
        // A payload names its session, so repeats of one start find it; a deep link starts anew.
        let id = payload.map(PayloadSigner.sessionID(forStartPayload:)) ?? UUID()
        let ttl = engine.flow.ttl
        var session = SessionRow(
            id: id, subject: claims.subject, flow: claims.flow, definitionHash: engine.flow.hash, state: engine.flow.start,
            step: 0, context: [:], status: "active", expiresAt: now.addingTimeInterval(ttl.seconds))
        guard try SessionStore.claim(db, session: session) else {
            guard let (_, logged) = try SessionStore.lock(db, id: id, step: 0, event: "start"), let logged else {
                return StepResult(reply: try refresh(flow: claims.flow), startedFlow: nil, finished: nil)
            }
            return StepResult(reply: replay(logged, flow: claims.flow), startedFlow: nil, finished: nil)
        }
        let call = FlowCall(subject: subject, flow: claims.flow, sessionID: id.uuidString.lowercased())
        let host = DatabaseFlowHost(registry: registry, database: db, logger: logger)
        let step = try engine.start(parameters: claims.parameters ?? [:], host: host, call: call)
        _ = try SessionStore.bumpGeneration(db, subject: claims.subject)
        session.state = step.session.state
        session.context = step.session.context
        session.step = 1
        session.status = step.finished?.rawValue ?? "active"
        let (body, outcome) = try encode(step.reply, session: session, identity: identity, profile: profile, now: now, db: db)
        SessionStore.record(db, session: session, loggedStep: 0, event: "start", response: body, outcome: outcome.rawValue)
        return StepResult(
            reply: CommandReply(body: Array(body.utf8), replayed: false, outcome: outcome, flow: claims.flow),
            startedFlow: claims.flow, finished: step.finished)
    }

    private func step(
        _ claims: PayloadClaims, input: CommandInput, identity: ClientIdentity, profile: ClientProfile, now: Date,
        db: PostgresConnection
    ) throws -> StepResult {
        guard let id = claims.sessionID else { throw CommandError(.invalidPayload, "the payload names no session") }
        guard case (var session, let logged)? = try SessionStore.lock(db, id: id, step: claims.step, event: claims.event) else {
            // A genuine payload for a session that is gone (cleaned up): start over.
            return StepResult(
                reply: try expiredBody(flow: claims.flow, parameters: nil, identity: identity, profile: profile, now: now, db: db),
                startedFlow: nil, finished: nil)
        }
        guard session.subject == claims.subject else {
            throw CommandError(.forbidden, "this action belongs to someone else", flow: claims.flow)
        }
        if let logged { return StepResult(reply: replay(logged, flow: session.flow), startedFlow: nil, finished: nil) }
        if session.step != claims.step, let logged = try SessionStore.logged(db, id: id, step: claims.step, event: claims.event) {
            // We waited for the lock while a copy of this command ran and committed: the join
            // above read the log from before the wait, a fresh statement sees its entry.
            return StepResult(reply: replay(logged, flow: session.flow), startedFlow: nil, finished: nil)
        }
        if session.status == "active", session.expiresAt < now {
            SessionStore.markExpired(db, id: id)
            let reply = try expiredBody(
                flow: session.flow, parameters: session.context["params"]?.objectValue, identity: identity, profile: profile,
                now: now, db: db)
            return StepResult(reply: reply, startedFlow: nil, finished: .expired)
        }
        if session.status == "expired" {
            let reply = try expiredBody(
                flow: session.flow, parameters: session.context["params"]?.objectValue, identity: identity, profile: profile,
                now: now, db: db)
            return StepResult(reply: reply, startedFlow: nil, finished: nil)
        }
        // Another event already moved the session on (or it ended): the client is looking at
        // something stale and should refresh it.
        guard session.status == "active", session.step == claims.step else {
            return StepResult(reply: try refresh(flow: session.flow), startedFlow: nil, finished: nil)
        }
        let engine = try engine(hash: session.definitionHash, db: db)
        guard let subject = FlowSubject(session.subject) else {
            throw CommandError(.forbidden, "the session's subject is not valid", flow: session.flow)
        }
        let call = FlowCall(subject: subject, flow: session.flow, sessionID: id.uuidString.lowercased())
        let host = DatabaseFlowHost(registry: registry, database: db, logger: logger)
        let result = try engine.handle(
            event: claims.event, input: input, session: FlowSessionState(state: session.state, context: session.context),
            host: host, call: call)
        let loggedStep = session.step
        session.state = result.session.state
        session.context = result.session.context
        session.step += 1
        session.status = result.finished?.rawValue ?? "active"
        session.expiresAt = now.addingTimeInterval(engine.flow.ttl.seconds)
        let (body, outcome) = try encode(result.reply, session: session, identity: identity, profile: profile, now: now, db: db)
        SessionStore.record(db, session: session, loggedStep: loggedStep, event: claims.event, response: body, outcome: outcome.rawValue)
        return StepResult(
            reply: CommandReply(body: Array(body.utf8), replayed: false, outcome: outcome, flow: session.flow),
            startedFlow: nil, finished: result.finished)
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
    private func engine(hash: String, db: PostgresConnection) throws -> FlowEngine {
        if let engine = pinned.withLock({ $0[hash] }) { return engine }
        guard let stored = try SessionStore.definitionSource(db, hash: hash) else {
            throw FlowEngineError(kind: .definition, message: "no flow definition with hash \(hash.prefix(12)) is stored")
        }
        let (flow, diagnostics) = FlowLoader.load(source: stored.source, file: "stored/\(hash.prefix(12))/\(stored.flow).yaml")
        guard let flow, !diagnostics.hasErrors else {
            throw FlowEngineError(kind: .definition, message: "stored definition \(hash.prefix(12)) of '\(stored.flow)' no longer loads")
        }
        let engine = FlowEngine(flow: flow, screens: bundle.screens)
        pinned.withLock { $0[hash] = engine }
        return engine
    }

    private func encode(
        _ reply: FlowReply, session: SessionRow, identity: ClientIdentity, profile: ClientProfile, now: Date, db: PostgresConnection
    ) throws -> (String, CommandOutcome) {
        let encoder = makeEncoder(
            session: (session.subject, session.flow, session.id, session.step, Int(session.expiresAt.timeIntervalSince1970)),
            identity: identity, profile: profile, now: now, db: db)
        let body = fitter.encode(try encoder.encode(reply), profile: profile, origin: "flow:\(session.flow)")
        return (String(decoding: body, as: UTF8.self), Self.outcome(of: reply))
    }

    func makeEncoder(
        session: (subject: String, flow: String, id: UUID, step: Int, expires: Int)?, identity: ClientIdentity,
        profile: ClientProfile, now: Date, db: PostgresConnection
    ) -> ReplyEncoder {
        let generations = Mutex<[String: Int]>([:])
        return ReplyEncoder(
            signer: signer, identity: identity, profile: profile, session: session, audiences: audiences,
            generation: { subject in
                if let known = generations.withLock({ $0[subject] }) { return known }
                let value = try SessionStore.generation(db, subject: subject)
                generations.withLock { $0[subject] = value }
                return value
            }, now: now)
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

    private func replay(_ logged: String, flow: String) -> CommandReply {
        CommandReply(body: Array(logged.utf8), replayed: true, outcome: .replayed, flow: flow)
    }

    private func refresh(flow: String) throws -> CommandReply {
        CommandReply(body: JSONEncoding.encode(["type": "refresh"]), replayed: false, outcome: .stale, flow: flow)
    }

    /// The answer to an expired payload: an error with an action that starts the flow again
    /// (with the session's parameters). A session still marked active is marked expired.
    private func expiredReply(_ claims: PayloadClaims, identity: ClientIdentity, profile: ClientProfile, now: Date) async throws
        -> StepResult
    {
        try await pool.withTransaction { [self] db in
            var parameters = claims.parameters
            var finished: SessionResult?
            if let id = claims.sessionID, let (session, _) = try SessionStore.lock(db, id: id, step: claims.step, event: claims.event) {
                parameters = session.context["params"]?.objectValue
                if session.status == "active", session.expiresAt < now {
                    SessionStore.markExpired(db, id: id)
                    finished = .expired
                }
            }
            let reply = try expiredBody(flow: claims.flow, parameters: parameters, identity: identity, profile: profile, now: now, db: db)
            return StepResult(reply: reply, startedFlow: nil, finished: finished)
        }
    }

    private func expiredBody(
        flow: String, parameters: JSONObject?, identity: ClientIdentity, profile: ClientProfile, now: Date, db: PostgresConnection
    ) throws -> CommandReply {
        let encoder = makeEncoder(session: nil, identity: identity, profile: profile, now: now, db: db)
        var object: JSONObject = [
            "type": "error", "code": "payload_expired", "message": "This has expired. Start again to continue.",
        ]
        if current[flow] != nil, let restart = try encoder.start(flow: flow, parameters: parameters, title: "Start again") {
            object["retry"] = restart
        }
        return CommandReply(body: JSONEncoding.encode(.object(object)), replayed: false, outcome: .error, flow: flow)
    }

    private func report(_ result: StepResult, started: ContinuousClock.Instant) {
        let flow = flowLabel(result.reply.flow)
        metrics.commandFinished(flow: flow, outcome: result.reply.outcome, duration: ContinuousClock.now - started)
        if result.startedFlow != nil { metrics.sessionStarted(flow: flow) }
        if let finished = result.finished { metrics.sessionFinished(flow: flow, result: finished) }
    }

    /// A flow name safe for a metric label: a known flow, else "unknown".
    func flowLabel(_ flow: String) -> String { current[flow] != nil ? flow : "unknown" }

    /// Marks active sessions past their expiry as expired (run periodically).
    public func expireSessions(limit: Int = 1000) async throws -> Int {
        let flows = try await pool.withTransaction { db in try SessionStore.expireDue(db, limit: limit) }
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
    var seconds: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
