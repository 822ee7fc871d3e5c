import BatonJSON
import BatonPostgres
import Crypto
import Foundation

/// An `Idempotency-Key` as a request carried it (IETF httpapi draft), for requests that are
/// not commands: the key is scoped to the caller, and bound to a digest of the request.
public struct IdempotencyKey: Sendable, Equatable {
    /// Whose key it is (the subject, or the device, or `anonymous`): two callers never share.
    public var scope: String
    public var key: String
    /// A digest of what the request asked for (method, path and body).
    public var requestDigest: String

    public init(scope: String, key: String, requestDigest: String) {
        self.scope = scope
        self.key = key
        self.requestDigest = requestDigest
    }

    /// The digest that binds a key to one request.
    public static func digest(method: String, path: String, body: [UInt8]) -> String {
        var hash = SHA256()
        hash.update(data: Array("\(method) \(path)\n".utf8))
        hash.update(data: body)
        return Hex.encode(bytesOf: hash.finalize())
    }

    /// Whether a header value is usable as a key as it is: 1–255 visible ASCII characters.
    public static func isValid(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= 255 && key.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// The key an `Idempotency-Key` header value carries, or nil when it is malformed. The draft
    /// sends a structured-field string (`"8e03…"`): its content is the key (printable ASCII,
    /// `\"` and `\\` escaped, 1–255 characters), so `"k"` and `k` are one key. A bare value is
    /// the key as it is (``isValid(_:)``).
    public static func key(fromHeader value: String) -> String? {
        let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        let bytes = Array(value.utf8)
        guard bytes.first == quote else { return isValid(value) ? value : nil }
        guard bytes.count >= 2, bytes.last == quote else { return nil }
        var key: [UInt8] = []
        var index = 1
        while index < bytes.count - 1 {
            var byte = bytes[index]
            if byte == backslash {
                index += 1
                guard index < bytes.count - 1, bytes[index] == quote || bytes[index] == backslash else { return nil }
                byte = bytes[index]
            } else if byte < 0x20 || byte >= 0x7F || byte == quote {
                return nil
            }
            key.append(byte)
            index += 1
        }
        guard !key.isEmpty, key.count <= 255 else { return nil }
        return String(decoding: key, as: UTF8.self)
    }
}

/// The SQL behind idempotency keys. Runs inside the transaction of the request it guards.
enum IdempotencyStore {
    /// Takes the key for this transaction. Returns the stored reply when the identical request
    /// already ran; throws when the key is in use by a running request (409) or was used for
    /// another request (422); returns nil when this is the key's first request.
    static func claim(_ db: PostgresConnection, _ key: IdempotencyKey) async throws -> [UInt8]? {
        // A transaction-scoped advisory lock on the key: a second request with the key while the
        // first one runs is told so at once instead of queueing behind it.
        let locked = try await db.query(
            "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 7))", [key.scope + "\u{1F}" + key.key]
        )[0].decode(Bool.self, at: 0)
        guard locked else {
            throw CommandError(.inFlight, "a request with this Idempotency-Key is still being processed; retry shortly")
        }
        guard
            let row = try await db.query(
                "SELECT request_digest, response FROM idempotency_keys WHERE scope = $1 AND key = $2", [key.scope, key.key]
            ).first
        else { return nil }
        guard try row.decode(String.self, at: 0) == key.requestDigest else {
            throw CommandError(.idempotencyKeyReused, "this Idempotency-Key was already used for a different request")
        }
        return Array(try row.decode(String.self, at: 1).utf8)
    }

    /// Stores the reply of the key's first request; it commits with the request's own writes.
    /// Empty when that request's flow stopped at a service call: the answer is then its
    /// session's (``FlowRuntime/resolveLink(_:parameters:identity:profile:idempotency:)``).
    static func record(_ db: PostgresConnection, _ key: IdempotencyKey, response: [UInt8]) {
        db.enqueue(
            "INSERT INTO idempotency_keys (scope, key, request_digest, response) VALUES ($1, $2, $3, $4)",
            [key.scope, key.key, key.requestDigest, String(decoding: response, as: UTF8.self)])
    }

    /// Forgets keys older than a day (the draft lets servers expire keys; clients retry within seconds).
    static func sweep(_ db: PostgresConnection, limit: Int) async throws {
        try await db.query(
            """
            DELETE FROM idempotency_keys WHERE ctid IN (
                SELECT ctid FROM idempotency_keys WHERE created_at < now() - interval '1 day' LIMIT $1
            )
            """, [limit])
    }
}
