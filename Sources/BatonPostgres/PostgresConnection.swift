import CLibPQ
import Foundation
import Synchronization

/// One libpq connection.
///
/// A pooled connection is non-blocking: it belongs to one ``DatabaseLoop`` and its
/// statements (the `async` methods) run on that loop's thread, which waits for the socket
/// instead of blocking in libpq. The few blocking methods serve connections outside a pool.
/// A connection is only ever used by the one caller that holds its lease; that exclusive use
/// is what makes the `@unchecked Sendable` below sound: libpq connections are not
/// thread-safe, but they may move between threads between calls.
public final class PostgresConnection: @unchecked Sendable {
    /// The libpq handle (the listener polls its socket and reads notifications from it).
    let handle: OpaquePointer
    /// SQL text → server-side prepared statement name, NUL-terminated. Lives and dies with this
    /// connection. Kept as C text: a name such as `baton_12` is a small Swift string, which the
    /// implicit conversion for libpq copied to a new heap buffer on every statement.
    var preparedStatements: [String: ContiguousArray<CChar>] = [:]
    var nextStatementID = 0
    /// How many times the connection dropped its prepared statements for reaching
    /// ``preparedStatementLimit`` (a pipeline checks that none did while it named its statements).
    var deallocations = 0
    /// What tells the connection's loop that its socket is ready (nil: blocking use only).
    var driver: (any SocketDriver)?
    /// Set on the loop when a deadline cut the connection: every later wait throws it.
    var abortReason: PostgresError?
    /// COMMIT is being sent (`commit`), and whether it was handed to libpq before any cut: a
    /// deadline that cuts the wait for its answer leaves the transaction's outcome unknown.
    var sendingCommit = false
    var commitLeft = false
    /// The server refused a write as read-only (25006) and says it takes none: a standby, a
    /// primary demoted under the connection, or `default_transaction_read_only`. The error is
    /// then ``PostgresError/Code/unavailable``, and the pool does not reuse the connection, so
    /// the next one goes wherever the connection string leads now
    /// (`target_session_attrs=read-write` finds the new primary). A write in a transaction the
    /// caller opened read-only (a screen's snapshot) is its own mistake: a plain server error.
    public internal(set) var refusedWrite = false

    /// Whether the server reports itself read-only: `in_hot_standby` or
    /// `default_transaction_read_only` (PostgreSQL 14 and later report both to the client at
    /// start and whenever they change, so reading them costs no round trip).
    var isReadOnlyServer: Bool {
        let settings: [String] = ["in_hot_standby", "default_transaction_read_only"]
        return settings.contains { name in
            PQparameterStatus(handle, name).map { String(cString: $0) == "on" } ?? false
        }
    }
    /// Statements queued by ``enqueue(_:_:)`` and ``sendAhead(_:_:)``, sent with the next round
    /// trip; `ahead` receives the outcome of a statement whose rows are read later.
    var deferred: [Deferred] = []
    typealias Deferred = (sql: String, parameters: [PostgresParameter], ahead: PostgresAhead?)

    /// Adds a statement to ``deferred``. An empty queue starts with room for eight: a
    /// transaction's batch (`BEGIN`, the flow's statements, the log's insert) grew 1 → 2 → 4 → 8
    /// otherwise, an allocation at each step (`Benchmarks/e2e/counts.sh`).
    func queue(_ statement: Deferred) {
        if deferred.isEmpty { deferred.reserveCapacity(8) }
        deferred.append(statement)
    }
    /// Round trips this connection has started (statements sent), for tests and diagnostics
    /// that check how many a piece of work costs.
    public internal(set) var roundTrips = 0
    /// Round trips whose answers were read to their end (an error from the server included),
    /// but for those that only prepared a statement: a preparation asks the server to parse
    /// and plan, not to read or write the tables, so a server whose tables' storage stalled may
    /// still answer it. The pool tells a database that answers from one that has gone silent by
    /// it.
    public internal(set) var answers = 0
    /// When the last of ``answers`` came: a deadline that cuts a call whose database answered
    /// moments ago is not taken for a silent database (``PostgresPool``).
    public internal(set) var lastAnswer: ContinuousClock.Instant?
    /// Set when a statement sent ahead with `requiringRows` found none: later statements throw
    /// it without being sent, until ``restartTransaction()``.
    var refutation: PostgresError?
    /// The isolation of the transaction ``transaction(isolation:_:)`` is running, if any.
    var transactionIsolation: IsolationLevel?
    /// Set when a read-only snapshot's body ended and its `ROLLBACK` waits at the head of
    /// `deferred` instead of taking a round trip of its own: it travels with whatever the next
    /// lease sends first (see ``PostgresPool``), or the pool sends it alone before the
    /// connection goes idle.
    var endsSnapshotLazily = false
    /// Statements whose text exceeded this many distinct entries are not cached forever.
    public static let preparedStatementLimit = 512

