/// An error from the PostgreSQL layer: a server error (with its SQLSTATE), a lost or refused
/// connection, an exhausted pool, or a value that could not be sent or decoded.
///
/// Callers switch on ``code`` (a struct, so new codes never break them) and ask ``isRetryable``
/// whether running the same transaction again may succeed.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate let name: String
        private init(_ name: String) { self.name = name }

        /// The server could not be reached or refused the connection.
        public static let connectionFailed = Code("connectionFailed")
        /// The connection broke while a statement was running (server restart, `pg_terminate_backend`, network).
        public static let connectionLost = Code("connectionLost")
        /// The server answered a statement with an error; see ``PostgresError/sqlState``.
        public static let server = Code("server")
        /// No connection became free within the pool's acquire timeout.
        public static let poolTimeout = Code("poolTimeout")
        /// The pool was shut down.
        public static let poolClosed = Code("poolClosed")
        /// A parameter cannot be sent (for example a text value containing a NUL byte).
        public static let invalidParameter = Code("invalidParameter")
        /// A column could not be decoded into the requested Swift type.
        public static let decoding = Code("decoding")
        /// libpq reported something the wrapper did not expect.
        public static let protocolViolation = Code("protocolViolation")
        /// The connection broke after COMMIT was sent, or the call's deadline cut the wait for
        /// its answer: the transaction may or may not have committed. Never retried by the pool;
        /// the caller must find out (Baton reads its command log).
        public static let commitOutcomeUnknown = Code("commitOutcomeUnknown")
        /// The call's deadline passed: its statement was cancelled and its connection discarded.
        public static let timedOut = Code("timedOut")
        /// The pool saw the database go silent and fails fast until a probe reaches it again.
        public static let unavailable = Code("unavailable")

        /// A statement sent ahead with ``PostgresConnection/sendAhead(_:_:requiringRows:)`` found
        /// no row: the transaction's guess was wrong, and its statements are refused until
        /// ``PostgresConnection/restartTransaction()``.
        public static let guessRefuted = Code("guessRefuted")

        public var description: String { name }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The five-character SQLSTATE the server sent, if any (`40001`, `23505`, ...).
    public var sqlState: String?
    /// The primary human-readable message.
    public var message: String
    /// The server's optional detail line.
    public var detail: String?
    /// The server's optional hint line.
    public var hint: String?
    /// The constraint a violation names, if any (from `PG_DIAG_CONSTRAINT_NAME`).
    public var constraint: String?

    public init(
        code: Code, sqlState: String? = nil, message: String, detail: String? = nil, hint: String? = nil,
        constraint: String? = nil
    ) {
        self.code = code
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
    }

    /// Whether running the whole transaction again may succeed: a serialization failure, a
    /// deadlock, or a connection that broke (the pool replaces it).
    public var isRetryable: Bool {
        switch code {
        case .connectionLost: return true
        case .server:
            guard let sqlState else { return false }
            return sqlState == SQLState.serializationFailure || sqlState == SQLState.deadlockDetected
                || sqlState.hasPrefix("08")  // connection exception class
                || sqlState == SQLState.adminShutdown
        default: return false
        }
    }

    /// Whether the database is unreachable rather than the statement being wrong: the HTTP layer
    /// answers these with 503 and `Retry-After`.
    public var isUnavailable: Bool {
        switch code {
        case .connectionFailed, .connectionLost, .poolTimeout, .poolClosed, .commitOutcomeUnknown, .timedOut, .unavailable: return true
        case .server:
            guard let sqlState else { return false }
            // Lock and statement timeouts (55P03, 57014): the database is too slow to answer now.
            // A server out of resources (class 53: disk, memory, connections), or whose
            // transactions kept colliding past the retries (40001, 40P01): not the request's
            // fault, and a retry later may succeed. (A write refused by a server that takes none,
            // 25006 on a standby, arrives as `.unavailable`: see PostgresConnection.refusedWrite.)
            return sqlState.hasPrefix("08") || sqlState.hasPrefix("53") || sqlState == SQLState.adminShutdown
                || sqlState == SQLState.crashShutdown || sqlState == SQLState.cannotConnectNow
                || sqlState == SQLState.lockNotAvailable || sqlState == SQLState.queryCanceled
                || sqlState == SQLState.serializationFailure
                || sqlState == SQLState.deadlockDetected
        default: return false
        }
    }

    /// Whether a failure to open a connection was the server's refusal: it answered and said no.
    /// That is a server that allows fewer connections than asked for (53300: `too many clients`,
    /// a role's or database's `CONNECTION LIMIT`), or a login that fails now (28000, 28P01: a
    /// password changed under running connections). Not a server that is not there (refused,
    /// reset, timed out, unreachable) or not yet (57P03: starting up, shutting down, in
    /// recovery). The pool lets a place rest only after such a refusal.
    ///
    /// libpq gives no SQLSTATE for a failed startup. The server's error is in its message as libpq
    /// lays it out, `<severity>:  <text>` with two spaces, whatever language the server speaks;
    /// libpq's own messages (`Connection refused`, `server closed the connection unexpectedly`,
    /// `timeout expired`) have no such part. 57P03's texts all begin `the database system is`:
    /// from a server whose messages are translated, that one is taken for a refusal. So is any
    /// error a pooler in front sends in that layout, but for PgBouncer's `pgbouncer cannot
    /// connect to server`.
    public var isRefusalByServer: Bool {
        switch code {
        case .server:
            guard let sqlState else { return false }
            return sqlState.hasPrefix("53") || sqlState.hasPrefix("28")
        case .connectionFailed:
            // PgBouncer reports the server it cannot reach as its own error: an outage.
            return message.contains(":  ") && !message.contains("the database system is")
                && !message.contains("pgbouncer cannot connect to server")
        default:
            return false
        }
    }

    /// Whether the server refused the data itself — a data exception (class 22: a value too long,
    /// malformed, out of range) or an integrity violation (class 23: a check, a foreign key) —
    /// rather than the statement or the connection failing.
    public var isDataRejection: Bool {
        guard code == .server, let sqlState else { return false }
        return sqlState.hasPrefix("22") || sqlState.hasPrefix("23")
    }

    /// Whether the error is a unique-constraint violation (SQLSTATE 23505).
    public var isUniqueViolation: Bool { sqlState == SQLState.uniqueViolation }

    public var description: String {
        var text = "PostgresError.\(code)"
        if let sqlState { text += " [\(sqlState)]" }
        text += ": \(message)"
        if let detail { text += " (detail: \(detail))" }
        if let hint { text += " (hint: \(hint))" }
        return text
    }
}

/// SQLSTATE codes the wrapper and its callers reason about.
public enum SQLState {
    public static let uniqueViolation = "23505"
    public static let foreignKeyViolation = "23503"
    public static let checkViolation = "23514"
    public static let serializationFailure = "40001"
    public static let deadlockDetected = "40P01"
    public static let adminShutdown = "57P01"
    public static let cannotConnectNow = "57P03"
    public static let tooManyConnections = "53300"
    public static let invalidSQLStatementName = "26000"
    public static let lockNotAvailable = "55P03"
    public static let queryCanceled = "57014"
    /// A write in a read-only transaction: a hot standby (the old primary after a failover) or
    /// `default_transaction_read_only`.
    public static let readOnlySQLTransaction = "25006"
    public static let crashShutdown = "57P02"
}
