import BatonFlows
import BatonJSON
import BatonPostgres
import Foundation
import Logging
import Synchronization

/// Service calls: a step that reaches `call:` is recorded as calling and committed; the call
/// runs with no connection and no row lock held; its result is applied in a second
/// transaction. Every write carries an `Idempotency-Key` derived from session, step, event and
/// call, so the client's retries, Baton's own and a retry after a crash all send the same key.
extension FlowRuntime {
    /// A call recorded in a session (`context.calling`) while it is in flight.
    struct Calling: Sendable {
        /// The call's id in the session's definition.
        var call: String
        var event: String
        var step: Int
        /// The digest of the input of the command that made the call: only its retries may
        /// wait for it or take it over.
        var inputDigest: String
        /// Until when the replica that made the call owns it (its worst case, every retry
        /// included). A request finding it later takes the call over: that replica is gone.
        var until: Date
        var request: ServiceRequest
        /// The action states the command had passed through when it stopped at the call (the
        /// flow's loop guard goes on counting from here).
        var hops: Int

        static let key = "calling"

        init(call: String, event: String, step: Int, inputDigest: String, until: Date, request: ServiceRequest, hops: Int) {
            self.call = call
            self.event = event
            self.step = step
            self.inputDigest = inputDigest
            self.until = until
            self.request = request
            self.hops = hops
        }

        init?(_ session: SessionRow) {
            guard let object = session.context[Self.key]?.objectValue, let call = object["call"]?.stringValue,
                let event = object["event"]?.stringValue, let step = object["step"]?.intValue, let digest = object["digest"]?.stringValue,
                let until = object["until"]?.intValue, let request = object["request"].flatMap(ServiceRequest.init(json:))
            else { return nil }
            self.init(
                call: call, event: event, step: step, inputDigest: digest, until: Date(timeIntervalSince1970: Double(until) / 1000),
                request: request, hops: object["hops"]?.intValue ?? 0)
        }

        var jsonValue: JSONValue {
            [
                "call": .string(call), "event": .string(event), "step": .int(step), "digest": .string(inputDigest),
                "until": .int(Int(until.timeIntervalSince1970 * 1000)), "request": request.jsonValue, "hops": .int(hops),
            ]
        }
    }

    /// A call this request must make, and how to apply its result.
    struct CallWork: Sendable {
        var session: UUID
        var calling: Calling
        var command: CommandRequest
        /// When the command's calls must be done by (set by ``run``: the command's start plus
        /// the call budget); nil is the whole budget from the call's start.
        var deadline: ContinuousClock.Instant? = nil
    }

    /// Another request's call for the same step is in flight: wait for its reply.
    struct CallWait: Sendable {
        var session: UUID
        var calling: Calling
        var flow: String
    }

    /// A step's end: a final answer is encoded and logged; a step stopped at a service call is
    /// recorded as calling (no log yet) and handed back to make the call.
    func settle(
        _ step: FlowStep, session: SessionRow, engine: FlowEngine, command: CommandRequest, event: String, startedFlow: String? = nil,
        db: PostgresConnection
    ) async throws -> StepResult {
        var session = session
        session.state = step.session.state
        session.context = step.session.context
        if let pending = step.pending {
            var request = pending.request
            if request.method != "GET" {
                request.idempotencyKey = ServiceRequest.idempotencyKey(
                    session: session.id.lowercased, step: session.step, event: event, call: pending.call)
            }
            let calling = Calling(
                call: pending.call, event: event, step: session.step, inputDigest: command.inputDigest,
                until: lease(for: request, served: command.served), request: request, hops: pending.hops)
            session.context[Calling.key] = calling.jsonValue
            session.status = "active"
            // The session does not expire while its call may still be in flight: its answer,
            // and the identical command's wait for it, go on from where the step stopped.
            session.expiresAt = max(session.expiresAt, calling.until)
            SessionStore.update(db, session: session)
            return StepResult(
                reply: CommandReply(body: [], replayed: false, outcome: .done, flow: session.flow), startedFlow: startedFlow,
                calling: CallWork(session: session.id, calling: calling, command: command))
        }
        let loggedStep = session.step
        session.step += 1
        session.status = step.finished?.rawValue ?? "active"
        session.expiresAt = command.now.addingTimeInterval(engine.flow.ttl.seconds)
        let (fitted, outcome) = try encode(step.reply, session: session, request: command)
        SessionStore.record(
            db, session: session, loggedStep: loggedStep, event: event, inputDigest: command.inputDigest, response: fitted.bytes,
            outcome: outcome.rawValue)
        return StepResult(
            reply: CommandReply(body: fitted.bytes, replayed: false, outcome: outcome, flow: session.flow), startedFlow: startedFlow,
            finished: step.finished, tallies: [fitted.publish])
    }