    /// Server-side bounds set on every connection when it opens, so nothing a statement, a lock
    /// wait or an abandoned transaction does can outlive a request's deadline.
    public struct Limits: Sendable, Equatable {
        /// `statement_timeout`: a statement running longer is cancelled by the server (57014).
        public var statement: Duration
        /// `lock_timeout`: a lock wait longer than this fails (55P03).
        public var lock: Duration
        /// `idle_in_transaction_session_timeout`: a transaction whose client went silent is
        /// ended by the server, releasing its row locks.
        public var idleInTransaction: Duration
        /// TCP user timeout, on both ends (libpq's `tcp_user_timeout` and the server's GUC):
        /// unacknowledged data for this long means the network is gone.
        public var tcpUser: Duration
        /// libpq `connect_timeout` default (a connection string's own value wins).
        public var connect: Duration

        public init(
            statement: Duration = .seconds(4), lock: Duration = .seconds(3), idleInTransaction: Duration = .seconds(5),
            tcpUser: Duration = .seconds(5), connect: Duration = .seconds(3)
        ) {
            self.statement = statement
            self.lock = lock
            self.idleInTransaction = idleInTransaction
            self.tcpUser = tcpUser
            self.connect = connect
        }

        /// Sets the statement and lock timeouts back to these limits.
        public var resetStatement: String {
            "SET statement_timeout = \(milliseconds.statement); SET lock_timeout = \(milliseconds.lock)"
        }

        var milliseconds: (statement: Int64, lock: Int64, idle: Int64, tcp: Int64, connect: Int64) {
            func ms(_ duration: Duration) -> Int64 { duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000 }
            // Zero turns a server-side timeout off (administrative pools).
            return (ms(statement), ms(lock), ms(idleInTransaction), ms(tcpUser), max(1, (ms(connect) + 999) / 1000))
        }
    }

    /// What can cancel this connection's running statement from another thread.
    let cancelToken: CancelToken?
    /// Test hook: a one-shot cut of the connection right after COMMIT is sent.
    let faults: PostgresFaults?

