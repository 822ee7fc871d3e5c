import BatonJSON
import Foundation
import Testing

/// The parser against JSONTestSuite (from ../shared/corpora/json): every document the RFC
/// accepts parses, every one it refuses is refused, none of the implementation-defined ones
/// crashes.
@Suite("JSON parsing")
struct JSONParsingTests {
    static let suite = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/corpora/json/JSONTestSuite/test_parsing")

    static func files(_ prefix: String) throws -> [(name: String, bytes: [UInt8])] {
        try FileManager.default.contentsOfDirectory(atPath: suite.path).filter { $0.hasPrefix(prefix) }.sorted()
            .map { ($0, Array(try Data(contentsOf: suite.appendingPathComponent($0)))) }
    }

    @Test("y_*: every document that must be accepted parses, the same as Foundation reads it")
    func accepted() throws {
        let cases = try Self.files("y_")
        #expect(cases.count > 90)
        for (name, bytes) in cases {
            do {
                let value = try JSONValue.parse(bytes, maxDepth: 512)
                // Same content as Foundation's own reading, through a round trip of ours.
                let ours = try JSONSerialization.jsonObject(with: Data(JSONEncoding.encode(value)), options: [.fragmentsAllowed])
                let theirs = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
                #expect(Self.same(ours, theirs), "\(name)")
            } catch {
                Issue.record("\(name): \(error)")
            }
        }
    }

    /// Foundation values compared as JSON: numbers by value (Foundation may read one as a
    /// Decimal where ours is a Double), the rest as they are.
    static func same(_ a: Any, _ b: Any) -> Bool {
        switch (a, b) {
        case (let x as [Any], let y as [Any]): return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (let x as [String: Any], let y as [String: Any]):
            return x.count == y.count && x.allSatisfy { key, value in y[key].map { same(value, $0) } ?? false }
        case (let x as NSNumber, let y as NSNumber):
            let (p, q) = (x.doubleValue, y.doubleValue)
            return p == q || abs(p - q) <= abs(q) * 1e-12
        default: return NSArray(object: a).isEqual(NSArray(object: b))
        }
    }

    @Test("n_*: every document that must be refused is refused, with a message saying where")
    func refused() throws {
        let cases = try Self.files("n_")
        #expect(cases.count > 180)
        for (name, bytes) in cases {
            #expect(throws: JSONValue.ParseError.self, "\(name)") { try JSONValue.parse(bytes) }
        }
        let error = try #require(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array(#"{"a": [1, 2,]}"#.utf8)) }
        #expect(error.description == "not valid JSON: unexpected character at byte 12")
    }

    @Test("i_*: implementation-defined documents are either read or refused, never a crash")
    func implementationDefined() throws {
        let cases = try Self.files("i_")
        #expect(cases.count > 30)
        for (_, bytes) in cases { _ = try? JSONValue.parse(bytes) }
    }

    @Test("members keep document order; a repeated key keeps its first place and its last value")
    func order() throws {
        let value = try JSONValue.parse(Array(#"{"z": 1, "a": {"y": true, "b": null}, "z": "again"}"#.utf8))
        #expect(value.objectValue?.keys.elements == ["z", "a"])
        #expect(value["z"] == "again")
        #expect(value["a"]?.objectValue?.keys.elements == ["y", "b"])
    }

    @Test("numbers: whole numbers that fit are integers, others doubles; out-of-range numbers are refused")
    func numbers() throws {
        #expect(try JSONValue.parse(Array("-0".utf8)) == .int(0))
        #expect(try JSONValue.parse(Array("9223372036854775807".utf8)) == .int(Int.max))
        #expect(try JSONValue.parse(Array("-9223372036854775808".utf8)) == .int(Int.min))
        #expect(try JSONValue.parse(Array("9223372036854775808".utf8)) == .double(9_223_372_036_854_775_808))
        #expect(try JSONValue.parse(Array("1.5e3".utf8)) == .double(1500))
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array("1e400".utf8)) }
    }