    /// Added to a call's worst case before another request may take it over.
    static let leaseMargin: Duration = .seconds(2)

    /// Until when a replica making `request` owns the call: the call's worst case (every
    /// attempt and backoff, within the call budget) plus a margin.
    func lease(for request: ServiceRequest, served: ServedFlows) -> Date {
        let worstCase = min(served.bundle.service(request.service).worstCase(attemptTimeout: request.timeout), callBudget)
        return clock().addingTimeInterval((worstCase + Self.leaseMargin).seconds)
    }

    /// A command for a step whose call is in flight (or whose replica died mid-call): the
    /// identical command waits for it, or takes it over once its lease ran out; any other is
    /// stale.
    func continueCalling(_ calling: Calling, session: SessionRow, command: CommandRequest, event: String, db: PostgresConnection)
        -> StepResult
    {
        guard calling.event == event, calling.inputDigest == command.inputDigest, calling.step == session.step else {
            return StepResult(reply: stale(flow: session.flow))
        }
        if calling.until > clock() {
            return StepResult(
                reply: CommandReply(body: [], replayed: false, outcome: .done, flow: session.flow),
                awaiting: CallWait(session: session.id, calling: calling, flow: session.flow))
        }
        // The replica that made the call is gone: make it again, with the same key.
        var taken = calling
        taken.until = lease(for: calling.request, served: command.served)
        var session = session
        session.context[Calling.key] = taken.jsonValue
        session.expiresAt = max(session.expiresAt, taken.until)
        SessionStore.update(db, session: session)
        logger.notice(
            "taking over a service call whose replica did not finish it",
            metadata: ["flow": .string(session.flow), "service": .string(calling.request.service)])
        return StepResult(
            reply: CommandReply(body: [], replayed: false, outcome: .done, flow: session.flow),
            calling: CallWork(session: session.id, calling: taken, command: command))
    }

    /// Makes `request` to its service as `served` declares it. A request that cannot be sent as
    /// rendered is `refused` without leaving.
    func send(_ request: ServiceRequest, served: ServedFlows) async -> ServiceResult {
        if let problem = request.unsendable {
            logger.warning(
                "a service call was refused before it left",
                metadata: ["service": .string(request.service), "method": .string(request.method), "problem": .string(problem)])
            return .failure(.refused)
        }
        return await services.call(request, service: served.bundle.service(request.service))
    }

    /// Makes the call (no transaction open), then applies its result in a new one. The call gets
    /// what is left of the command's budget: calls made one after another in one command share
    /// it, and one with nothing left is a timeout without being sent.
    func perform(_ work: CallWork) async throws -> StepResult {
        var request = work.calling.request
        let budget = work.deadline.map { min(callBudget, $0 - .now) } ?? callBudget
        request.budget = budget
        let result: ServiceResult = budget > .zero ? await send(request, served: work.command.served) : .failure(.timeout)
        return try await transaction(flow: work.command.claims.flow) { [self] db in
            try await apply(result, of: work, db: db)
        }
    }

