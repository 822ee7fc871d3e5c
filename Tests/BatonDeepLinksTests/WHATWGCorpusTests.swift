import BatonDeepLinks
import BatonJSON
import Foundation
import Testing

/// The strict parser against the URL Standard's own test cases (web-platform-tests
/// urltestdata.json, in ../shared/corpora/whatwg-url): what WHATWG refuses is refused, relative
/// inputs are refused, and wherever the parser accepts, it finds the host a browser would.
@Suite("WHATWG URL corpus")
struct WHATWGCorpusTests {
    struct Case {
        var input: String
        var base: String?
        var failure: Bool
        var hostname: String?
    }

    /// String elements of the file are comments; objects are cases.
    static func cases(_ name: String) throws -> [JSONValue] {
        let data = try Data(contentsOf: Files.corpora.appendingPathComponent("whatwg-url/\(name)"))
        guard case .array(let items) = try JSONValue.parse(Array(data)) else { throw CorpusError.notAnArray }
        return items.filter { $0.objectValue != nil }
    }

    enum CorpusError: Error { case notAnArray }

    static func urlCases() throws -> [Case] {
        try cases("urltestdata.json").map {
            Case(input: $0["input"]!.stringValue!, base: $0["base"]?.stringValue, failure: $0["failure"]?.boolValue == true,
                hostname: $0["hostname"]?.stringValue)
        }
    }

    /// Whether `input` starts with a scheme and so stands without a base.
    static func looksAbsolute(_ input: String) -> Bool {
        guard let colon = input.firstIndex(of: ":") else { return false }
        let scheme = input[..<colon]
        guard let first = scheme.unicodeScalars.first, first.isASCIILetter else { return false }
        return scheme.unicodeScalars.allSatisfy { $0.isASCIILetter || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) }
    }

    @Test("cases without a base: no crash, every failure refused, accepted hosts equal WHATWG's")
    func absoluteCases() throws {
        let all = try Self.urlCases().filter { $0.base == nil }
        #expect(all.count > 300)
        var accepted = 0
        var refusedFailures = 0
        for item in all {
            switch StrictURL.parse(item.input) {
            case .success(let url):
                accepted += 1
                #expect(!item.failure, "WHATWG refuses \(item.input.debugDescription), the parser accepted it")
                #expect((url.host ?? "") == item.hostname?.lowercased(), "\(item.input.debugDescription): \(url.host ?? "-") vs \(item.hostname ?? "-")")
                // A second opinion from Foundation's RFC 3986 parser, never used for decisions.
                #expect(Invariants.foundationHost(item.input) == url.host, "Foundation disagrees on \(item.input.debugDescription)")
            case .failure:
                if item.failure { refusedFailures += 1 }
            }
        }
        // The parser accepts ordinary URLs (it is not refusing everything)...
        #expect(accepted >= 40, "accepted \(accepted)")
        // ... and every failure case was seen and refused.
        #expect(refusedFailures == all.filter(\.failure).count)
    }

    @Test("cases with a base, the base ignored: relative inputs refused, absolute ones as above")
    func baseIgnored() throws {
        let all = try Self.urlCases().filter { $0.base != nil }
        #expect(all.count > 300)
        var relative = 0
        var accepted = 0
        for item in all {
            let result = StrictURL.parse(item.input)
            if !Self.looksAbsolute(item.input) {
                relative += 1
                if case .success = result { Issue.record("relative \(item.input.debugDescription) accepted") }
                continue
            }
            guard case .success(let url) = result else { continue }
            accepted += 1
            #expect(!item.failure, "WHATWG refuses \(item.input.debugDescription) (base \(item.base ?? "")), the parser accepted it")
            if let hostname = item.hostname {
                #expect((url.host ?? "") == hostname.lowercased(), "\(item.input.debugDescription): \(url.host ?? "-") vs \(hostname)")
            }
        }
        #expect(relative > 100)
        #expect(accepted > 10)
    }

    @Test("every input of the file, as a deep link and as an openUrl target, keeps the invariants")
    func decisions() throws {
        let allowlist = try Files.productAllowlist()
        for item in try Self.urlCases() {
            for platform in ["appclip", "ios", "web"] {
                Invariants.checkAllowed(item.input, allowlist.match(item.input, platform: platform))
            }
            Invariants.checkOutbound(item.input, allowlist.outbound(item.input))
        }
    }

    @Test("IDNA ToASCII cases as hosts: only ASCII names are accepted, equal to WHATWG's output")
    func toASCII() throws {
        var accepted = 0
        for item in try Self.cases("toascii.json") {
            guard let input = item["input"]?.stringValue else { continue }
            guard case .success(let url) = StrictURL.parse("https://\(input)/") else { continue }
            accepted += 1
            let ascii = input.unicodeScalars.allSatisfy { $0.isASCII }
            #expect(ascii, "non-ASCII host \(input.debugDescription) accepted")
            #expect(url.host == item["output"]?.stringValue, "\(input.debugDescription)")
        }
        #expect(accepted > 5)
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
}
