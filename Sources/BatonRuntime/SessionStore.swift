import BatonFlows
import BatonJSON
import BatonPostgres
import Foundation

/// One row of `flow_sessions`.
struct SessionRow: Sendable {
    var id: UUID
    var subject: String
    var flow: String
    var definitionHash: String
    var state: String
    var step: Int
    var context: JSONObject
    var status: String
    var expiresAt: Date
}

/// A command's stored reply and the digest of the input that produced it.
struct LoggedReply: Sendable {
    var response: [UInt8]
    /// Nil for rows logged before input digests were kept (they replay as they always did).
    var inputDigest: String?

    /// Whether a request with this input digest is the one that was processed.
    func matches(_ digest: String) -> Bool { inputDigest == nil || inputDigest == digest }
}

/// The SQL behind sessions, the command log and flow definitions. Every statement runs on
/// the command's connection, inside its transaction.
enum SessionStore {
    /// Locks the session and, in the same round trip, fetches the logged reply for
    /// `(step, event)` if that command was already processed.
    static func lock(_ db: PostgresConnection, id: UUID, step: Int, event: String) async throws -> (SessionRow, logged: LoggedReply?)? {
        let rows = try await db.query(
            """
            SELECT s.subject, s.flow, s.definition_hash, s.state, s.step, s.context, s.status, s.expires_at, l.response, l.input_digest
            FROM flow_sessions s
            LEFT JOIN command_log l ON l.session_id = s.id AND l.step = $2 AND l.event = $3
            WHERE s.id = $1
            FOR UPDATE OF s
            """, [id, step, event])
        guard let row = rows.first else { return nil }
        let context = try JSONValue.parse(Array(try row.decode(PostgresJSON.self, at: 5).text.utf8)).objectValue ?? [:]
        let session = SessionRow(
            id: id, subject: try row.decode(String.self, at: 0), flow: try row.decode(String.self, at: 1),
            definitionHash: try row.decode(String.self, at: 2), state: try row.decode(String.self, at: 3),
            step: try row.decode(Int.self, at: 4), context: context, status: try row.decode(String.self, at: 6),
            expiresAt: try row.decode(Date.self, at: 7))
        let logged = try row.decode(String?.self, at: 8).map {
            LoggedReply(response: Array($0.utf8), inputDigest: try row.decode(String?.self, at: 9))
        }
        return (session, logged)
    }

    /// Queues the claim of a new session id, sent with the next statement: see ``claimed(_:_:)``.
    /// The flow's statements after it are refused if the claim finds the session taken.
    static func claimAhead(_ db: PostgresConnection, session: SessionRow) -> PostgresAhead {
        db.sendAhead(
            """
            INSERT INTO flow_sessions (id, subject, flow, definition_hash, state, step, context, status, expires_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9)
            ON CONFLICT (id) DO NOTHING
            RETURNING 1
            """,
            [
                session.id, session.subject, session.flow, session.definitionHash, session.state, session.step,
                PostgresJSON(String(decoding: JSONEncoding.encode(.object(session.context)), as: UTF8.self)), session.status,
                session.expiresAt,
            ], requiringRows: true)
    }

    /// Whether the claim got the session id: false when the session already exists (a repeated
    /// start). A concurrent claimer's statement waits until the first one commits.
    static func claimed(_ db: PostgresConnection, _ claim: PostgresAhead) async throws -> Bool {
        !(try await db.rows(of: claim)).isEmpty
    }

    /// When the client last started a session (as its user or its device), sent ahead with a
    /// screen's loaders: a screen's ETag changes with it, so a client revalidating after it used
    /// a start action gets fresh ones, not a 304 that keeps the used payload (answered `refresh`
    /// once its session has moved on). The subjects' index answers it with one probe each.
    static func latestStartAhead(_ db: PostgresConnection, subjects: [String]) -> PostgresAhead {
        // One subject (nearly every request) is one backward probe of the index.
        subjects.count == 1
            ? db.sendAhead("SELECT (extract(epoch FROM max(created_at)) * 1000000)::bigint FROM flow_sessions WHERE subject = $1", [subjects[0]])
            : db.sendAhead(
                "SELECT (extract(epoch FROM max(created_at)) * 1000000)::bigint FROM flow_sessions WHERE subject IN ($1, $2)",
                [subjects[0], subjects[1]])
    }

