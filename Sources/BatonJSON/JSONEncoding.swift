/// Compact, deterministic JSON serialisation, written for speed: screens of hundreds of
/// components are encoded on every request. Keys keep their order; strings are escaped as
/// RFC 8259 requires (plus U+2028/U+2029, which break JavaScript string literals).
public enum JSONEncoding {
    /// The compact UTF-8 encoding of `value`.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var output: [UInt8] = []
        output.reserveCapacity(256)
        append(value, to: &output)
        return output
    }

    /// Appends the compact encoding of `value` to `output`.
    public static func append(_ value: JSONValue, to output: inout [UInt8]) {
        switch value {
        case .null: output.append(contentsOf: nullBytes)
        case .bool(let flag): output.append(contentsOf: flag ? trueBytes : falseBytes)
        case .int(let number): appendInteger(number, to: &output)
        case .double(let number): output.append(contentsOf: format(number).utf8)
        case .string(let text): appendString(text, to: &output)
        case .array(let elements):
            output.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                append(element, to: &output)
            }
            output.append(UInt8(ascii: "]"))
        case .object(let object):
            output.append(UInt8(ascii: "{"))
            var first = true
            for (key, element) in object {
                if !first { output.append(UInt8(ascii: ",")) }
                first = false
                appendString(key, to: &output)
                output.append(UInt8(ascii: ":"))
                append(element, to: &output)
            }
            output.append(UInt8(ascii: "}"))
        }
    }

    /// Numbers JSON can carry: finite doubles in shortest round-trip form, integral values
    /// without a fraction; NaN and infinities (not representable) become `null`.
    public static func format(_ number: Double) -> String {
        guard number.isFinite else { return "null" }
        if number == number.rounded(), abs(number) < 1e15 { return String(Int(number)) }
        return String(number)
    }

    private static let nullBytes = Array("null".utf8)
    private static let trueBytes = Array("true".utf8)
    private static let falseBytes = Array("false".utf8)
    private static let hexDigits = Array("0123456789abcdef".utf8)

    @inline(__always)
    private static func appendInteger(_ number: Int, to output: inout [UInt8]) {
        if number >= 0, number < 10 {
            output.append(UInt8(ascii: "0") &+ UInt8(number))
            return
        }
        output.append(contentsOf: String(number).utf8)
    }

    /// Appends `text` as a JSON string literal.
    public static func appendString(_ text: String, to output: inout [UInt8]) {
        output.append(UInt8(ascii: "\""))
        var utf8 = text.utf8
        // Fast path: most strings need no escaping at all.
        let needsEscaping = utf8.withContiguousStorageIfAvailable { buffer in
            buffer.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 == 0xE2 }
        }
        if needsEscaping == false {
            output.append(contentsOf: utf8)
            output.append(UInt8(ascii: "\""))
            return
        }
        if needsEscaping == nil {
            var copy = text
            copy.makeContiguousUTF8()
            utf8 = copy.utf8
        }
        var iterator = utf8.makeIterator()
        var pending: [UInt8] = []
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
            case UInt8(ascii: "\\"): output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
            case 0x0A: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
            case 0x0D: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
            case 0x09: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
            case 0x08: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "b")])
            case 0x0C: output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "f")])
            case 0x00..<0x20:
                output.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                output.append(hexDigits[Int(byte >> 4)])
                output.append(hexDigits[Int(byte & 0xF)])
            case 0xE2:
                // U+2028 / U+2029 are E2 80 A8 / E2 80 A9.
                pending = [byte]
                if let second = iterator.next() {
                    pending.append(second)
                    if second == 0x80, let third = iterator.next() {
                        if third == 0xA8 || third == 0xA9 {
                            output.append(contentsOf: Array((third == 0xA8 ? "\\u2028" : "\\u2029").utf8))
                            continue
                        }
                        pending.append(third)
                    }
                }
                output.append(contentsOf: pending)
            default:
                output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
    }
}
