import BatonJSON
import Foundation
import Testing

/// The hand-written encoder against Foundation's parser and a byte-at-a-time reference: it
/// reads eight bytes at a time and builds short strings in a register, so every escape is
/// tried at every position of strings around those word sizes.
@Suite("JSON encoding")
struct JSONEncodingTests {
    /// The simplest correct escaper, one scalar at a time.
    static func reference(_ text: String) -> String {
        var output = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case "\u{2028}": output += "\\u2028"
            case "\u{2029}": output += "\\u2029"
            case let control where control.value < 0x20: output += String(format: "\\u%04x", control.value)
            default: output.unicodeScalars.append(scalar)
            }
        }
        return output + "\""
    }

    static func encoded(_ value: JSONValue) -> String {
        String(decoding: JSONEncoding.encode(value), as: UTF8.self)
    }

    static func parsed(_ bytes: [UInt8]) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
    }

    static let specials = ["\"", "\\", "\n", "\r", "\t", "\u{08}", "\u{0C}", "\u{01}", "\u{1F}", "\u{0}", "\u{2028}", "\u{2029}", "é", "✓", "€", "😀", "\u{2027}", "\u{202A}"]

    @Test("every escape at every position of strings from 0 to 24 bytes matches the reference and parses back")
    func everyPosition() throws {
        for length in 0...24 {
            let plain = String((0..<length).map { Character(UnicodeScalar(UInt8(ascii: "a") + UInt8($0 % 26))) })
            #expect(Self.encoded(.string(plain)) == Self.reference(plain))
            for position in 0...length {
                for special in Self.specials {
                    var text = plain
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: position))
                    let bytes = JSONEncoding.encode(.string(text))
                    #expect(String(decoding: bytes, as: UTF8.self) == Self.reference(text), "\(length) \(position) \(special.debugDescription)")
                    #expect(try Self.parsed(bytes) as? String == text)
                }
            }
        }
    }

    @Test("long strings are read where their value points here, so the escaping tests of long strings exercise that path")
    func storedStrings() {
        #if _endian(little) && _pointerBitWidth(_64)
        #expect(StoredUTF8.layoutHolds)
        #endif
        // A long string made at run time, a literal and one grown in place, each with escapes.
        var grown = String(repeating: "x", count: 20)
        grown += "\"\n✓"
        for text in [String(repeating: "ab\u{1}", count: 9), "a literal with a \"quote\" and a\ttab", grown] {
            #expect(Self.encoded(.string(text)) == Self.reference(text))
            #expect(Self.encoded(["k": .string(text)]) == "{\"k\":" + Self.reference(text) + "}")
        }
    }

    @Test("short strings are read from the String value itself here, as names and values, with every special at every position")
    func smallStrings() throws {
        // The two-word path (`SmallUTF8`) must be the one these tests exercise on the
        // platforms we ship: if the standard library's layout ever changed, the check would
        // turn it off silently and only the speed would show it.
        #if _endian(little) && _pointerBitWidth(_64)
        #expect(SmallUTF8.layoutHolds)
        #endif
        for length in 0...14 {
            let plain = String(repeating: "k", count: length)
            for position in 0...length {
                for special in Self.specials where (plain.utf8.count + special.utf8.count) <= 15 {
                    var text = plain
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: position))
                    let object: JSONValue = .object([text: .string(text), "k": .array([.string(text)])])
                    let expected = "{\(Self.reference(text)):\(Self.reference(text)),\"k\":[\(Self.reference(text))]}"
                    #expect(Self.encoded(object) == expected, "\(length) \(position) \(special.debugDescription)")
                }
            }
        }
    }

    @Test("the naughty strings (and each followed by every special) encode as the reference does")
    func naughtyStrings() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("shared/corpora/user-input/blns/blns.json")
        let strings = try JSONDecoder().decode([String].self, from: Data(contentsOf: corpus))
        #expect(strings.count > 500)
        for text in strings {
            for suffix in [""] + Self.specials {
                let value = text + suffix
                let bytes = JSONEncoding.encode(.string(value))
                #expect(String(decoding: bytes, as: UTF8.self) == Self.reference(value))
                // Foundation's parser drops a byte order mark that opens a string (its own
                // encoder's output does not survive either), so those are checked above only.
                if !value.hasPrefix("\u{FEFF}") { #expect(try Self.parsed(bytes) as? String == value) }
            }
        }
    }

    @Test("strings that are not stored contiguously (bridged or lazily built) encode the same")
    func nonContiguous() {
        let text = "tab\there, quote\" and “curly” and \u{2028}"
        let substring = ("xx" + text + "yy").dropFirst(2).dropLast(2)
        #expect(Self.encoded(.string(String(substring))) == Self.reference(text))
        let nsString = NSString(string: text)
        #expect(Self.encoded(.string(nsString as String)) == Self.reference(text))
    }

    @Test("strings longer than one piece (4096 bytes) escape the same at every offset around the piece boundaries")
    func longStrings() throws {
        // Past 4096 bytes a string is written in pieces; an escape (U+2028 is three bytes)
        // may straddle two of them.
        for length in [4090, 4094, 4095, 4096, 4097, 8191, 8192, 8193] {
            for special in ["\u{2028}", "\u{2029}", "\"", "\\", "\u{1}", "—", "😀"] {
                for position in Set([0, 1, 7, 8, length - 9, length - 8, length - 3, length - 2, length - 1, length, 4093, 4094, 4095, 4096, 4097])
                where position <= length {
                    var text = String(repeating: "x", count: length)
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: position))
                    let bytes = JSONEncoding.encode(.string(text))
                    #expect(String(decoding: bytes, as: UTF8.self) == Self.reference(text), "\(length) \(position) \(special.debugDescription)")
                }
            }
        }
        let long = String(repeating: "ab\u{2028}\"", count: 3000)
        #expect(try Self.parsed(JSONEncoding.encode(.string(long))) as? String == long)
    }

    @Test("member names are escaped as values are: short, long past one piece, and bridged")
    func memberNames() throws {
        let names = [
            "", "k\"ey", "tab\t", "\u{2028}", "é✓", String(repeating: "n", count: 5000) + "\n", NSString(string: "bridged\u{2029}") as String,
        ]
        var object = JSONObject()
        for (index, name) in names.enumerated() { object[name] = .int(index) }
        let expected = "{" + names.enumerated().map { Self.reference($1) + ":\($0)" }.joined(separator: ",") + "}"
        #expect(Self.encoded(.object(object)) == expected)
        let back = try #require(try Self.parsed(JSONEncoding.encode(.object(object))) as? [String: Int])
        #expect(back.count == names.count)
    }

    @Test("numbers: integers at the edges, doubles in shortest form, NaN and infinities as null")
    func numbers() {
        for number in [0, 1, 9, 10, -1, -9, -10, 99, 100, 12345, Int.max, Int.min, Int.max - 1, Int.min + 1] {
            #expect(Self.encoded(.int(number)) == String(number))
        }
        #expect(Self.encoded(.double(1.5)) == "1.5")
        #expect(Self.encoded(.double(-0.25)) == "-0.25")
        #expect(Self.encoded(.double(3)) == "3")
        #expect(Self.encoded(.double(1e300)) == "1e+300")
        #expect(Self.encoded(.double(.nan)) == "null")
        #expect(Self.encoded(.double(-.infinity)) == "null")
        #expect(Self.encoded([.bool(true), .bool(false), .null]) == "[true,false,null]")
    }

    @Test("objects keep their key order; nesting and empty containers encode compactly")
    func structure() {
        var object = JSONObject()
        object["zeta"] = 1
        object["alpha"] = ["nested": [[:], []], "k\"ey": "v"]
        object["mid"] = .array([])
        #expect(Self.encoded(.object(object)) == #"{"zeta":1,"alpha":{"nested":[{},[]],"k\"ey":"v"},"mid":[]}"#)
    }

    @Test("short strings across every growth of the buffer are written whole")
    func growthWithShortStrings() throws {
        // Lengths 0–9 in turn, so every kind of string write lands on a buffer boundary.
        let strings = (0..<20_000).map { String(repeating: "k", count: $0 % 10) + ($0 % 7 == 0 ? "\"" : "") }
        let bytes = JSONEncoding.encode(.array(strings.map(JSONValue.string)))
        #expect(try Self.parsed(bytes) as? [String] == strings)
    }

    @Test("output far past the first buffer (megabytes) is whole and parses back")
    func largeOutput() throws {
        let long = String(repeating: "0123456789abcdef", count: 4096) + "\n"
        let value = JSONValue.array((0..<40).map { index in ["index": .int(index), "text": .string(long)] })
        let bytes = JSONEncoding.encode(value)
        #expect(bytes.count > 2_000_000)
        let back = try #require(try Self.parsed(bytes) as? [[String: Any]])
        #expect(back.count == 40)
        #expect(back.last?["text"] as? String == long)
        #expect(back.last?["index"] as? Int == 39)
    }
}
