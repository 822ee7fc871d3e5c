import BatonTestSupport
import Crypto
import Foundation
import JWTKit
import Synchronization
import Testing

@testable import BatonServer

/// The bearer tokens whose signature verified are remembered; everything that depends on the
/// clock is still checked on every request, and nothing but a verified token is remembered.
@Suite("Verified bearer tokens")
struct VerifiedTokensTests {
    /// A clock the test moves.
    final class Clock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 2_000_000_000))
        func advance(_ seconds: TimeInterval) { now.withLock { $0.addTimeInterval(seconds) } }
        func read() -> Date { now.withLock { $0 } }
    }

    static func authenticator(_ clock: Clock, maxLifetime: Duration? = nil) async throws -> BearerAuthenticator {
        try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil, leeway: .seconds(60),
            maxLifetime: maxLifetime, clock: { clock.read() })
    }

    @Test("a verified HS256 token is remembered, and refused once it expires all the same")
    func rememberedUntilExpiry() async throws {
        let clock = Clock()
        let authenticator = try await Self.authenticator(clock)
        let token = try await TestTokens.token("ana", expires: clock.read().addingTimeInterval(600))
        #expect(authenticator.verified.count == 0)
        #expect(try await authenticator.user(fromToken: token) == "ana")
        #expect(authenticator.verified.count == 1)
        #expect(try await authenticator.user(fromToken: token) == "ana")
        #expect(authenticator.verified.count == 1, "a second request finds the token, it does not add it again")
        clock.advance(600 + 61)
        #expect(await IdentityTests.refusal(authenticator, token) == "the bearer token has expired")
        #expect(await IdentityTests.refusal(authenticator, token) == "the bearer token has expired")
    }

    @Test("the checks after the signature run on a remembered token: nbf and the lifetime")
    func laterChecksStillRun() async throws {
        let clock = Clock()
        let now = clock.read()
        let early = try await TestTokens.token("ana", expires: now.addingTimeInterval(3600), notBefore: now.addingTimeInterval(120))
        let authenticator = try await Self.authenticator(clock, maxLifetime: .seconds(7200))
        // Not valid yet: the signature verified, so it is remembered, but it is refused …
        #expect(await IdentityTests.refusal(authenticator, early) == "the bearer token is not valid yet (nbf is in the future)")
        #expect(authenticator.verified.count == 1)
        // … and accepted from the cache once its time has come.
        clock.advance(61)
        #expect(await IdentityTests.refusal(authenticator, early) == nil)
        #expect(authenticator.verified.count == 1)
        // A lifetime the authenticator does not accept is refused on every request.
        let long = try await TestTokens.token("ana", expires: clock.read().addingTimeInterval(3 * 3600))
        for _ in 0..<2 { #expect(await IdentityTests.refusal(authenticator, long)?.hasPrefix("the bearer token lives too long") == true) }
    }

    @Test("forged, altered and foreign tokens are refused and never remembered")
    func refusedTokensAreNotRemembered() async throws {
        let clock = Clock()
        let authenticator = try await Self.authenticator(clock)
        let token = try await TestTokens.token("ana", expires: clock.read().addingTimeInterval(600))
        #expect(try await authenticator.user(fromToken: token) == "ana")
        var altered = token
        let last = altered.removeLast()
        altered.append(last == "A" ? "B" : "A")
        let foreign = try await TestTokens.token(
            "ana", expires: clock.read().addingTimeInterval(600), secret: "another-secret-of-at-least-thirty-two-bytes")
        for refused in [altered, foreign, token + "x", "a.b.c"] {
            #expect(await IdentityTests.refusal(authenticator, refused) == "the bearer token is not valid")
        }
        #expect(authenticator.verified.count == 1)
    }

    @Test("a remembered token is found only by its exact bytes: a K spelt as the Kelvin sign (equal as a Swift String) is refused")
    func exactBytes() async throws {
        let clock = Clock()
        let authenticator = try await Self.authenticator(clock)
        var user = 0
        var token = ""
        repeat {  // a token with a K in it (most have one)
            user += 1
            token = try await TestTokens.token("user-\(user)", expires: clock.read().addingTimeInterval(600))
        } while !token.contains("K")
        #expect(try await authenticator.user(fromToken: token) == "user-\(user)")
        let kelvin = token.replacingOccurrences(of: "K", with: "\u{212A}")
        #expect(kelvin == token, "Swift compares strings by canonical equivalence")
        #expect(await IdentityTests.refusal(authenticator, kelvin) == "the bearer token is not valid")
        #expect(authenticator.verified.count == 1)
        #expect(try await authenticator.user(fromToken: token) == "user-\(user)")
    }

    @Test("a token verified by jwt-kit (ES256) is remembered too")
    func publicKeyTokens() async throws {
        let privateKey = P256.Signing.PrivateKey()
        let authenticator = try await BearerAuthenticator(
            hs256Secret: nil, publicKeys: privateKey.publicKey.pemRepresentation, issuer: nil, audience: nil)
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation))
        let token = try await signing.sign(IdentityTests.Claims(sub: "frank", exp: .init(value: Date().addingTimeInterval(60))))
        #expect(try await authenticator.user(fromToken: token) == "frank")
        #expect(try await authenticator.user(fromToken: token) == "frank")
        #expect(authenticator.verified.count == 1)
    }

    @Test("the cache keeps at most two generations, and a token in use survives a turnover")
    func bounded() {
        let cache = VerifiedTokens<Int>(capacity: 4)
        for (index, token) in ["a", "b", "c", "d", "e"].enumerated() { cache.remember(token, claims: index) }
        // a–d filled the first generation; e started the second.
        #expect(cache.count == 5)
        #expect(cache.claims(of: "a") == 0)  // moves back into the current generation
        for (index, token) in ["f", "g", "h"].enumerated() { cache.remember(token, claims: 10 + index) }
        // The current generation (e, a, f, g) was full when h came: it became the previous one.
        #expect(cache.claims(of: "a") == 0)
        #expect(cache.claims(of: "b") == nil, "b was not used in two turnovers")
        #expect(cache.claims(of: "h") == 12)
        for index in 0..<100 { cache.remember("t\(index)", claims: index) }
        #expect(cache.count <= 8)
        cache.remember(String(repeating: "x", count: VerifiedTokens<Int>.maxTokenBytes + 1), claims: 1)
        #expect(cache.claims(of: String(repeating: "x", count: VerifiedTokens<Int>.maxTokenBytes + 1)) == nil)
        let none = VerifiedTokens<Int>(capacity: 0)
        none.remember("a", claims: 1)
        #expect(none.claims(of: "a") == nil && none.count == 0)
    }
}
