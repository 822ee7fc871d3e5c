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

    /// The transaction-control keyword `sql` starts with, if any. Read on its bytes the way
    /// PostgreSQL's lexer reads them (every effect statement passes here, so no `Character`
    /// work): blanks are ASCII whitespace, comments are `--` to a CR or LF and `/* */`,
    /// which nest; a word is a run of identifier bytes (letters, digits, `_`, `$`, and any byte
    /// of a non-ASCII character, which makes it no keyword).
    static func transactionControl(_ sql: String) -> String? {
        var copy = sql
        return copy.withUTF8 { bytes in
            var index = 0
            guard let word = SQLWords.next(in: bytes, from: &index), transactionKeywords.contains(word) else { return nil }
            // `SET LOCAL` ends with the transaction, which is harmless; a plain SET would outlive
            // it on a pooled connection.
            if word == "SET", SQLWords.next(in: bytes, from: &index) == "LOCAL" { return nil }
            return word
        }
    }
}

/// Words at the start of SQL text, for ``FlowDatabase/transactionControl(_:)``.
enum SQLWords {
    /// The next word from `index` on, upper-cased, after blanks and comments; nil when the text
    /// ends first, when something else (a quote, a symbol) comes first, or when the word has a
    /// non-ASCII character (no keyword has). Moves `index` past it.
    static func next(in bytes: UnsafeBufferPointer<UInt8>, from index: inout Int) -> String? {
        skipBlanksAndComments(bytes, &index)
        let start = index
        var ascii = true
        while index < bytes.count, isIdentifierByte(bytes[index]) {
            if bytes[index] >= 0x80 { ascii = false }
            index += 1
        }
        guard index > start, ascii, !isDigit(bytes[start]) else { return nil }
        return String(decoding: bytes[start..<index], as: UTF8.self).uppercased()
    }

    private static func skipBlanksAndComments(_ bytes: UnsafeBufferPointer<UInt8>, _ index: inout Int) {
        let dash = UInt8(ascii: "-"), slash = UInt8(ascii: "/"), star = UInt8(ascii: "*")
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x20 || (0x09...0x0D).contains(byte) {
                index += 1
            } else if byte == dash, index + 1 < bytes.count, bytes[index + 1] == dash {
                // To the line's end, which for PostgreSQL is a CR as well as an LF.
                while index < bytes.count, bytes[index] != 0x0A, bytes[index] != 0x0D { index += 1 }
            } else if byte == slash, index + 1 < bytes.count, bytes[index + 1] == star {
                // Nested, as PostgreSQL has them; unterminated runs to the end (PostgreSQL refuses it).
                var depth = 0
                repeat {
                    if bytes[index] == slash, index + 1 < bytes.count, bytes[index + 1] == star {
                        depth += 1
                        index += 2
                    } else if bytes[index] == star, index + 1 < bytes.count, bytes[index + 1] == slash {
                        depth -= 1
                        index += 2
                    } else {
                        index += 1
                    }
                } while depth > 0 && index < bytes.count
            } else {
                return
            }
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, UInt8(ascii: "_"), UInt8(ascii: "$"), 0x80...: return true
        default: return false
        }
    }
}