    /// Opens a connection. `conninfo` is anything libpq accepts: a `postgresql://` URI or
    /// `key=value` pairs; missing values come from the standard `PG*` environment variables.
    public init(conninfo: String, limits: Limits = Limits(), faults: PostgresFaults? = nil) throws {
        let ms = limits.milliseconds
        // Defaults first: values that appear later (the expanded conninfo, then ours) win,
        // so a user's own connect_timeout or keepalive settings take precedence over these.
        let settings: [(String, String)] = [
            ("connect_timeout", String(ms.connect)),
            ("tcp_user_timeout", String(ms.tcp)),
            ("keepalives_idle", "30"),
            ("keepalives_interval", "10"),
            ("keepalives_count", "3"),
            ("dbname", conninfo),
            ("fallback_application_name", "baton"),
            ("client_encoding", "UTF8"),
        ]
        let connection = withCStringArray(settings.map(\.0)) { keywords in
            withCStringArray(settings.map(\.1)) { values in
                PQconnectdbParams(keywords, values, 1)
            }
        }
        guard let connection else {
            throw PostgresError(code: .connectionFailed, message: "libpq could not allocate a connection")
        }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = Self.errorMessage(connection)
            PQfinish(connection)
            throw PostgresError(code: .connectionFailed, message: message)
        }
        self.handle = connection
        self.cancelToken = PQgetCancel(connection).map(CancelToken.init)
        self.faults = faults
        // Server notices ("relation already exists, skipping") are not errors; libpq would
        // print them on stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        // The text decoders rely on ISO dates in UTC; the limits bound every statement, lock
        // wait and abandoned transaction on the server side. One round trip per new connection.
        // If this throws, every stored property is set, so Swift runs deinit (which calls
        // PQfinish): the handle must not be finished here as well.
        //
        // `connect_timeout` ends with the startup, so this round trip has the connect timeout
        // as a bound of its own.
        try bounded(by: .seconds(ms.connect), passed: { "the server accepted the connection but did not answer its setup within \(ms.connect) s (\($0))" }) {
            try execute(
                """
                SET DateStyle = 'ISO, YMD'; SET TimeZone = 'UTC'; SET bytea_output = 'hex';
                SET statement_timeout = \(ms.statement); SET lock_timeout = \(ms.lock);
                SET idle_in_transaction_session_timeout = \(ms.idle); SET tcp_user_timeout = \(ms.tcp)
                """)
        }
    }

    /// Runs `body`'s blocking statements with a bound of their own. A server (or a pooler in
    /// front of a stuck one) that completes the startup and then answers nothing would hold a
    /// blocking round trip for good: past `limit` the socket is shut down (under the lock the
    /// body's end takes), which ends libpq's wait with an error, thrown as `connectionFailed`
    /// with the message `passed` makes of libpq's.
    @available(*, noasync, message: "blocks the thread: in async code (a pool's body) use the async form")
    func bounded<R>(by limit: Duration, passed: (String) -> String, _ body: () throws -> R) throws -> R {
        let watch = SetupWatch(socket: PQsocket(handle))
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(limit / .nanoseconds(1)))) { watch.cutUnlessDone() }
        do {
            defer { watch.done() }
            return try body()
        } catch let error as PostgresError where watch.wasCut {
            throw PostgresError(code: .connectionFailed, message: passed(error.message))
        }
    }

    deinit {
        PQfinish(handle)
        driver?.close()
    }

    /// The socket, for the pool to cut a connection whose caller's deadline passed.
    var socket: Int32 { PQsocket(handle) }

    // MARK: - State

    /// Whether libpq still considers the connection usable.
    public var isOpen: Bool { PQstatus(handle) == CONNECTION_OK }

    /// Whether a transaction block is open (or failed and waiting for `ROLLBACK`).
    public var isInTransaction: Bool {
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    /// The server's process id for this connection (what `pg_terminate_backend` takes).
    public var backendPID: Int32 { PQbackendPID(handle) }

    /// Whether an idle connection is still good to lend out, checked without a round trip.
    ///
    /// An idle connection has nothing to read: the server speaks only when spoken to. If its
    /// socket is readable, the server has sent something unprompted — almost always the FATAL
    /// message and end-of-file of a backend killed by `pg_terminate_backend` or a restart — so
    /// the connection is treated as dead and replaced before anyone sends a statement into it.
    /// (A snapshot whose `ROLLBACK` is still queued is as idle: the server waits for us.) The
    /// driver answers from what its loop last saw where it can (``PollDriver``): no system call
    /// per lease.
    func checkAlive() -> Bool {
        let status = PQtransactionStatus(handle)
        guard PQstatus(handle) == CONNECTION_OK, status == PQTRANS_IDLE || (endsSnapshotLazily && status == PQTRANS_INTRANS)
        else { return false }
        return !serverSpoke(exactly: false)
    }

    /// Whether the server has sent something not read yet: its driver knows, or the socket says.
    /// `exactly`: as of now, not as of the loop's last look (see ``SocketDriver``).
    func serverSpoke(exactly: Bool) -> Bool {
        if let known = driver?.serverSpoke(exactly: exactly) { return known }
        let socket = PQsocket(handle)
        guard socket >= 0 else { return true }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) != 0
    }

    // MARK: - Blocking statements (setup, the listener, administrative one-offs)

    /// Runs one parameterised statement and waits for it, blocking the calling thread. For
    /// connections outside a pool (the embedded server's setup, the probe); a pool's bodies use
    /// the `async` form, which never blocks a thread.
    @discardableResult
    @available(*, noasync, message: "blocks the thread: in async code (a pool's body) use the async form")
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresRows {
        assert(!PostgresEventLoop.onAnyLoop && driver == nil, "a blocking libpq call on a database loop or a pooled connection")
        precondition(deferred.isEmpty, "queued statements are sent by the async API")
        let result = try withWireParameters(parameters.map(\.postgresParameter)) { count, values, lengths, formats in
            PQexecParams(handle, sql, count, nil, values, lengths, formats, 0)
        }
        return try check(result)
    }

    /// Runs SQL through the simple-query protocol, blocking the calling thread: no parameters,
    /// several statements allowed. For fixed administrative statements only, never user data.
    @available(*, noasync, message: "blocks the thread: in async code (a pool's body) use the async form")
    public func execute(_ sql: String) throws {
        assert(!PostgresEventLoop.onAnyLoop && driver == nil, "a blocking libpq call on a database loop or a pooled connection")
        var result = PQexec(handle, sql)
        // PQexec returns only the last result; an error in an earlier statement stops there.
        _ = try check(result)
        result = nil
    }

    /// Queues a statement whose result the caller does not need (an `INSERT` into a log, say).
    /// It is sent with the next statement or `COMMIT` in one pipelined round trip; an error it
    /// raises surfaces there. Useful inside transactions to save round trips.
    public func enqueue(_ sql: String, _ parameters: [any PostgresEncodable] = []) {
        queue((sql, parameters.map(\.postgresParameter), nil))
    }

    /// Queues a statement whose rows the caller reads later, with ``rows(of:)``: it travels with
    /// the next statement (one round trip for both), or alone if `rows(of:)` comes first.
    ///
    /// With `requiringRows`, the work after it is a guess that the statement returns a row: if
    /// it returns none, the statement it travelled with throws
    /// ``PostgresError/Code/guessRefuted``, and so does every later one (COMMIT included) until
    /// ``restartTransaction()``.
    public func sendAhead(_ sql: String, _ parameters: [any PostgresEncodable] = [], requiringRows: Bool = false) -> PostgresAhead {
        let ahead = PostgresAhead(requiringRows: requiringRows)
        queue((sql, parameters.map(\.postgresParameter), ahead))
        return ahead
    }

    /// Transaction isolation levels.
    public enum IsolationLevel: Sendable {
        case readCommitted, repeatableRead, serializable
        /// One consistent snapshot for several reads, and no writes.
        case readOnlySnapshot

        var beginStatement: String {
            switch self {
            case .readOnlySnapshot: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            case .readCommitted: "BEGIN"
            case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ"
            case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE"
            }
        }
    }

    // MARK: - Internals

    /// Converts a libpq result into rows or throws the error it carries. Frees nothing it
    /// returns: the rows own the result.
    func check(_ result: OpaquePointer?) throws -> PostgresRows {
        guard let result else { throw connectionError() }
        let status = PQresultStatus(result)
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(handle: PostgresResultHandle(result))
        case PGRES_FATAL_ERROR, PGRES_NONFATAL_ERROR:
            func field(_ code: Int32) -> String? {
                guard let value = PQresultErrorField(result, code) else { return nil }
                return String(cString: value)
            }
            let sqlState = field(Int32(UInt8(ascii: "C")))
            var error = PostgresError(
                code: .server, sqlState: sqlState,
                message: field(Int32(UInt8(ascii: "M"))) ?? Self.errorMessage(handle),
                detail: field(Int32(UInt8(ascii: "D"))), hint: field(Int32(UInt8(ascii: "H"))),
                constraint: field(Int32(UInt8(ascii: "n"))))
            PQclear(result)
            if sqlState == nil, !isOpen { error.code = .connectionLost }
            if sqlState == SQLState.readOnlySQLTransaction, isReadOnlyServer {
                refusedWrite = true
                error.code = .unavailable
            }
            throw error
        default:
            let message = String(cString: PQresStatus(status))
            PQclear(result)
            throw PostgresError(code: isOpen ? .protocolViolation : .connectionLost, message: "unexpected result \(message)")
        }
    }

    func connectionError() -> PostgresError {
        PostgresError(code: isOpen ? .protocolViolation : .connectionLost, message: Self.errorMessage(handle))
    }

    static func errorMessage(_ connection: OpaquePointer) -> String {
        guard let raw = PQerrorMessage(connection) else { return "unknown libpq error" }
        let text = String(cString: raw).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "unknown libpq error" : text
    }
}

