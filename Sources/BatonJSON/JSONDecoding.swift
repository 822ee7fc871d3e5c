import Foundation

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int.self) {
            self = .int(number)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([JSONValue].self) {
            self = .array(elements)
        } else {
            // Foundation hands objects over as a dictionary; sort keys so the result is stable.
            let members = try container.decode([String: JSONValue].self)
            var object = JSONObject()
            for key in members.keys.sorted() { object[key] = members[key] }
            self = .object(object)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(Dictionary(uniqueKeysWithValues: value.map { ($0.key, $0.value) }))
        }
    }
}

extension JSONValue {
    /// Why a document could not be parsed.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Parses a JSON document (RFC 8259; any top-level value; UTF-8 only). Objects keep their
    /// members in document order (a repeated key keeps its first place and its last value, or
    /// with `refusingDuplicateNames` the document is refused, as a token's claims must be).
    /// Nesting deeper than `maxDepth` is refused, so hostile input cannot exhaust the stack.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64, refusingDuplicateNames: Bool = false) throws -> JSONValue {
        if let result = try bytes.withContiguousStorageIfAvailable({
            try parse(buffer: $0, maxDepth: maxDepth, refusingDuplicateNames: refusingDuplicateNames)
        }) {
            return result
        }
        return try Array(bytes).withUnsafeBufferPointer { try parse(buffer: $0, maxDepth: maxDepth, refusingDuplicateNames: refusingDuplicateNames) }
    }

    private static func parse(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int, refusingDuplicateNames: Bool) throws -> JSONValue {
        var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
        parser.refusingDuplicateNames = refusingDuplicateNames
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.index == buffer.count else { throw parser.error("unexpected content after the document") }
        return value
    }
}

