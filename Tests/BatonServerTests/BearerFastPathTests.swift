import BatonRuntime
import Crypto
import ExtrasBase64
import Foundation
import JWTKit
import Testing

@testable import BatonServer

/// HS256 tokens read by Baton's own parsers (the fast path) against jwt-kit's reading: the fast
/// path may leave a token to jwt-kit, but whatever it accepts, jwt-kit must read the same way.
@Suite struct BearerFastPathTests {
    static let secret = "a-test-secret-of-at-least-thirty-two-bytes"
    static let keyed = Array(secret.utf8).withUnsafeBytes { HMACSHA256(key: $0) }

    static func base64(_ text: String) -> String {
        Base64.encodeToString(bytes: Array(text.utf8), options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }

    /// A token with this header and payload, signed with the secret.
    static func token(header: String = #"{"alg":"HS256","typ":"JWT"}"#, payload: String) -> String {
        token(header: Array(header.utf8), payload: Array(payload.utf8))
    }

    /// The same from bytes, which need not be UTF-8 (the corpora's are not all).
    static func token(header: [UInt8], payload: [UInt8]) -> String {
        let options: Base64.EncodingOptions = [.base64UrlAlphabet, .omitPaddingCharacter]
        let input = Base64.encodeToString(bytes: header, options: options) + "." + Base64.encodeToString(bytes: payload, options: options)
        let mac = HMAC<SHA256>.authenticationCode(for: Array(input.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return input + "." + Base64.encodeToString(bytes: Array(mac), options: options)
    }

    /// jwt-kit's reading, as the authenticator's slow path does it; nil when jwt-kit refuses.
    static func throughJWTKit(_ token: String) async -> BearerAuthenticator.Claims? {
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        return try? await keys.verify(token, as: BearerAuthenticator.Claims.self)
    }

    /// Payloads the fast path reads itself.
    static let plain = [
        #"{"sub":"henk","exp":2000000000}"#,
        #"{"sub":"henk","exp":2000000000.5,"iat":1999990000,"nbf":1999990000}"#,
        #"{"sub":"ünïcødé 👋","exp":2000000000,"iss":"https://id.example","aud":"baton"}"#,
        #"{"sub":"henk","exp":2000000000,"aud":["baton","other"],"studio":true}"#,
        #"{"sub":"henk","exp":2000000000,"aud":[],"studio":false,"extra":{"nested":[1,2,3]}}"#,
        #"{"sub":"","exp":-5}"#,
        #" { "sub" : "henk" , "exp" : 1e10 } "#,
    ]

    /// Payloads it leaves to jwt-kit: escapes, a claim twice, a claim of another type, no exp.
    static let odd = [
        #"{"s\u0075b":"henk","exp":2000000000}"#,
        #"{"sub":"he\"nk","exp":2000000000}"#,
        #"{"sub":"henk","sub":"admin","exp":2000000000}"#,
        #"{"sub":"henk","exp":"2000000000"}"#,
        #"{"sub":"henk"}"#,
        #"{"sub":7,"exp":2000000000}"#,
        #"{"sub":"henk","exp":2000000000,"nbf":null}"#,
        #"{"sub":"henk","exp":2000000000,"aud":["baton",7]}"#,
        #"{"sub":"henk","exp":2000000000,"studio":"yes"}"#,
        #"{"sub":"henk","exp":2000000000,"iss":null}"#,
        #"["sub","exp"]"#,
        "not json",
    ]

    @Test(arguments: plain)
    func readsPlainPayloadsAsJWTKitDoes(payload: String) async throws {
        let token = Self.token(payload: payload)
        let fast = try #require(BearerAuthenticator.hs256Claims(ofToken: token, keyed: Self.keyed), "the fast path left \(payload) to jwt-kit")
        #expect(fast == (await Self.throughJWTKit(token)))
    }

    @Test(arguments: odd)
    func leavesOddPayloadsToJWTKit(payload: String) {
        #expect(BearerAuthenticator.hs256Claims(ofToken: Self.token(payload: payload), keyed: Self.keyed) == nil)
    }

    @Test(arguments: [
        #"{"alg":"HS256","kid":"key1"}"#, #"{"alg":"none"}"#, #"{"alg":"RS256"}"#, #"{"alg":"HS256","alg":"none"}"#,
        #"{"al\u0067":"HS256"}"#, #"{"typ":"JWT"}"#, "[]",
    ])
    func leavesOtherHeadersToJWTKit(header: String) {
        let token = Self.token(header: header, payload: #"{"sub":"henk","exp":2000000000}"#)
        #expect(BearerAuthenticator.hs256Claims(ofToken: token, keyed: Self.keyed) == nil)
    }

    @Test func refusesWhatIsNotSignedWithTheSecret() async {
        let token = Self.token(payload: #"{"sub":"henk","exp":2000000000}"#)
        let parts = token.split(separator: ".").map(String.init)
        let otherPayload = Self.base64(#"{"sub":"admin","exp":2000000000}"#)
        for tampered in [
            parts[0] + "." + otherPayload + "." + parts[2],  // the payload changed, the signature kept
            parts[0] + "." + parts[1] + "." + String(parts[2].dropLast()) + (parts[2].last == "A" ? "B" : "A"),
            parts[0] + "." + parts[1] + ".",  // no signature
            parts[0] + "." + parts[1],  // two parts
            token + ".x",  // four parts
        ] {
            #expect(BearerAuthenticator.hs256Claims(ofToken: tampered, keyed: Self.keyed) == nil, "\(tampered)")
            #expect(await Self.throughJWTKit(tampered) == nil, "\(tampered)")
        }
    }

    @Test("a token that gives a claim name twice is refused, whichever value comes first (RFC 7519 §4; the fast path leaves such tokens to jwt-kit, which read the first)", arguments: [
        (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"ops","exp":2000000000,"studio":true,"studio":false}"#),
        (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"ops","exp":2000000000,"studio":false,"studio":true}"#),
        (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"alice","sub":"bob","exp":2000000000}"#),
        (#"{"alg":"HS256","typ":"JWT"}"#, #"{"sub":"alice","exp":2000000000,"exp":1000000000}"#),
        (#"{"alg":"HS256","typ":"JWT"}"#, #"{"s\u0075b":"alice","sub":"bob","exp":2000000000}"#),
    ])
    func refusesRepeatedNames(header: String, payload: String) async throws {
        let authenticator = try await BearerAuthenticator(hs256Secret: Self.secret, publicKeys: nil, issuer: nil, audience: nil)
        let token = Self.token(header: header, payload: payload)
        await #expect(throws: BearerAuthenticator.Failure.self) { try await authenticator.studioGrant(fromToken: token) }
        // The same claims once each are accepted.
        let once = Self.token(payload: #"{"sub":"ops","exp":2000000000,"studio":true}"#)
        #expect(try await authenticator.studioGrant(fromToken: once) == ("ops", true))
    }

    @Test func developmentTokensTakeTheFastPath() async throws {
        let token = try await BearerAuthenticator.developmentToken(subject: "henk", secret: Self.secret, audience: "baton", studio: true)
        let fast = try #require(BearerAuthenticator.hs256Claims(ofToken: token, keyed: Self.keyed))
        #expect(fast.sub.value == "henk" && fast.studio?.granted == true && fast.aud?.value == ["baton"])
        #expect(fast == (await Self.throughJWTKit(token)))
    }
}
