import BatonTestSupport
import Foundation
import Testing

@testable import BatonServer

/// The HS256 fast path and the `kid` reading (Baton's own base64url and JSON parsers, kept
/// for speed) against jwt-kit's and Foundation's readings, over hostile corpora: every
/// JSONTestSuite document inside a token's claims, as its subject, inside its header and as
/// its kid, and every naughty string as a claim's value. Whatever the fast path accepts,
/// jwt-kit must accept and read the same way; it may leave any token to jwt-kit.
@Suite struct BearerFastPathCorpusTests {
    static let corpora = TestDatabase.corpora
    static let suite = corpora.appendingPathComponent("json/JSONTestSuite/test_parsing")

    /// Every JSONTestSuite document, by name: y_ (must parse), n_ (must not), i_ (either).
    static func documents() throws -> [(name: String, bytes: [UInt8])] {
        try FileManager.default.contentsOfDirectory(atPath: suite.path).filter { $0.hasSuffix(".json") }.sorted()
            .map { ($0, Array(try Data(contentsOf: suite.appendingPathComponent($0)))) }
    }

    /// The naughty strings, each a JSON string literal as `JSONSerialization` writes it
    /// (escaped where it must be; the fast path leaves those to jwt-kit).
    static func naughtyLiterals() throws -> [(text: String, literal: [UInt8])] {
        let strings = try JSONSerialization.jsonObject(with: Data(contentsOf: corpora.appendingPathComponent("user-input/blns/blns.json")))
        let list = try #require(strings as? [String])
        return try list.map { text in
            let array = try JSONSerialization.data(withJSONObject: [text], options: [.fragmentsAllowed, .withoutEscapingSlashes])
            return (text, Array(array.dropFirst().dropLast()))  // the literal without the array's brackets
        }
    }

    /// A document's one element when it is an array of one, as nearly all of JSONTestSuite's
    /// string and number cases are (`["…"]`), else the document: what goes where a claim's
    /// value goes.
    static func value(_ document: [UInt8]) -> [UInt8] {
        guard document.first == UInt8(ascii: "["), document.last == UInt8(ascii: "]") else { return document }
        return Array(document.dropFirst().dropLast())
    }

    static func token(header: [UInt8] = Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8), payload: [UInt8]) -> String {
        BearerFastPathTests.token(header: header, payload: payload)
    }

    /// Checks one token: when the fast path reads it, jwt-kit reads the same claims. Returns
    /// whether the fast path read it.
    static func agrees(_ token: String, _ what: String) async -> Bool {
        guard let fast = BearerAuthenticator.hs256Claims(ofToken: token, keyed: BearerFastPathTests.keyed) else { return false }
        let slow = await BearerFastPathTests.throughJWTKit(token)
        #expect(slow == fast, "the fast path read \(what) as \(fast), jwt-kit as \(String(describing: slow))")
        return true
    }

    @Test("each JSONTestSuite document as a member of the claims: whatever the fast path reads, jwt-kit reads the same")
    func documentsInTheClaims() async throws {
        var read: [String] = []
        for (name, bytes) in try Self.documents() {
            let payload = Array(#"{"sub":"henk","exp":2000000000,"x":"#.utf8) + bytes + Array("}".utf8)
            if await Self.agrees(Self.token(payload: payload), name) { read.append(name) }
        }
        // Not vacuous: the documents that are plain values without escapes take the fast path
        // (65 of the 95 y_ ones), and none the RFC refuses.
        #expect(read.filter { $0.hasPrefix("y_") }.count > 60, "\(read)")
        #expect(read.filter { $0.hasPrefix("n_") }.isEmpty, "\(read.filter { $0.hasPrefix("n_") })")
    }

    @Test("each JSONTestSuite document as the subject's value")
    func documentsAsTheSubject() async throws {
        var subjects = 0
        for (name, bytes) in try Self.documents() {
            let payload = Array(#"{"exp":2000000000,"sub":"#.utf8) + Self.value(bytes) + Array("}".utf8)
            if await Self.agrees(Self.token(payload: payload), name + " as the subject") { subjects += 1 }
        }
        // The strings without escapes, raw UTF-8 among them.
        #expect(subjects > 15, "the fast path read \(subjects) subjects")
    }

    @Test("each JSONTestSuite document as a member of the header and as the kid's value: the fast path reads only an HS256 header jwt-kit reads, and the kid as Foundation does")
    func documentsInTheHeader() async throws {
        let claims = Array(#"{"sub":"henk","exp":2000000000}"#.utf8)
        var (read, kids) = ([String](), 0)
        for (name, bytes) in try Self.documents() {
            let member = Array(#"{"alg":"HS256","x":"#.utf8) + bytes + Array("}".utf8)
            if await Self.agrees(Self.token(header: member, payload: claims), name + " in the header") { read.append(name) }
            // A header with a kid is always left to jwt-kit; what is checked here is the kid.
            let header = Array(#"{"alg":"HS256","kid":"#.utf8) + Self.value(bytes) + Array("}".utf8)
            let token = Self.token(header: header, payload: claims)
            // Where Foundation reads a kid, Baton's reading agrees with it. (Where Foundation
            // refuses the header, jwt-kit refuses the token whatever kid Baton reads.)
            if let kid = BearerAuthenticator.keyIDThroughFoundation(ofToken: token) {
                kids += 1
                #expect(BearerAuthenticator.keyID(ofToken: token) == kid, "\(name)")
            }
        }
        #expect(read.filter { $0.hasPrefix("y_") }.count > 60, "\(read)")
        #expect(read.filter { $0.hasPrefix("n_") }.isEmpty, "\(read.filter { $0.hasPrefix("n_") })")
        #expect(kids > 40, "Foundation read \(kids) kids")
    }

    @Test("each naughty string as the subject, the issuer and an audience: read as jwt-kit reads it")
    func naughtyStringsAsClaims() async throws {
        var read = 0
        for (text, literal) in try Self.naughtyLiterals() {
            let around: [(before: String, after: String)] = [
                (#"{"exp":2000000000,"sub":"#, "}"),
                (#"{"sub":"henk","exp":2000000000,"iss":"#, "}"),
                (#"{"sub":"henk","exp":2000000000,"aud":["baton","#, "]}"),
            ]
            for (before, after) in around {
                let claims = Array(before.utf8) + literal + Array(after.utf8)
                if await Self.agrees(Self.token(payload: claims), String(reflecting: text)) { read += 1 }
            }
        }
        #expect(read > 800, "the fast path read \(read) of the naughty strings' tokens")
    }

    @Test("a token nested as deep as its length allows is refused, by the fast path and by the authenticator, without a crash")
    func deepNesting() async throws {
        // 8 192 bytes is the longest token accepted: about 3 000 pairs of brackets once
        // base64url-encoded.
        let depth = 3_000
        let payload = Array(#"{"sub":"henk","exp":2000000000,"x":"#.utf8) + Array(repeating: UInt8(ascii: "["), count: depth)
            + Array(repeating: UInt8(ascii: "]"), count: depth) + Array("}".utf8)
        let token = Self.token(payload: payload)
        #expect(token.utf8.count > 8000 && token.utf8.count <= 8192)
        #expect(BearerAuthenticator.hs256Claims(ofToken: token, keyed: BearerFastPathTests.keyed) == nil)
        let authenticator = try await BearerAuthenticator(
            hs256Secret: BearerFastPathTests.secret, publicKeys: nil, issuer: nil, audience: nil, rememberedTokens: 0)
        await #expect(throws: BearerAuthenticator.Failure.self) { try await authenticator.user(fromToken: token) }
    }
}
