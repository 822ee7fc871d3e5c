import BatonServer
import BatonTestSupport
import Crypto
import _CryptoExtras
import Foundation
import JWTKit
import Testing

@Suite("Bearer tokens")
struct IdentityTests {
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    @Test("ES256 tokens verify against a configured public key (PEM), by kid or as the default")
    func es256() async throws {
        let privateKey = P256.Signing.PrivateKey()
        let pemFile = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-a.pem")
        try privateKey.publicKey.pemRepresentation.write(to: pemFile, atomically: true, encoding: .utf8)
        let authenticator = try await BearerAuthenticator(hs256Secret: nil, publicKeys: pemFile.path, issuer: nil, audience: nil)
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation), kid: "issuer-a")
        let token = try await signing.sign(Claims(sub: "frank", exp: .init(value: Date().addingTimeInterval(60))), kid: "issuer-a")
        #expect(try await authenticator.user(fromToken: token) == "frank")
        let other = JWTKeyCollection()
        await other.add(ecdsa: ES256PrivateKey())
        let forged = try await other.sign(Claims(sub: "frank", exp: .init(value: Date().addingTimeInterval(60))))
        await #expect(throws: BearerAuthenticator.Failure.self) { try await authenticator.user(fromToken: forged) }
    }

    @Test("RS256 tokens verify against a configured public key given inline")
    func rs256() async throws {
        let privateKey = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let authenticator = try await BearerAuthenticator(
            hs256Secret: nil, publicKeys: privateKey.publicKey.pemRepresentation, issuer: nil, audience: nil)
        let signing = JWTKeyCollection()
        await signing.add(rsa: try Insecure.RSA.PrivateKey(pem: privateKey.pemRepresentation), digestAlgorithm: .sha256)
        let token = try await signing.sign(Claims(sub: "grace", exp: .init(value: Date().addingTimeInterval(60))))
        #expect(try await authenticator.user(fromToken: token) == "grace")
    }

    @Test("iss and aud are required to match when configured")
    func issuerAndAudience() async throws {
        let authenticator = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: "https://id.example", audience: "baton")
        let good = try await TestTokens.token("heidi", issuer: "https://id.example", audience: "baton")
        #expect(try await authenticator.user(fromToken: good) == "heidi")
        for token in [
            try await TestTokens.token("heidi", issuer: "https://evil.example", audience: "baton"),
            try await TestTokens.token("heidi", issuer: "https://id.example", audience: "other"),
            try await TestTokens.token("heidi"),
        ] {
            await #expect(throws: BearerAuthenticator.Failure.self) { try await authenticator.user(fromToken: token) }
        }
    }

    @Test("no keys configured: tokens are refused, not trusted; weak secrets are refused at start")
    func unconfigured() async throws {
        let authenticator = try await BearerAuthenticator(hs256Secret: nil, publicKeys: nil, issuer: nil, audience: nil)
        #expect(!authenticator.isConfigured)
        await #expect(throws: BearerAuthenticator.Failure.self) {
            try await authenticator.user(fromToken: try await TestTokens.token("ivan"))
        }
        await #expect(throws: BearerAuthenticator.Failure.self) {
            _ = try await BearerAuthenticator(hs256Secret: "short", publicKeys: nil, issuer: nil, audience: nil)
        }
    }
}