    @Test("depth: nesting past the limit is refused before it can exhaust the stack")
    func depth() throws {
        let deep = Array(String(repeating: "[", count: 100_000).utf8)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(deep) }
        let ok = Array((String(repeating: "[", count: 64) + String(repeating: "]", count: 64)).utf8)
        #expect(throws: Never.self) { try JSONValue.parse(ok) }
        let tooDeep = Array((String(repeating: "{\"a\":", count: 65) + "1" + String(repeating: "}", count: 65)).utf8)
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(tooDeep) }
    }

    @Test("what the encoder writes, the parser reads back unchanged (naughty strings included)")
    func roundTrip() throws {
        let corpus = Self.suite.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("user-input/blns/blns.json")
        let strings = try JSONDecoder().decode([String].self, from: Data(contentsOf: corpus))
        var object = JSONObject()
        for (index, text) in strings.enumerated() { object[text] = [.string(text), .int(index), .double(Double(index) / 3), .bool(index % 2 == 0), .null] }
        let value = JSONValue.object(object)
        let back = try JSONValue.parse(JSONEncoding.encode(value))
        #expect(back == value)
        #expect(JSONEncoding.encode(back) == JSONEncoding.encode(value))
    }

    // An int and a double compared through `Double(int)`: 2^53 + 1 equalled the double 2^53,
    // which equals the int 2^53, while the two ints differ, so equality was not transitive.
    @Test("an int equals a double only when the double is exactly that int: equality stays transitive past 2^53")
    func intAndDoubleEquality() {
        let big = 9_007_199_254_740_992  // 2^53
        #expect(JSONValue.int(2) == .double(2.0) && JSONValue.double(2.0) == .int(2))
        #expect(JSONValue.int(big) == .double(Double(big)))
        #expect(JSONValue.int(big + 1) != .double(Double(big)))
        #expect(JSONValue.double(Double(big)) != .int(big + 1))
        #expect(JSONValue.int(Int.max) != .double(Double(Int.max)), "2^63 is past Int.max")
        #expect(JSONValue.int(1) != .double(1.5))
    }

    // Swift's String compares by canonical equivalence, so a name spelled "é" (U+00E9) and one
    // spelled "e" and U+0301 were one member, the second's value under the first's spelling, while
    // the encoder and the fitter (`JSONObjectView`) compare bytes: the same document meant two
    // things. RFC 8259 compares names code unit by code unit.
    @Test("member names that differ only in Unicode normalisation are refused; a plain duplicate still takes the last value")
    func namesByBytes() throws {
        for pair in [("\u{E9}", "e\u{301}"), ("\u{212A}", "K"), ("Gym\u{E9}", "Gyme\u{301}")] {
            let refused = #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array("{\"\(pair.0)\":1,\"\(pair.1)\":2}".utf8)) }
            #expect(refused?.description.contains("normalisation") == true, "\(String(describing: refused))")
            #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array("{\"\(pair.0)\":1,\"x\":{},\"\(pair.1)\":2}".utf8)) }
        }
        #expect(try JSONValue.parse(Array(#"{"a":1,"a":2}"#.utf8)) == ["a": 2])
        #expect(try JSONValue.parse(Array("{\"\u{E9}\":1,\"\u{E9}\":2}".utf8)) == ["\u{E9}": 2])
        // Refusing duplicates (a token's claims), also spelled with an escape and nested.
        for document in [#"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, #"{"x":{"b":1,"b":1}}"#] {
            #expect(throws: JSONValue.ParseError.self, "\(document)") { try JSONValue.parse(Array(document.utf8), refusingDuplicateNames: true) }
        }
        #expect(try JSONValue.parse(Array(#"{"a":1,"x":{"a":2}}"#.utf8), refusingDuplicateNames: true) == ["a": 1, "x": ["a": 2]])
    }

    // Swift compares, hashes and normalises strings by canonical equivalence, which sorts each
    // run of combining marks by insertion: a 64 KB member name of two reversed runs cost 0.6 s
    // per comparison with another name, before any authentication. Unicode's stream-safe
    // format (UAX #15) allows at most 30 in a row; the parser refuses more, in names and values,
    // written raw or escaped.
    @Test("strings with more than 30 combining marks in a row are refused, raw or escaped; 30 are read; marks after letters are text")
    func combiningRuns() throws {
        func document(_ marks: Int, escaped: Bool = false, asName: Bool = false) -> [UInt8] {
            let run = (0..<marks).map { $0 % 2 == 0 ? (escaped ? "\\u0301" : "\u{301}") : (escaped ? "\\u0316" : "\u{316}") }.joined()
            return Array((asName ? "{\"a\(run)\":1}" : "[\"a\(run)\"]").utf8)
        }
        for escaped in [false, true] {
            for asName in [false, true] {
                #expect(throws: Never.self) { try JSONValue.parse(document(30, escaped: escaped, asName: asName)) }
                let refused = #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(document(31, escaped: escaped, asName: asName)) }
                #expect(refused?.description.contains("combining marks") == true, "\(String(describing: refused))")
            }
        }
        let long = "{\"a" + String(repeating: "\u{301}", count: 16_000) + String(repeating: "\u{316}", count: 16_000) + "\":1,\"b\":2}"
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(Array(long.utf8)) }
        // Accented text: each mark follows a letter of its own.
        let text = String(repeating: "e\u{301}a\u{316}\u{301}", count: 2000)
        #expect(try JSONValue.parse(Array("[\"\(text)\"]".utf8)).arrayValue?.first?.stringValue == text)
    }

    @Test("strings: ASCII and other UTF-8 read as they are, bytes that are not UTF-8 refused, with or without escapes")
    func stringEncodings() throws {
        func parse(_ bytes: [UInt8]) throws -> JSONValue { try JSONValue.parse([UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")]) }
        #expect(try parse(Array("plain ASCII ~".utf8)) == .string("plain ASCII ~"))
        #expect(try parse(Array("caf\u{E9} \u{1F600}".utf8)) == .string("caf\u{E9} \u{1F600}"))
        #expect(try parse(Array("a\\nb caf\u{E9}".utf8)) == .string("a\nb caf\u{E9}"))
        #expect(try parse(Array("caf\\u00e9 \\ud83d\\ude00 \\u0041".utf8)) == .string("caf\u{E9} \u{1F600} A"))
        let invalid: [[UInt8]] = [
            [0x61, 0xFF],  // never in UTF-8
            [0x61, 0xC3],  // a two-byte sequence cut short
            [0xF0, 0x9F, 0x98],  // a four-byte sequence cut short
            [0xED, 0xA0, 0x80],  // a surrogate encoded as UTF-8
            [0xC0, 0xAF],  // an overlong "/"
            Array("a\\n".utf8) + [0x80],  // after an escape
            [0xFF] + Array("\\n".utf8),  // before an escape
        ]
        for bytes in invalid {
            let error = try #require(throws: JSONValue.ParseError.self, "\(bytes)") { try parse(bytes) }
            #expect(error.description.contains("not valid UTF-8"), "\(bytes): \(error)")
        }
    }
}
