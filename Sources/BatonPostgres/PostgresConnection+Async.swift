import CLibPQ
import Foundation

/// Statements on a pooled connection, without blocking a thread.
///
/// Each method sends with libpq's non-blocking calls (`PQsendQueryPrepared`, `PQflush`) and
/// waits for the answer on the connection's ``DatabaseLoop`` (`PQconsumeInput` and
/// `PQisBusy` when the socket is readable). They run on the loop's thread: a pool body runs
/// with the loop as its task executor.
extension PostgresConnection {
    /// Runs one parameterised statement as a prepared statement (prepared on first use on this
    /// connection, then reused) and returns its rows. Parameters are `$1`, `$2`, ...
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> PostgresRows {
        try await query(sql, parameters: parameters.map(\.postgresParameter))
    }

    /// Like ``query(_:_:)`` with parameters already in wire form.
    @discardableResult
    public func query(_ sql: String, parameters: [PostgresParameter]) async throws -> PostgresRows {
        try await query(sql, parameters: parameters, preparedAgain: false)
    }

    /// `preparedAgain`: the statement was refused as unknown once and prepared again; a second
    /// refusal is the caller's (a pooler that keeps no prepared statements refuses every time).
    private func query(_ sql: String, parameters: [PostgresParameter], preparedAgain: Bool) async throws -> PostgresRows {
        if let refutation { throw refutation }
        if !deferred.isEmpty { return try await flushDeferred(then: (sql, parameters)) }
        let name = try await preparedName(for: sql)
        let sent = try withWireParameters(parameters) { count, values, lengths, formats in
            name.withUnsafeBufferPointer { PQsendQueryPrepared(handle, $0.baseAddress, count, values, lengths, formats, 0) }
        }
        guard sent == 1 else { throw connectionError() }
        noteSent()
        do {
            return try await collect()
        } catch let error as PostgresError where error.sqlState == SQLState.invalidSQLStatementName && !preparedAgain {
            // Someone ran DEALLOCATE ALL / DISCARD ALL behind our back: forget and retry once.
            preparedStatements.removeAll()
            return try await query(sql, parameters: parameters, preparedAgain: true)
        }
    }

