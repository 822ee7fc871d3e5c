import Foundation

/// One statement parameter as it goes over the wire: SQL NULL, text, or raw bytes (binary
/// format, used for `bytea` so NUL bytes survive).
public enum PostgresParameter: Sendable, Hashable {
    case null
    case text(String)
    case binary([UInt8])
    /// A UUID, sent as its canonical lowercase text: written straight into the statement's
    /// buffer, where `.text(uuid.lowercased)` would make a 36-byte string on the heap first
    /// (several per command).
    case uuid(UUID)
    /// A `timestamptz`, sent as its ISO text in UTC, written straight into the statement's
    /// buffer as ``uuid(_:)`` is.
    case timestamp(Date)
}

/// A Swift value that can be bound as a statement parameter (`$1`, `$2`, ...).
public protocol PostgresEncodable: Sendable {
    /// The value as a wire parameter.
    var postgresParameter: PostgresParameter { get }
}

/// A Swift value that can be read from a result column. `bytes` is `nil` for SQL NULL; `type`
/// is the column's type OID, so a decoder can refuse a column it does not understand.
public protocol PostgresDecodable: Sendable {
    static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Self
}

/// A value that can be both bound and decoded.
public typealias PostgresCodable = PostgresEncodable & PostgresDecodable

/// Type OIDs of the built-in types the wrapper decodes (from `pg_type`).
public struct PostgresTypeOID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let bool = Self(rawValue: 16)
    public static let bytea = Self(rawValue: 17)
    public static let name = Self(rawValue: 19)
    public static let int8 = Self(rawValue: 20)
    public static let int2 = Self(rawValue: 21)
    public static let int4 = Self(rawValue: 23)
    public static let text = Self(rawValue: 25)
    public static let oid = Self(rawValue: 26)
    public static let json = Self(rawValue: 114)
    public static let float4 = Self(rawValue: 700)
    public static let float8 = Self(rawValue: 701)
    public static let unknown = Self(rawValue: 705)
    public static let bpchar = Self(rawValue: 1042)
    public static let varchar = Self(rawValue: 1043)
    public static let date = Self(rawValue: 1082)
    public static let timestamp = Self(rawValue: 1114)
    public static let timestamptz = Self(rawValue: 1184)
    public static let numeric = Self(rawValue: 1700)
    public static let uuid = Self(rawValue: 2950)
    public static let jsonb = Self(rawValue: 3802)

    public var description: String {
        switch self {
        case .bool: "bool"
        case .bytea: "bytea"
        case .name: "name"
        case .int8: "int8"
        case .int2: "int2"
        case .int4: "int4"
        case .text: "text"
        case .oid: "oid"
        case .json: "json"
        case .float4: "float4"
        case .float8: "float8"
        case .unknown: "unknown"
        case .bpchar: "bpchar"
        case .varchar: "varchar"
        case .date: "date"
        case .timestamp: "timestamp"
        case .timestamptz: "timestamptz"
        case .numeric: "numeric"
        case .uuid: "uuid"
        case .jsonb: "jsonb"
        default: "oid \(rawValue)"
        }
    }

    static let textual: Set<PostgresTypeOID> = [.text, .varchar, .bpchar, .name, .unknown, .json, .jsonb]
    static let integral: Set<PostgresTypeOID> = [.int2, .int4, .int8, .oid]
}

@usableFromInline
func decodingError(_ message: String) -> PostgresError {
    PostgresError(code: .decoding, message: message)
}

@inline(__always)
func requireValue(_ bytes: UnsafeRawBufferPointer?, _ swiftType: String) throws -> UnsafeRawBufferPointer {
    guard let bytes else { throw decodingError("column is NULL; decode it as \(swiftType)? instead") }
    return bytes
}

// MARK: - Text