// MARK: - C marshalling

/// The bytes ``withWireParameters(_:_:)`` lays `parameters` out in, refusing a text with a NUL
/// (memchr on the contiguous bytes): the first of its two passes, and the check a pipeline makes
/// before it queues anything.
///
/// Both passes read the values in place (an index into the array, a `let` binding, the bytes
/// through `withUTF8Bytes`): an `enumerated()` loop, or a `var` to call `String.withUTF8` on,
/// copied each value out, one `swift_retain` per value per pass.
func wireByteCount(_ parameters: [PostgresParameter]) throws -> Int {
    var byteCount = 0
    for index in 0..<parameters.count {
        switch parameters[index] {
        case .null:
            break
        case .text(let text):
            byteCount += try withUTF8Bytes(of: text) { bytes -> Int in
                if let base = bytes.baseAddress, memchr(base, 0, bytes.count) != nil {
                    throw PostgresError(
                        code: .invalidParameter,
                        message: "parameter $\(index + 1) contains a NUL byte (U+0000), which PostgreSQL text cannot store")
                }
                return bytes.count + 1
            }
        case .binary(let bytes):
            byteCount += bytes.count
        case .uuid:
            byteCount += UUID.canonicalLength + 1
        case .timestamp:
            byteCount += Date.postgresTextCapacity + 1  // room for the longest; the text may be shorter
        }
    }
    return byteCount
}