    /// Runs SQL through the simple-query protocol: no parameters, several statements allowed.
    /// For migrations and fixed administrative statements only, never for user data.
    public func execute(_ sql: String) async throws {
        if !deferred.isEmpty { _ = try await flushDeferred(then: nil) }
        guard PQsendQuery(handle, sql) == 1 else { throw connectionError() }
        _ = try await collect()
    }

    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` if it returns, `ROLLBACK` if it
    /// throws. A transaction that failed inside `body` without throwing is refused at the end
    /// instead of being silently rolled back by `COMMIT`.
    ///
    /// `BEGIN` travels with the body's first statement and `COMMIT` with any statements the body
    /// queued with ``enqueue(_:_:)``, so a short transaction costs few round trips. A
    /// ``IsolationLevel/readOnlySnapshot`` that queued nothing sends no `COMMIT` at all: its
    /// `ROLLBACK` waits for the connection's next round trip (``PostgresPool`` sends it alone
    /// if nobody leases the connection within 10 ms; ``endSnapshot()`` sends it now).
    public func transaction<R>(
        isolation: IsolationLevel = .readCommitted, _ body: (PostgresConnection) async throws -> R
    ) async throws -> R {
        queue((isolation.beginStatement, [], nil))
        transactionIsolation = isolation
        defer {
            transactionIsolation = nil
            refutation = nil
        }
        do {
            let value = try await body(self)
            if PQtransactionStatus(handle) == PQTRANS_INERROR {
                throw PostgresError(
                    code: .protocolViolation,
                    message: "the transaction failed inside its body (an error was caught and ignored); rolled back")
            }
            if isolation == .readOnlySnapshot, deferred.isEmpty, refutation == nil {
                // Nothing to make durable: the reads are done and their answers final, so the
                // caller need not wait for the end. `ROLLBACK` (the same as COMMIT for a
                // read-only transaction) goes with the connection's next statements.
                queue(("ROLLBACK", [], nil))
                endsSnapshotLazily = true
            } else {
                try await commit()
            }
            return value
        } catch {
            deferred.removeAll()
            endsSnapshotLazily = false
            if abortReason == nil, isOpen, PQtransactionStatus(handle) != PQTRANS_IDLE { try? await execute("ROLLBACK") }
            throw error
        }
    }

    /// Undoes everything the running transaction did and begins it again, with the same
    /// isolation: for a body that learns half-way that it took the wrong path (a statement sent
    /// ahead answered what it had guessed otherwise). Statements queued and not yet sent are
    /// dropped; `ROLLBACK` and `BEGIN` go with the next statement, so a restart costs no round
    /// trip of its own.
    public func restartTransaction() throws {
        guard let isolation = transactionIsolation else {
            throw PostgresError(code: .protocolViolation, message: "restartTransaction() outside transaction(_:)")
        }
        refutation = nil
        deferred.removeAll()
        queue(("ROLLBACK", [], nil))
        queue((isolation.beginStatement, [], nil))
    }

    /// The rows of a statement sent with ``sendAhead(_:_:)``: sends it now if it is still
    /// queued, and throws its error if it failed.
    public func rows(of ahead: PostgresAhead) async throws -> PostgresRows {
        if ahead.outcome == nil, deferred.contains(where: { $0.ahead === ahead }) {
            // Its own empty answer is what the caller asks about, not an error here.
            do { _ = try await flushDeferred(then: nil) } catch let error as PostgresError where error.code == .guessRefuted {}
        }
        guard let outcome = ahead.outcome else {
            throw PostgresError(
                code: .protocolViolation, message: "a statement sent ahead was not run (an earlier one in its round trip failed, or its transaction ended)")
        }
        return try outcome.get()
    }

    /// Ends now a read-only snapshot left open by ``transaction(isolation:_:)`` (sends its
    /// queued `ROLLBACK`); nothing if there is none. The pool does this for a connection left
    /// idle; tests that count a piece of work's round trips do it to count the end as well.
    public func endSnapshot() async throws {
        guard endsSnapshotLazily else { return }
        _ = try await flushDeferred(then: nil)
    }

    /// Sends COMMIT (with any queued statements). A connection lost once COMMIT may have reached
    /// the server is not a plain lost connection: the transaction may have committed, so it is
    /// reported as ``PostgresError/Code/commitOutcomeUnknown`` and never retried blindly.
    private func commit() async throws {
        if let faults, faults.takeCommitCut() {
            if !deferred.isEmpty { _ = try await flushDeferred(then: nil) }
            // Send COMMIT, make sure it left, then cut the socket before reading the answer.
            guard PQsendQuery(handle, "COMMIT") == 1 else { throw connectionError() }
            try await flush()
            shutdown(PQsocket(handle), Int32(SHUT_RDWR))
            _ = try? await collect()
            throw PostgresError(code: .commitOutcomeUnknown, message: "the connection was cut after COMMIT was sent (fault injected)")
        }
        // A server that spoke before we sent COMMIT (the FATAL of a terminated backend) ended the
        // transaction itself: a failure then is a plain lost connection, safe to retry.
        guard isOpen else { throw connectionError() }
        let serverSpokeFirst = serverSpoke(exactly: true)
        sendingCommit = true
        commitLeft = false
        defer { sendingCommit = false }
        do {
            try await query("COMMIT", parameters: [])
        } catch let error as PostgresError where !serverSpokeFirst && (error.code == .connectionLost || !isOpen) {
            throw PostgresError(
                code: .commitOutcomeUnknown, message: "the connection broke after COMMIT was sent; the transaction may have committed")
        } catch let error as PostgresError where error.code == .timedOut && commitLeft {
            // The deadline cut the wait for COMMIT's answer: the server may have committed (a
            // synchronous standby gone, a slow network) as surely as when the connection breaks.
            throw PostgresError(
                code: .commitOutcomeUnknown,
                message: "the call's deadline passed after COMMIT was sent (\(error.message)); the transaction may have committed")
        }
    }

    /// COMMIT was handed to libpq to send, before any deadline cut the connection: from here a
    /// cut leaves its outcome unknown (`commit`).
    private func noteSent() {
        if sendingCommit, abortReason == nil { commitLeft = true }
    }

    // MARK: - Pipelining

    /// Sends the queued statements (and optionally one more whose rows are returned) in one
    /// round trip using libpq's pipeline mode.
    private func flushDeferred(then last: (sql: String, parameters: [PostgresParameter])?) async throws -> PostgresRows {
        var batch = deferred
        deferred.removeAll()
        endsSnapshotLazily = false
        if let last { batch.append((last.sql, last.parameters, nil)) }
        let outcomes = try await runPipeline(batch)
        var firstError: (any Error)?
        // By index, reading each outcome in place (`enumerated()` copied each one out).
        for index in outcomes.indices {
            if let ahead = batch[index].ahead {
                ahead.outcome = outcomes[index]
                if ahead.requiringRows, case .success(let rows)? = outcomes[index], rows.isEmpty, refutation == nil {
                    refutation = PostgresError(code: .guessRefuted, message: "a statement sent ahead found no row; the transaction must restart")
                }
            }
            if case .failure(let error)? = outcomes[index], firstError == nil { firstError = error }
        }
        if let firstError { throw firstError }
        if let refutation { throw refutation }
        return last == nil ? .empty : try outcomes[outcomes.count - 1]?.get() ?? .empty
    }

    /// Runs several statements in one round trip (libpq pipeline mode) and returns each one's
    /// rows. The first failing statement's error is thrown; later ones are skipped by the server.
    public func pipeline(_ statements: [(sql: String, parameters: [PostgresParameter])]) async throws -> [PostgresRows] {
        if let refutation { throw refutation }
        if !deferred.isEmpty { _ = try await flushDeferred(then: nil) }
        // The first failure is thrown; outcomes after it are nil (skipped by the server).
        return try await runPipeline(statements.map { ($0.sql, $0.parameters, nil) }).map { try $0?.get() ?? .empty }
    }

    /// Sends `statements` in one round trip and returns each one's outcome: its rows, its error,
    /// or nil when the server skipped it after an earlier one failed. Throws only when the
    /// connection fails.
    private func runPipeline(_ statements: [Deferred]) async throws -> [Result<PostgresRows, any Error>?] {
        guard !statements.isEmpty else { return [] }
        // A statement seen for the first time is prepared first, in its own round trip (once
        // per connection).
        var names: [ContiguousArray<CChar>] = []
        names.reserveCapacity(statements.count)
        for statement in statements {
            let deallocations = self.deallocations
            names.append(try await preparedName(for: statement.sql))
            if deallocations != self.deallocations {
                // Preparing this one reached the limit and deallocated every statement, those
                // this pipeline had named already too: name them again (prepared again).
                names.removeAll(keepingCapacity: true)
                for earlier in statements { names.append(try await preparedName(for: earlier.sql)) }
                break
            }
        }
        // Every parameter is checked before anything is queued: one refused after the first
        // statement was queued left the connection in pipeline mode, waiting for answers the
        // server was never asked to send. (The first statement's are checked as it is sent.)
        for statement in statements.dropFirst() { _ = try wireByteCount(statement.parameters) }
        guard PQenterPipelineMode(handle) == 1 else { throw connectionError() }
        defer { PQexitPipelineMode(handle) }
        for index in statements.indices {
            let sent = try withWireParameters(statements[index].parameters) { count, values, lengths, formats in
                names[index].withUnsafeBufferPointer { PQsendQueryPrepared(handle, $0.baseAddress, count, values, lengths, formats, 0) }
            }
            guard sent == 1 else { throw connectionError() }
        }
        guard PQpipelineSync(handle) == 1 else { throw connectionError() }
        noteSent()
        roundTrips += 1
        try await flush()
        var outcomes: [Result<PostgresRows, any Error>?] = []
        outcomes.reserveCapacity(statements.count)
        for _ in statements {
            // Each statement yields its result followed by a NULL separator.
            var outcome: Result<PostgresRows, any Error>?
            while let result = try await nextResult() {
                if PQresultStatus(result) == PGRES_PIPELINE_ABORTED {
                    PQclear(result)
                    continue
                }
                do { outcome = .success(try check(result)) } catch { outcome = .failure(error) }
            }
            outcomes.append(outcome)
            if !isOpen { break }
        }
        // Consume the sync point.
        while isOpen, let result = try await nextResult() {
            let status = PQresultStatus(result)
            PQclear(result)
            if status == PGRES_PIPELINE_SYNC {
                answered()
                break
            }
        }
        guard isOpen else {
            // A statement's own error says more than "connection lost" (a server shutting down).
            for case .failure(let error)? in outcomes { throw error }
            throw connectionError()
        }
        return outcomes
    }

    // MARK: - Waiting for the server

    private func preparedName(for sql: String) async throws -> ContiguousArray<CChar> {
        if let name = preparedStatements[sql] { return name }
        if preparedStatements.count >= Self.preparedStatementLimit {
            try await execute("DEALLOCATE ALL")
            preparedStatements.removeAll()
            deallocations += 1
        }
        nextStatementID += 1
        let name = "baton_\(nextStatementID)".utf8CString
        guard name.withUnsafeBufferPointer({ PQsendPrepare(handle, $0.baseAddress, sql, 0, nil) }) == 1 else { throw connectionError() }
        _ = try await collect(counted: false)
        preparedStatements[sql] = name
        return name
    }

    /// Flushes what was sent and reads every result up to the end of the command: the rows of
    /// the last one, or the first error. `counted`: an answer counts in ``answers``.
    private func collect(counted: Bool = true) async throws -> PostgresRows {
        roundTrips += 1
        try await flush()
        var rows: PostgresRows?
        var firstError: (any Error)?
        while let result = try await nextResult() {
            do { rows = try check(result) } catch { if firstError == nil { firstError = error } }
        }
        // The server answered, an error included; not a connection libpq found lost.
        if counted, isOpen { answered() }
        if let firstError { throw firstError }
        guard let rows else { throw connectionError() }
        return rows
    }

    /// Counts an answer (``answers``) and notes its time (``lastAnswer``).
    private func answered() {
        answers += 1
        lastAnswer = .now
    }

    /// Sends whatever libpq still buffers, waiting while the socket is full.
    private func flush() async throws {
        while true {
            let left = PQflush(handle)
            driver?.sent()
            if left == 0 { return }
            if left < 0 { throw connectionError() }
            let ready = try await waitForSocket(Int16(POLLIN | POLLOUT))
            // The server may be sending while we send: read it so it does not block on us.
            if ready & Int16(POLLIN) != 0, !consumeInput() { throw connectionError() }
        }
    }

    /// The next result, once libpq has it whole; nil at the end of a command.
    private func nextResult() async throws -> OpaquePointer? {
        while PQisBusy(handle) == 1 {
            _ = try await waitForSocket(Int16(POLLIN))
            guard consumeInput() else { throw connectionError() }
        }
        return PQgetResult(handle)
    }

    /// Reads what arrived into libpq (`PQconsumeInput`); false when the connection failed.
    func consumeInput() -> Bool {
        let read = PQconsumeInput(handle) == 1
        driver?.consumed()
        return read
    }

    private func waitForSocket(_ events: Int16) async throws -> Int16 {
        if let abortReason { throw abortReason }
        let socket = PQsocket(handle)
        guard socket >= 0, let driver else { throw connectionError() }
        let ready = await driver.wait(socket: socket, for: events)
        if let abortReason { throw abortReason }
        return ready
    }

    /// Called on the loop when a deadline passed: the waiting statement (if any) throws
    /// `reason` at once, the server is asked to cancel (on a thread of its own: that request
    /// can hang on a silent network too; at most ``CancelToken/mostInFlight`` at once) and the
    /// socket is shut down, so the connection is never used again.
    func abort(_ reason: PostgresError, cancelStatement: Bool = true) {
        guard abortReason == nil else { return }
        abortReason = reason
        if cancelStatement, let cancelToken { cancelToken.sendOffThread() }
        let socket = PQsocket(handle)
        if socket >= 0 {
            if let driver { driver.cut(socket: socket) } else { shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    /// Waits until the server sends something unprompted (a notification, or the end).
    func waitUntilReadable() async throws {
        _ = try await waitForSocket(Int16(POLLIN))
    }

    /// Opens a connection on a short-lived thread of its own (libpq connects blocking) and
    /// binds it to `loop`.
    static func open(conninfo: String, limits: Limits = Limits(), on loop: any DatabaseLoop) async throws -> PostgresConnection {
        let opened: Result<PostgresConnection, any Error> = await withUnsafeContinuation { continuation in
            startThread(named: "baton-db-conn") {
                continuation.resume(returning: Result { try PostgresConnection(conninfo: conninfo, limits: limits) })
            }
        }
        let connection = try opened.get()
        try await loop.bind(connection)
        return connection
    }
}

extension Result where Failure == any Error {
    /// The outcome of an `async` body, so cleanup that must await can run after it either way.
    /// Inlined: as a frame of its own it cost an executor switch when the body returned after
    /// suspending, and under an executor preference (a lease on a database thread) each such
    /// switch takes the task's status lock (docs/benchmarks.md, "Executor switches in a lease, and
    /// Baton's middlewares").
    @inline(__always)
    public init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
