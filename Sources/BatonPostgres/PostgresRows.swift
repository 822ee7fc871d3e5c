import CLibPQ
import Foundation

/// Owns a libpq `PGresult`. libpq documents a `PGresult` as read-only after creation and safe
/// to read from any thread, which is why this box is `@unchecked Sendable`; it is freed once.
final class PostgresResultHandle: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { PQclear(pointer) }
}

/// The rows a statement returned, read lazily from libpq's buffer.
///
/// ```swift
/// let rows = try connection.query("SELECT id, name FROM playlists WHERE owner = $1", [owner])
/// for row in rows { let name = try row.decode(String.self, at: 1) }
/// ```
public struct PostgresRows: RandomAccessCollection, Sendable {
    let handle: PostgresResultHandle?
    /// The number of rows the command affected (`INSERT`, `UPDATE`, `DELETE`), or returned.
    public let affectedRows: Int
    /// How many columns each row has.
    public let columnCount: Int

    // Column names and types are read from the result when asked, not copied into arrays when
    // it arrives: two allocations per result, and three references to retain on every copy of
    // the rows instead of one (`Benchmarks/e2e/counts.sh`).
    init(handle: PostgresResultHandle) {
        let result = handle.pointer
        self.handle = handle
        self.columnCount = Int(PQnfields(result))
        self.count = Int(PQntuples(result))
        let tuples = String(cString: PQcmdTuples(result))
        self.affectedRows = Int(tuples) ?? count
    }

    /// An empty result, for statements that were not sent (an empty batch, say).
    static let empty = PostgresRows()
    private init() {
        handle = nil
        affectedRows = 0
        columnCount = 0
        count = 0
    }

    public let count: Int
    public var startIndex: Int { 0 }
    public var endIndex: Int { count }
    public subscript(position: Int) -> PostgresRow { PostgresRow(rows: self, index: position) }

    /// Column names in order.
    public var columns: [String] { (0..<columnCount).map(columnName) }

    /// The name of column `index` (0-based, below ``columnCount``; "?" for any other).
    func columnName(_ index: Int) -> String {
        guard let handle, index >= 0, index < columnCount, let name = PQfname(handle.pointer, Int32(index)) else { return "?" }
        return String(cString: name)
    }

    /// The index of a column by name (the first, should two share it). Names are compared byte
    /// for byte, as PostgreSQL compares identifiers.
    public func columnIndex(_ name: String) throws -> Int {
        // A NUL would end the C string early ("big\0x" would find "big").
        if let handle, !name.utf8.contains(0) {
            let found = name.withCString { wanted in
                (0..<columnCount).first { strcmp(PQfname(handle.pointer, Int32($0)), wanted) == 0 }
            }
            if let found { return found }
        }
        throw PostgresError(code: .decoding, message: "no column named '\(name)' (columns: \(columns.joined(separator: ", ")))")
    }
}

/// One row of a ``PostgresRows`` result.
public struct PostgresRow: Sendable {
    let rows: PostgresRows
    let index: Int

    /// Decodes column `column` (0-based) as `T`. Use an `Optional` type for nullable columns.
    @inlinable
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        try withValue(at: column) { bytes, oid in
            do { return try T.decode(from: bytes, type: oid) } catch var error as PostgresError {
                error.message = "column \(column) '\(columnName(column))': \(error.message)"
                throw error
            }
        }
    }

    /// Decodes the column called `name` as `T`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, named name: String) throws -> T {
        try decode(type, at: try rows.columnIndex(name))
    }

    /// Whether the column holds SQL NULL.
    public func isNull(at column: Int) -> Bool {
        guard let handle = rows.handle else { return true }
        return PQgetisnull(handle.pointer, Int32(index), Int32(column)) == 1
    }

    /// For `decode`, which is inlinable and so cannot reach the internal `rows`.
    @usableFromInline
    func columnName(_ column: Int) -> String { rows.columnName(column) }

    @usableFromInline
    func withValue<R>(at column: Int, _ body: (UnsafeRawBufferPointer?, PostgresTypeOID) throws -> R) throws -> R {
        guard let handle = rows.handle, column >= 0, column < rows.columnCount else {
            throw PostgresError(code: .decoding, message: "column index \(column) out of range (\(rows.columnCount) columns)")
        }
        let result = handle.pointer
        let row = Int32(index), col = Int32(column)
        let oid = PostgresTypeOID(rawValue: PQftype(result, col))
        if PQgetisnull(result, row, col) == 1 { return try body(nil, oid) }
        let length = Int(PQgetlength(result, row, col))
        guard let value = PQgetvalue(result, row, col) else { return try body(nil, oid) }
        return try withExtendedLifetime(handle) {
            try body(UnsafeRawBufferPointer(start: value, count: length), oid)
        }
    }
}