/// Lays parameters out in one buffer and hands libpq arrays of pointers, lengths and formats.
/// Text parameters are NUL-terminated C strings, so a NUL inside one is refused here.
///
/// The buffer and the arrays are temporary allocations: on the stack when they are small, as a
/// statement's usually are (libpq copies the values into its output buffer before
/// `PQsendQueryPrepared` returns). Growing four arrays value by value cost a command about 35 of
/// its 305 `malloc` calls (`Benchmarks/e2e/counts.sh`).
func withWireParameters<R>(
    _ parameters: [PostgresParameter],
    _ body: (Int32, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
) throws -> R {
    let count = parameters.count
    if count == 0 { return body(0, nil, nil, nil) }
    let byteCount = try wireByteCount(parameters)
    return withUnsafeTemporaryAllocation(byteCount: max(byteCount, 1), alignment: 1) { storage in
        withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: count) { values in
            // Lengths in the first half, formats (0 text, 1 binary) in the second.
            withUnsafeTemporaryAllocation(of: Int32.self, capacity: 2 * count) { numbers in
                var offset = 0
                for index in 0..<count {
                    let start = UnsafePointer((storage.baseAddress! + offset).assumingMemoryBound(to: CChar.self))
                    // The text forms are written in place, then end alike: a NUL, text format.
                    let length: Int
                    switch parameters[index] {
                    case .null:
                        values[index] = nil
                        numbers[index] = 0
                        numbers[count + index] = 0
                        continue
                    case .binary(let bytes):
                        bytes.withUnsafeBytes { raw in
                            if let base = raw.baseAddress { (storage.baseAddress! + offset).copyMemory(from: base, byteCount: raw.count) }
                        }
                        values[index] = start
                        numbers[index] = Int32(bytes.count)
                        numbers[count + index] = 1
                        offset += bytes.count
                        continue
                    case .text(let text):
                        length = withUTF8Bytes(of: text) { bytes -> Int in
                            if let base = bytes.baseAddress { (storage.baseAddress! + offset).copyMemory(from: base, byteCount: bytes.count) }
                            return bytes.count
                        }
                    case .uuid(let uuid):
                        uuid.writeCanonical(to: UnsafeMutableRawBufferPointer(rebasing: storage[offset..<offset + UUID.canonicalLength]))
                        length = UUID.canonicalLength
                    case .timestamp(let date):
                        length = Date.writePostgresText(
                            date, to: UnsafeMutableRawBufferPointer(rebasing: storage[offset..<offset + Date.postgresTextCapacity]))
                    }
                    storage[offset + length] = 0
                    values[index] = start
                    numbers[index] = Int32(length)
                    numbers[count + index] = 0
                    offset += length + 1
                }
                return body(
                    Int32(count), UnsafePointer(values.baseAddress!), UnsafePointer(numbers.baseAddress!),
                    UnsafePointer(numbers.baseAddress! + count))
            }
        }
    }
}

