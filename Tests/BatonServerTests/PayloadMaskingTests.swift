import Testing

@testable import BatonRuntime

/// The ETag's payload masking against a byte-by-byte reading of the same rule.
@Suite struct PayloadMaskingTests {
    /// The rule, read plainly: everything except the value of each `"payload":"…"` member.
    static func reference(_ body: [UInt8]) -> [UInt8] {
        let marker = Array(#""payload":""#.utf8)
        var output: [UInt8] = []
        var index = 0
        while index < body.count {
            if index + marker.count <= body.count, body[index..<(index + marker.count)].elementsEqual(marker) {
                output += marker
                index += marker.count
                while index < body.count, body[index] != UInt8(ascii: "\"") { index += 1 }
            } else {
                output.append(body[index])
                index += 1
            }
        }
        return output
    }

    static func masked(_ body: [UInt8]) -> [UInt8] {
        var output: [UInt8] = []
        ScreenReply.splittingPayloads(body) { chunk, _ in output += chunk }
        return output
    }

    @Test(arguments: [
        "",
        "{}",
        #"{"payload":"abc.def"}"#,
        #"{"a":{"payload":"x.y"},"b":[{"payload":"p.q","title":"t"}],"payload":"z.z"}"#,
        #"{"payload":""}"#,
        #"{"payload":"unterminated"#,
        #""payload":""#,
        #"{"text":"\"payload\":\"not a member\""}"#,
    ])
    func matchesTheRule(body: String) {
        #expect(Self.masked(Array(body.utf8)) == Self.reference(Array(body.utf8)))
    }

    @Test func differentPayloadsGiveTheSameETag() {
        let first = ScreenReply(body: Array(#"{"action":{"payload":"aaa.bbb"}}"#.utf8), subject: "user:1", validUntil: 7)
        let second = ScreenReply(body: Array(#"{"action":{"payload":"ccc.ddd"}}"#.utf8), subject: "user:1", validUntil: 7)
        let other = ScreenReply(body: Array(#"{"action":{"payload":"ccc.ddd"},"x":1}"#.utf8), subject: "user:1", validUntil: 7)
        #expect(first.etag == second.etag)
        #expect(first.etag != other.etag)
    }
}