    /// The answer of ``latestStartAhead(_:subjects:)``: microseconds since 1970, 0 for none.
    static func latestStart(_ db: PostgresConnection, _ ahead: PostgresAhead) async throws -> Int64 {
        Int64(try await db.rows(of: ahead).first?.decode(Int?.self, at: 0) ?? 0)
    }

    /// The logged reply of a command, if it was processed.
    static func logged(_ db: PostgresConnection, id: UUID, step: Int, event: String) async throws -> LoggedReply? {
        guard
            let row = try await db.query(
                "SELECT response, input_digest FROM command_log WHERE session_id = $1 AND step = $2 AND event = $3", [id, step, event]
            ).first
        else { return nil }
        return LoggedReply(response: Array(try row.decode(String.self, at: 0).utf8), inputDigest: try row.decode(String?.self, at: 1))
    }

    /// Queues the session's new state and the command's log row; both go with COMMIT.
    static func record(
        _ db: PostgresConnection, session: SessionRow, loggedStep: Int, event: String, inputDigest: String, response: [UInt8],
        outcome: String
    ) {
        db.enqueue(
            """
            UPDATE flow_sessions SET state = $2, step = $3, context = $4::jsonb, status = $5, expires_at = $6, updated_at = now()
            WHERE id = $1
            """,
            [
                session.id, session.state, session.step,
                PostgresJSON(String(decoding: JSONEncoding.encode(.object(session.context)), as: UTF8.self)), session.status,
                session.expiresAt,
            ])
        db.enqueue(
            "INSERT INTO command_log (session_id, step, event, response, outcome, input_digest) VALUES ($1, $2, $3, $4, $5, $6)",
            [session.id, loggedStep, event, String(decoding: response, as: UTF8.self), outcome, inputDigest])
    }

    /// Queues the session's new state without a log row (a step waiting on a service call).
    static func update(_ db: PostgresConnection, session: SessionRow) {
        db.enqueue(
            """
            UPDATE flow_sessions SET state = $2, context = $3::jsonb, status = $4, expires_at = $5, updated_at = now()
            WHERE id = $1
            """,
            [
                session.id, session.state,
                PostgresJSON(String(decoding: JSONEncoding.encode(.object(session.context)), as: UTF8.self)), session.status,
                session.expiresAt,
            ])
    }

    static func markExpired(_ db: PostgresConnection, id: UUID) {
        db.enqueue("UPDATE flow_sessions SET status = 'expired', updated_at = now() WHERE id = $1 AND status = 'active'", [id])
    }

    /// Stores definitions by hash (existing ones are left alone).
    static func publish(_ db: PostgresConnection, definitions: [FlowDefinition]) async throws {
        for definition in definitions {
            try await db.query(
                "INSERT INTO flow_definitions (hash, flow, source) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING",
                [definition.hash, definition.name, definition.source])
        }
    }

    static func definitionSource(_ db: PostgresConnection, hash: String) async throws -> (flow: String, source: String)? {
        guard let row = try await db.query("SELECT flow, source FROM flow_definitions WHERE hash = $1", [hash]).first else { return nil }
        return (try row.decode(String.self, at: 0), try row.decode(String.self, at: 1))
    }

    /// Marks active sessions past their expiry as expired; returns their flows.
    static func expireDue(_ db: PostgresConnection, limit: Int) async throws -> [String] {
        try await db.query(
            """
            UPDATE flow_sessions SET status = 'expired', updated_at = now()
            WHERE id IN (
                SELECT id FROM flow_sessions WHERE status = 'active' AND expires_at < now()
                ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED
            )
            RETURNING flow
            """, [limit]
        ).map { try $0.decode(String.self, at: 0) }
    }
}