    /// The second transaction: the session must still be waiting on this very call.
    private func apply(_ result: ServiceResult, of work: CallWork, db: PostgresConnection) async throws -> StepResult {
        let calling = work.calling
        guard case (var session, var logged)? = try await SessionStore.lock(db, id: work.session, step: calling.step, event: calling.event) else {
            throw CommandError(.notFound, "the session ended while its service call was in flight", flow: work.command.claims.flow)
        }
        if logged == nil, session.step != calling.step {
            // We may have waited for the lock while another request (a takeover) finished this
            // step: the join above read the log from before the wait, a fresh statement sees it.
            logged = try await SessionStore.logged(db, id: work.session, step: calling.step, event: calling.event)
        }
        if let logged {
            // Another request (a takeover) finished this step first: its answer stands.
            guard logged.matches(calling.inputDigest) else { return StepResult(reply: stale(flow: session.flow)) }
            return StepResult(reply: replay(logged.response, flow: session.flow))
        }
        guard let current = Calling(session), current.call == calling.call, current.step == calling.step, session.step == calling.step
        else { return StepResult(reply: stale(flow: session.flow)) }
        session.context[Calling.key] = nil
        let engine = try await engine(hash: session.definitionHash, served: work.command.served, db: db)
        guard let subject = FlowSubject(session.subject) else {
            throw CommandError(.forbidden, "the session's subject is not valid", flow: session.flow)
        }
        let call = FlowCall(
            subject: subject, flow: session.flow, sessionID: session.id.lowercased,
            clientAddress: work.command.identity.address)
        let host = DatabaseFlowHost(registry: registry, connection: db, logger: logger)
        let step = try await engine.resume(
            call: calling.call, result: result, session: FlowSessionState(state: session.state, context: session.context), host: host,
            call: call, hops: calling.hops)
        return try await settle(step, session: session, engine: engine, command: work.command, event: calling.event, db: db)
    }

    /// Waits for another request's call to this step: on this replica, for its reply; on
    /// another, by watching the command log. Past the wait, 409 with `Retry-After`.
    func waitForCall(_ wait: CallWait) async throws -> StepResult {
        let key = Self.flightKey(wait.session, wait.calling.step)
        let budget = min(callWait, max(.milliseconds(100), .seconds(wait.calling.until.timeIntervalSince(clock()))))
        if let flight = flights.withLock({ $0[key] }) {
            if let bytes = try await flight.reply(within: budget) {
                return StepResult(reply: replay(bytes, flow: wait.flow))
            }
        } else {
            let deadline = ContinuousClock.now + budget
            while ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                let logged = try await pool.withConnection { [wait] db in
                    try await SessionStore.logged(db, id: wait.session, step: wait.calling.step, event: wait.calling.event)
                }
                if let logged {
                    guard logged.matches(wait.calling.inputDigest) else { return StepResult(reply: stale(flow: wait.flow)) }
                    return StepResult(reply: replay(logged.response, flow: wait.flow))
                }
            }
        }
        var error = CommandError(
            .inFlight, "this action is still waiting for \(wait.calling.request.service); try again in a moment", flow: wait.flow)
        error.retryAfter = max(1, Int(wait.calling.until.timeIntervalSince(clock()).rounded(.up)))
        throw error
    }

    static func flightKey(_ session: UUID, _ step: Int) -> String { "\(session.uuidString)/\(step)" }
}

/// A call in flight on this replica: duplicates of its command wait here for its reply.
final class CallFlight: Sendable {
    private let result = SharedResult<Result<[UInt8], any Error>>()

    init() {}

    /// The reply's bytes once the call's step answered, or nil if that took longer than
    /// `timeout` or the waiting request was cancelled.
    func reply(within timeout: Duration) async throws -> [UInt8]? {
        try await result.value(until: .now + timeout)?.get()
    }

    func finish(_ result: Result<[UInt8], any Error>) { self.result.finish(result) }
}