/// `text`'s UTF-8 bytes, contiguous, without a copy of the string on the heap: a native string's
/// are read where they are stored (a small one's from a copy on the stack); only a bridged one
/// is made contiguous first, in a copy.
@inline(__always)
private func withUTF8Bytes<R>(of text: String, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
    if let result = try text.utf8.withContiguousStorageIfAvailable(body) { return result }
    var copy = text
    return try copy.withUTF8(body)
}

/// Calls `body` with a NULL-terminated array of C strings that live for the call.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let duplicates = strings.map { strdup($0) }
    defer { duplicates.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = duplicates.map { UnsafePointer($0) } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// A libpq cancel request for one connection (`PQgetCancel`), usable from any thread and for
/// as long as anyone holds it, even after the connection is closed.
final class CancelToken: @unchecked Sendable {
    // PGcancel is immutable after creation and PQcancel is documented thread-safe.
    private let cancel: OpaquePointer

    init(_ cancel: OpaquePointer) { self.cancel = cancel }
    deinit { PQfreeCancel(cancel) }

    /// Asks the server to cancel the running statement. Blocks while it connects: call it off
    /// any thread that must stay responsive.
    func send() {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = PQcancel(cancel, &buffer, Int32(buffer.count))
    }

    /// Sends the request on a thread of its own, unless ``mostInFlight`` are under way: libpq
    /// 15's `PQcancel` has no timeout, so behind a silent network each holds its thread until
    /// the network answers. Past the bound the request is not sent: the connection's socket is
    /// shut down anyway, and the server ends the statement at its `statement_timeout` (a pool's
    /// connections have one; an administrative pool's do not) or when it next writes to the
    /// cut connection.
    func sendOffThread() {
        guard Self.inFlight.add(1, ordering: .relaxed).newValue <= Self.mostInFlight else {
            Self.inFlight.subtract(1, ordering: .relaxed)
            return
        }
        startThread(named: "baton-db-cancel") { [self] in
            send()
            Self.inFlight.subtract(1, ordering: .relaxed)
        }
    }

    /// Cancel requests under way in the process, and how many may be.
    private static let inFlight = Atomic<Int>(0)
    static let mostInFlight = 16
}

/// Faults a test can inject into real connections, deterministically.
public final class PostgresFaults: Sendable {
    private let commitCuts = Mutex<Int>(0)
    private let cut = Mutex<Int>(0)
    private let connectionHold = Mutex<Duration?>(nil)
    private let handOverHold = Mutex<Duration?>(nil)
    private let connectDelay = Mutex<Duration?>(nil)
    private let holdingConnects = Mutex(false)
    private let failingConnects = Mutex(false)
    private let restLength = Mutex<Duration?>(nil)

    public init() {}

    /// Until called again with nil, a place that rests after a refused connect rests for
    /// `duration` instead of the pool's own pause (1 s, doubling with each refusal): a
    /// rest that outlasts the test whatever the machine's load, so that only the pool's own
    /// decisions (a connection that opens, its caller's turn) can end it.
    public func rest(for duration: Duration?) { restLength.withLock { $0 = duration } }

    /// The pause `rest(for:)` set.
    var rests: Duration? { restLength.withLock { $0 } }

    /// Until called again with false, every connection the pool opens fails as a connection the
    /// network or a proxy in front ended does (`server closed the connection unexpectedly`),
    /// while the connections already open go on working.
    public func failConnects(_ failing: Bool) { failingConnects.withLock { $0 = failing } }

    /// Whether connects fail (`failConnects`).
    var connectsFail: Bool { failingConnects.withLock { $0 } }

    /// Until called again with nil, every connection the pool opens is answered `duration`
    /// later than the server would: as a server under load, slow to start each new session.
    public func delayConnects(by duration: Duration?) { connectDelay.withLock { $0 = duration } }

    /// The delay `delayConnects` set.
    var connectsDelay: Duration? { connectDelay.withLock { $0 } }

    /// Until `releaseConnects()`, every connection the pool opens waits before it is opened: a
    /// server that has not answered yet, for as long as the test needs, whatever the machine's
    /// load.
    public func holdConnects() { holdingConnects.withLock { $0 = true } }

    /// Lets held connects (`holdConnects`) go on.
    public func releaseConnects() { holdingConnects.withLock { $0 = false } }

    /// Whether connects are held.
    var connectsHeld: Bool { holdingConnects.withLock { $0 } }

    /// The next connection the pool opens is held for `duration` once the server has accepted
    /// it, before the pool sets it up on its loop: as if setting it up took that long.
    public func holdNextConnection(for duration: Duration) { connectionHold.withLock { $0 = duration } }

    /// The next caller that waited for a connection is held for `duration` once it is handed
    /// one, before its body starts: as if it took that long to get there (a busy thread).
    public func holdNextHandOver(for duration: Duration) { handOverHold.withLock { $0 = duration } }

    func takeConnectionHold() -> Duration? { connectionHold.withLock { hold in defer { hold = nil }; return hold } }

    func takeHandOverHold() -> Duration? { handOverHold.withLock { hold in defer { hold = nil }; return hold } }

    /// The next COMMIT on a connection of this pool is sent, and then the connection is cut
    /// before its answer arrives: the server commits, the client cannot know.
    public func cutAfterNextCommit() { commitCuts.withLock { $0 += 1 } }

    /// How many commits were cut so far.
    public var commitsCut: Int { cut.withLock { $0 } }

    func takeCommitCut() -> Bool {
        let take = commitCuts.withLock { armed in
            guard armed > 0 else { return false }
            armed -= 1
            return true
        }
        if take { cut.withLock { $0 += 1 } }
        return take
    }
}

/// A statement queued with ``PostgresConnection/sendAhead(_:_:)``: its outcome once the round
/// trip that carried it is back. Belongs to the connection's lease holder, like the connection.
public final class PostgresAhead: @unchecked Sendable {
    var outcome: Result<PostgresRows, any Error>?
    let requiringRows: Bool

    init(requiringRows: Bool) { self.requiringRows = requiringRows }
}

/// The bound of blocking statements (`PostgresConnection.bounded`: a new connection's setup
/// round trip, the fail-fast probe's `SELECT 1`): the socket is shut down if they have not
/// answered in time. The shutdown happens under the lock that `done` takes, so it can never
/// reach a descriptor that the connection has closed and the process reused.
private final class SetupWatch: Sendable {
    private let socket: Int32
    private let state = Mutex((done: false, cut: false))

    init(socket: Int32) { self.socket = socket }

    func cutUnlessDone() {
        state.withLock { state in
            guard !state.done, socket >= 0 else { return }
            state.cut = true
            shutdown(socket, Int32(SHUT_RDWR))
        }
    }

    func done() { state.withLock { $0.done = true } }

    var wasCut: Bool { state.withLock { $0.cut } }
}
