import BatonFlows
import BatonPostgres
import Foundation

/// What effects, guards and loaders get of the command's transaction: statements and
/// savepoints, never the transaction itself.
///
/// The runtime owns BEGIN and COMMIT: it decides when the session row, the command log and
/// the effect's writes commit together. An effect that could commit half-way (or roll back the
/// runtime's own writes) would break exactly-once, so transaction control is refused here; an
/// effect that wants to try something and recover uses ``savepoint(_:)``.
public struct FlowDatabase: Sendable {
    let connection: PostgresConnection

    init(_ connection: PostgresConnection) {
        self.connection = connection
    }

    /// Runs one parameterised statement (`$1`, `$2`, ...) in the command's transaction.
    @discardableResult
    public func query(_ sql: String, _ parameters: [any PostgresEncodable] = []) async throws -> PostgresRows {
        try await connection.query(try Self.refusingTransactionControl(sql), parameters)
    }

    /// Queues a statement whose rows are taken later with ``rows(of:)`` (or never, for a write
    /// whose error is enough): it travels with the next statement, in the same round trip. For
    /// statements that do not depend on an earlier one's answer — a loader's reads, or a write
    /// that checks its own precondition in SQL — queue them, then run the one the others would
    /// have waited for: all of them cost one round trip instead of one each.
    public func sendAhead(_ sql: String, _ parameters: [any PostgresEncodable] = []) throws -> PostgresAhead {
        connection.sendAhead(try Self.refusingTransactionControl(sql), parameters)
    }

    /// The rows of a statement queued with ``sendAhead(_:_:)`` (sent now, if nothing took it yet).
    public func rows(of ahead: PostgresAhead) async throws -> PostgresRows {
        try await connection.rows(of: ahead)
    }

    /// Runs `body` inside a savepoint: if it throws, its statements are undone and the error
    /// is rethrown, while the command's transaction goes on.
    public func savepoint<R>(_ body: (FlowDatabase) async throws -> R) async throws -> R {
        try await connection.query("SAVEPOINT baton_effect")
        do {
            let value = try await body(self)
            try await connection.query("RELEASE SAVEPOINT baton_effect")
            return value
        } catch {
            try await connection.query("ROLLBACK TO SAVEPOINT baton_effect")
            try await connection.query("RELEASE SAVEPOINT baton_effect")
            throw error
        }
    }

    /// Statements that would take the transaction out of the runtime's hands (built once, not
    /// per statement an effect runs).
    private static let transactionKeywords: Set<String> = [
        "BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE", "SET", "RESET",
        "DISCARD", "DEALLOCATE", "LISTEN", "UNLISTEN",
    ]

    /// `sql`, unless it is transaction control.
    private static func refusingTransactionControl(_ sql: String) throws -> String {
        if let keyword = transactionControl(sql) {
            throw FlowCallError.invalid("effects run inside the command's transaction and may not use \(keyword); use savepoint(_:)")
        }
        return sql
    }

    /// The transaction-control keyword `sql` starts with, if any (comments and blanks skipped).
    static func transactionControl(_ sql: String) -> String? {
        var rest = Substring(sql)
        while true {
            rest = rest.drop(while: { $0.isWhitespace })
            if rest.hasPrefix("--") {
                rest = rest.drop(while: { $0 != "\n" })
            } else if rest.hasPrefix("/*"), let end = rest.range(of: "*/") {
                rest = rest[end.upperBound...]
            } else {
                break
            }
        }
        let word = rest.prefix(while: { $0.isLetter }).uppercased()
        guard transactionKeywords.contains(word) else { return nil }
        // `SET LOCAL` ends with the transaction, which is harmless; a plain SET would outlive it
        // on a pooled connection.
        if word == "SET", rest.dropFirst(3).drop(while: { $0.isWhitespace }).prefix(5).uppercased() == "LOCAL" { return nil }
        return word
    }
}