/// A strict recursive-descent reader of RFC 8259 JSON into `JSONValue`.
///
/// Written by hand: Foundation's `JSONDecoder` cannot produce an untyped value without
/// trying each type in turn (about 25 µs for a 150-byte command payload on the reference
/// machine, where this takes about 1), and `JSONSerialization` loses member order and the
/// difference between `true` and `1`. Checked against the JSONTestSuite corpus.
private struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var refusingDuplicateNames = false

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    func error(_ message: String) -> JSONValue.ParseError {
        JSONValue.ParseError(description: "not valid JSON: \(message) at byte \(index)")
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws -> JSONValue {
        guard index < bytes.count else { throw error("the document ends where a value should be") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    mutating func literal(_ word: StaticString, _ value: JSONValue) throws -> JSONValue {
        let length = word.utf8CodeUnitCount
        guard index + length <= bytes.count,
            memcmp(bytes.baseAddress! + index, word.utf8Start, length) == 0
        else { throw error("unknown literal") }
        index += length
        return value
    }

    mutating func parseObject(depth: Int) throws -> JSONValue {
        guard depth <= maxDepth else { throw error("nested more than \(maxDepth) levels deep") }
        index += 1  // {
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object([:])
        }
        // Room for four members from the start: grown member by member, the keys and the
        // values each took three allocations by the fourth (`Benchmarks/e2e/counts.sh`). Up to
        // 15 members an ordered dictionary has no hash table, so the room costs no more.
        var object = JSONObject(minimumCapacity: 4)
        while true {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a member name in quotes") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':' after a member name") }
            index += 1
            skipWhitespace()
            // A name given twice takes the last value. A name canonically equivalent to an
            // earlier one but spelled otherwise ("é" and "e" with U+0301) would be stored under
            // the earlier spelling, while the encoder and the fitter tell them apart by bytes:
            // refused (RFC 8259 compares names code unit by code unit).
            if object.updateValue(try parseValue(depth: depth), forKey: key) != nil {
                if refusingDuplicateNames { throw error("a member name is given twice") }
                if let stored = object.index(forKey: key), !object.keys[stored].hasSameBytes(as: key) {
                    throw error("two member names differ only in Unicode normalisation")
                }
            }
            skipWhitespace()
            guard index < bytes.count else { throw error("the document ends inside an object") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "}"):
                index += 1
                return .object(object)
            default:
                throw error("expected ',' or '}' in an object")
            }
        }
    }

    mutating func parseArray(depth: Int) throws -> JSONValue {
        guard depth <= maxDepth else { throw error("nested more than \(maxDepth) levels deep") }
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error("the document ends inside an array") }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
                skipWhitespace()
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default:
                throw error("expected ',' or ']' in an array")
            }
        }
    }

    /// A string literal (at its opening quote). Runs without escapes are taken whole; the
    /// result must be valid UTF-8, with surrogate escapes only in pairs.
    mutating func parseString() throws -> String {
        index += 1  // "
        let start = index
        // Every byte's high bit, or-ed: clear when the string is ASCII (see ``makeString(_:ascii:)``).
        var high: UInt8 = 0
        // The common case: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            high |= byte
            if byte == UInt8(ascii: "\"") {
                let text = try makeString(UnsafeBufferPointer(rebasing: bytes[start..<index]), ascii: high < 0x80)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("a control character inside a string must be escaped") }
            index += 1
        }
        var buffer = Array(UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try buffer.withUnsafeBufferPointer { try makeString($0, ascii: high < 0x80) }
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): buffer.append(escape)
                case UInt8(ascii: "b"): buffer.append(0x08)
                case UInt8(ascii: "f"): buffer.append(0x0C)
                case UInt8(ascii: "n"): buffer.append(0x0A)
                case UInt8(ascii: "r"): buffer.append(0x0D)
                case UInt8(ascii: "t"): buffer.append(0x09)
                case UInt8(ascii: "u"):
                    try appendUnicodeEscape(to: &buffer)
                    high |= buffer.last ?? 0
                default:
                    index -= 1
                    throw error("unknown escape")
                }
            case 0x00..<0x20:
                throw error("a control character inside a string must be escaped")
            default:
                high |= byte
                buffer.append(byte)
                index += 1
            }
        }
        throw error("the document ends inside a string")
    }

    /// The string of `utf8`, which `parseString` has found to be `ascii` or not as it scanned it.
    func makeString(_ utf8: UnsafeBufferPointer<UInt8>, ascii: Bool) throws -> String {
        // ASCII (nearly every key and value) is valid UTF-8 as it stands: `String(decoding:)` takes
        // it on the standard library's UTF-8 fast path. `String(validating:as:)` is generic over
        // the encoding and runs unspecialized, with type lookups that made it 0.7 % of a
        // command's CPU profile (docs/benchmarks.md); it stays the check for everything else.
        if ascii { return String(decoding: utf8, as: UTF8.self) }
        guard let text = String(validating: utf8, as: UTF8.self) else { throw error("a string is not valid UTF-8") }
        try checkStreamSafe(text)
        return text
    }

    /// Unicode's stream-safe format (UAX #15): at most 30 combining marks in a row. Swift
    /// compares, hashes and normalises strings by canonical equivalence, which sorts each run of
    /// marks by insertion: two reversed runs in a 64 KB member name cost 0.6 s per comparison
    /// with another name. No text a person writes comes near the limit.
    func checkStreamSafe(_ text: String) throws {
        var run = 0
        for scalar in text.unicodeScalars {
            // No scalar below U+0300 is a combining mark.
            if scalar.value < 0x300 || scalar.properties.canonicalCombiningClass == .notReordered {
                run = 0
            } else {
                run += 1
                if run > 30 { throw error("a string has more than 30 combining marks in a row") }
            }
        }
    }

    /// `\uXXXX` (after the `u`), with a following low surrogate when it is a high one.
    mutating func appendUnicodeEscape(to buffer: inout [UInt8]) throws {
        var value = try hex4()
        if (0xD800..<0xDC00).contains(value) {
            guard index + 6 <= bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("a lone surrogate escape")
            }
            index += 2
            let low = try hex4()
            guard (0xDC00..<0xE000).contains(low) else { throw error("a lone surrogate escape") }
            value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00..<0xE000).contains(value) {
            throw error("a lone surrogate escape")
        }
        guard let scalar = Unicode.Scalar(value) else { throw error("an invalid unicode escape") }
        buffer.append(contentsOf: UTF8.encode(scalar)!)
    }

    mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("a unicode escape needs four hex digits") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("a unicode escape needs four hex digits")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: an `int` when it is a whole number
    /// that fits, else a finite `double`.
    mutating func parseNumber() throws -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error("a number cannot have leading zeros") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var integral = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("a fraction needs digits") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            integral = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("an exponent needs digits") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let negative = bytes[start] == UInt8(ascii: "-")
        if integral, index - start - (negative ? 1 : 0) <= 18 {
            // Up to 18 digits always fit: no string needed.
            var number = 0
            for position in (negative ? start + 1 : start)..<index { number = number * 10 + Int(bytes[position] - UInt8(ascii: "0")) }
            return .int(negative ? -number : number)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let number = Int(text) { return .int(number) }
        guard let number = Double(text), number.isFinite else { throw error("a number out of range") }
        return .double(number)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