extension String: PostgresCodable {
    public var postgresParameter: PostgresParameter { .text(self) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> String {
        // Every type has a text form; decoding any column as String is always allowed.
        String(decoding: try requireValue(bytes, "String"), as: UTF8.self)
    }
}

extension Substring: PostgresEncodable {
    public var postgresParameter: PostgresParameter { .text(String(self)) }
}

// MARK: - Integers

@inline(__always)
func parseInteger(_ bytes: UnsafeRawBufferPointer) -> Int64? {
    guard !bytes.isEmpty else { return nil }
    var index = 0
    var negative = false
    if bytes[0] == UInt8(ascii: "-") {
        negative = true
        index = 1
    }
    guard index < bytes.count else { return nil }
    var value: Int64 = 0
    while index < bytes.count {
        let digit = Int64(bytes[index]) - 48
        guard digit >= 0, digit <= 9 else { return nil }
        let (times10, o1) = value.multipliedReportingOverflow(by: 10)
        let (next, o2) = negative ? times10.subtractingReportingOverflow(digit) : times10.addingReportingOverflow(digit)
        guard !o1, !o2 else { return nil }
        value = next
        index += 1
    }
    return value
}

extension FixedWidthInteger where Self: SignedInteger {
    public var postgresParameter: PostgresParameter { .text(String(self)) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Self {
        let bytes = try requireValue(bytes, "\(Self.self)")
        guard PostgresTypeOID.integral.contains(type) || type == .numeric || type == .unknown else {
            throw decodingError("cannot decode a \(type) column as \(Self.self)")
        }
        guard let wide = parseInteger(bytes), let value = Self(exactly: wide) else {
            throw decodingError("'\(String(decoding: bytes, as: UTF8.self))' is not a \(Self.self)")
        }
        return value
    }
}

extension Int: PostgresCodable {}
extension Int64: PostgresCodable {}
extension Int32: PostgresCodable {}
extension Int16: PostgresCodable {}

// MARK: - Bool, floating point, numeric

extension Bool: PostgresCodable {
    public var postgresParameter: PostgresParameter { .text(self ? "t" : "f") }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Bool {
        let bytes = try requireValue(bytes, "Bool")
        guard type == .bool, bytes.count == 1 else { throw decodingError("cannot decode a \(type) column as Bool") }
        return bytes[0] == UInt8(ascii: "t")
    }
}

extension Double: PostgresCodable {
    public var postgresParameter: PostgresParameter {
        if isNaN { return .text("NaN") }
        if isInfinite { return .text(self < 0 ? "-Infinity" : "Infinity") }
        return .text(String(self))
    }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Double {
        let text = String(decoding: try requireValue(bytes, "Double"), as: UTF8.self)
        guard [.float4, .float8, .numeric, .int2, .int4, .int8].contains(type) else {
            throw decodingError("cannot decode a \(type) column as Double")
        }
        switch text {
        case "NaN": return .nan
        case "Infinity": return .infinity
        case "-Infinity": return -.infinity
        default:
            guard let value = Double(text) else { throw decodingError("'\(text)' is not a Double") }
            return value
        }
    }
}

extension Decimal: PostgresCodable {
    public var postgresParameter: PostgresParameter {
        var value = self
        return .text(NSDecimalString(&value, Locale(identifier: "en_US_POSIX")))
    }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Decimal {
        let text = String(decoding: try requireValue(bytes, "Decimal"), as: UTF8.self)
        guard type == .numeric || PostgresTypeOID.integral.contains(type) else {
            throw decodingError("cannot decode a \(type) column as Decimal")
        }
        // Decimal has 38 significant digits; numeric can hold far more, and NaN. Refuse rather
        // than silently round: such columns can be read as String.
        guard text != "NaN", let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")),
            text.filter(\.isNumber).count <= 38
        else {
            throw decodingError("numeric '\(text)' does not fit Decimal exactly; decode it as String")
        }
        return value
    }
}

// MARK: - UUID

extension UUID: PostgresCodable {
    public var postgresParameter: PostgresParameter { .uuid(self) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> UUID {
        let value = try requireValue(bytes, "UUID")
        guard type == .uuid || PostgresTypeOID.textual.contains(type), let uuid = UUID(canonicalUTF8: value) else {
            throw decodingError("cannot decode '\(String(decoding: value, as: UTF8.self))' (\(type)) as UUID")
        }
        return uuid
    }
}

// MARK: - Bytes

/// Raw bytes, bound in binary format so any byte (NUL included) round-trips through `bytea`.
public struct PostgresBytes: PostgresCodable, Hashable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }
    public init(_ data: Data) { self.bytes = Array(data) }

    public var postgresParameter: PostgresParameter { .binary(bytes) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> PostgresBytes {
        let raw = try requireValue(bytes, "PostgresBytes")
        guard type == .bytea else { return PostgresBytes(Array(raw)) }
        // Text output of bytea is `\x` followed by hex (bytea_output = hex, the default since 9.0).
        guard raw.count >= 2, raw[0] == UInt8(ascii: "\\"), raw[1] == UInt8(ascii: "x"), raw.count % 2 == 0 else {
            throw decodingError("bytea is not in hex output format; set bytea_output = hex")
        }
        var out = [UInt8]()
        out.reserveCapacity((raw.count - 2) / 2)
        var index = 2
        while index < raw.count {
            guard let high = hexValue(raw[index]), let low = hexValue(raw[index + 1]) else {
                throw decodingError("bytea contains a non-hex character")
            }
            out.append(high << 4 | low)
            index += 2
        }
        return PostgresBytes(out)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension Data: PostgresCodable {
    public var postgresParameter: PostgresParameter { .binary(Array(self)) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Data {
        Data(try PostgresBytes.decode(from: bytes, type: type).bytes)
    }
}

// MARK: - JSON

/// A `json`/`jsonb` value carried as its UTF-8 text; the caller chooses how to parse it.
public struct PostgresJSON: PostgresCodable, Hashable {
    public var text: String
    public init(_ text: String) { self.text = text }

    public var postgresParameter: PostgresParameter { .text(text) }

    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> PostgresJSON {
        guard type == .json || type == .jsonb || PostgresTypeOID.textual.contains(type) else {
            throw decodingError("cannot decode a \(type) column as JSON")
        }
        return PostgresJSON(String(decoding: try requireValue(bytes, "PostgresJSON"), as: UTF8.self))
    }
}

// MARK: - Optional (NULL)

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresParameter: PostgresParameter {
        switch self {
        case .none: .null
        case .some(let value): value.postgresParameter
        }
    }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static func decode(from bytes: UnsafeRawBufferPointer?, type: PostgresTypeOID) throws -> Wrapped? {
        guard let bytes else { return nil }
        return try Wrapped.decode(from: bytes, type: type)
    }
}
