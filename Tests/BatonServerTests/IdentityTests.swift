import BatonRuntime
import BatonServer
import Configuration
import HummingbirdTesting
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
        // With no kid, the configured key is the default.
        let unnamed = JWTKeyCollection()
        await unnamed.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation))
        #expect(try await authenticator.user(fromToken: try await unnamed.sign(Claims(sub: "frank", exp: .init(value: Date().addingTimeInterval(60))))) == "frank")
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

    // Swift's == on String is canonical equivalence: the Kelvin sign equals "K". A payload
    // minted for user:Kim must not serve a token whose subject is "\u{212A}im", another user to
    // every identity provider and to PostgreSQL.
    @Test("a request speaks for a subject whose id has the same bytes, not one canonically equivalent")
    func speaksByBytes() {
        #expect(ClientIdentity(user: "Kim").speaks(for: "user:Kim"))
        #expect(!ClientIdentity(user: "\u{212A}im").speaks(for: "user:Kim"))
        #expect(!ClientIdentity(user: "Ren\u{E9}").speaks(for: "user:Rene\u{301}"))
        #expect(!ClientIdentity(device: "\u{212A}").speaks(for: "device:K"))
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

    @Test("iss and aud match by their bytes: canonically equivalent spellings are other values")
    func issuerAndAudienceByBytes() async throws {
        let authenticator = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: "https://id.example/\u{C5}", audience: "\u{212B}")
        let good = try await TestTokens.token("heidi", issuer: "https://id.example/\u{C5}", audience: "\u{212B}")
        #expect(try await authenticator.user(fromToken: good) == "heidi")
        for token in [
            try await TestTokens.token("heidi", issuer: "https://id.example/A\u{30A}", audience: "\u{212B}"),
            try await TestTokens.token("heidi", issuer: "https://id.example/\u{C5}", audience: "\u{C5}"),
        ] {
            await #expect(throws: BearerAuthenticator.Failure.self) { try await authenticator.user(fromToken: token) }
        }
    }

    // jwt-kit verifies with the key it picks whatever the header's alg says: a token saying
    // "none" (or RS256) but carrying an HS256 MAC was accepted, as was one with a crit extension.
    @Test("a token's header must name its key's algorithm and no crit extension, MAC or not")
    func headerFitsTheKey() async throws {
        let authenticator = try await BearerAuthenticator(hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil)
        func token(header: String) -> String {
            func encode(_ text: String) -> String {
                Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: "")
            }
            let signed = encode(header) + "." + encode(#"{"sub":"mallory","exp":\#(Int(Date().timeIntervalSince1970) + 600)}"#)
            let mac = HMAC<SHA256>.authenticationCode(for: Data(signed.utf8), using: SymmetricKey(data: Data(TestApplication.jwtSecret.utf8)))
            return signed + "." + Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                .replacingOccurrences(of: "=", with: "")
        }
        #expect(try await authenticator.user(fromToken: token(header: #"{"alg":"HS256","typ":"JWT"}"#)) == "mallory")
        for header in [#"{"alg":"none","typ":"JWT"}"#, #"{"alg":"RS256"}"#, #"{"typ":"JWT"}"#, #"{"alg":"HS256","crit":["exp"]}"#] {
            await #expect(throws: BearerAuthenticator.Failure.self, "\(header)") { try await authenticator.user(fromToken: token(header: header)) }
        }
    }

    // A subject is shown in logs, the studio and templates: DEL, C1 controls and direction
    // overrides would let it print as another user.
    @Test("a token's subject with DEL, a C1 control or an invisible or direction character is refused")
    func unusableSubjects() async throws {
        let authenticator = try await BearerAuthenticator(hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil)
        #expect(try await authenticator.user(fromToken: try await TestTokens.token("Zoë 🎧")) == "Zoë 🎧")
        for subject in ["a\u{7F}b", "a\u{85}b", "a\u{9B}b", "a\u{202E}b", "a\u{200B}b", "a\u{2028}b"] {
            let token = try await TestTokens.token(subject)
            await #expect(throws: BearerAuthenticator.Failure.self, "\(subject.debugDescription)") { try await authenticator.user(fromToken: token) }
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

    /// The message a refused token gets, or nil when it is accepted.
    static func refusal(_ authenticator: BearerAuthenticator, _ token: String) async -> String? {
        do {
            _ = try await authenticator.user(fromToken: token)
            return nil
        } catch let failure as BearerAuthenticator.Failure {
            return failure.description
        } catch {
            return "unexpected \(error)"
        }
    }

    @Test("exp and nbf are checked with the configured leeway (a clock that is a little off is tolerated), and no more")
    func leeway() async throws {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let authenticator = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil, leeway: .seconds(60), clock: { now })
        #expect(await Self.refusal(authenticator, try await TestTokens.token("ana", expires: now.addingTimeInterval(-59))) == nil)
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("ana", expires: now.addingTimeInterval(-61)))
                == "the bearer token has expired")
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("ana", expires: now.addingTimeInterval(3600), notBefore: now.addingTimeInterval(59))) == nil)
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("ana", expires: now.addingTimeInterval(3600), notBefore: now.addingTimeInterval(61)))
                == "the bearer token is not valid yet (nbf is in the future)")
        // Without leeway the same tokens are judged to the second.
        let strict = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil, leeway: .zero, clock: { now })
        #expect(
            await Self.refusal(strict, try await TestTokens.token("ana", expires: now.addingTimeInterval(-1))) == "the bearer token has expired")
        #expect(await Self.refusal(strict, try await TestTokens.token("ana", expires: now.addingTimeInterval(1))) == nil)
        #expect(await Self.refusal(strict, try await TestTokens.token("ana", expires: now.addingTimeInterval(3600), notBefore: now.addingTimeInterval(1))) != nil)
    }

    @Test("a kid naming no configured key is refused, not verified with the default key")
    func unknownKeyID() async throws {
        // HS256 only: the secret is the default key and has no kid.
        let hs256 = try await BearerAuthenticator(hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil)
        #expect(await Self.refusal(hs256, try await TestTokens.token("bo")) == nil)
        #expect(
            await Self.refusal(hs256, try await TestTokens.token("bo", kid: "rotated-2019"))
                == "the bearer token's key id (kid) names no key configured here")

        // A public key named by its file, which is also the default for tokens without a kid.
        let privateKey = P256.Signing.PrivateKey()
        let pemFile = FileManager.default.temporaryDirectory.appendingPathComponent("issuer-kid-\(UUID().uuidString.prefix(8)).pem")
        try privateKey.publicKey.pemRepresentation.write(to: pemFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: pemFile) }
        let kid = pemFile.deletingPathExtension().lastPathComponent
        let authenticator = try await BearerAuthenticator(hs256Secret: nil, publicKeys: pemFile.path, issuer: nil, audience: nil)
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: try ES256PrivateKey(pem: privateKey.pemRepresentation))
        let claims = Claims(sub: "bo", exp: .init(value: Date().addingTimeInterval(60)))
        #expect(await Self.refusal(authenticator, try await signing.sign(claims, kid: JWKIdentifier(string: kid))) == nil)
        #expect(await Self.refusal(authenticator, try await signing.sign(claims)) == nil)
        // Signed by the right key, but naming another: the kid is a claim about the key, and a
        // false one is not papered over.
        #expect(
            await Self.refusal(authenticator, try await signing.sign(claims, kid: "someone-else"))
                == "the bearer token's key id (kid) names no key configured here")
    }

    @Test("a maximum lifetime refuses tokens that live longer, measured from iat or else from now")
    func maxLifetime() async throws {
        let now = Date(timeIntervalSince1970: 2_000_000_000)
        let authenticator = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil, maxLifetime: .seconds(3600), clock: { now })
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("cy", expires: now.addingTimeInterval(3000), issuedAt: now.addingTimeInterval(-600)))
                == nil)
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("cy", expires: now.addingTimeInterval(3000), issuedAt: now.addingTimeInterval(-700)))
                == "the bearer token lives too long (3700 s from iat to exp; at most 3600 s is accepted here)")
        #expect(await Self.refusal(authenticator, try await TestTokens.token("cy", expires: now.addingTimeInterval(3600))) == nil)
        #expect(
            await Self.refusal(authenticator, try await TestTokens.token("cy", expires: now.addingTimeInterval(86400 * 365)))
                == "the bearer token lives too long (31536000 s from now to exp; at most 3600 s is accepted here)")
        // An iat moved up to just before a far exp does not make a long-lived token short.
        #expect(
            await Self.refusal(
                authenticator, try await TestTokens.token("cy", expires: now.addingTimeInterval(86400), issuedAt: now.addingTimeInterval(86400 - 60)))
                == "the bearer token lives too long (86400 s from now to exp; at most 3600 s is accepted here)")
        // A lifetime past what an Int holds (a faulty issuer's exp) is refused, not a crash.
        let refusal = await Self.refusal(authenticator, try await TestTokens.token("cy", expires: Date(timeIntervalSince1970: 1e19)))
        #expect(refusal?.hasPrefix("the bearer token lives too long") == true, "\(refusal ?? "accepted")")
        // Off by default: a year-long token is only bounded by its own exp.
        let unbounded = try await BearerAuthenticator(
            hs256Secret: TestApplication.jwtSecret, publicKeys: nil, issuer: nil, audience: nil, clock: { now })
        #expect(await Self.refusal(unbounded, try await TestTokens.token("cy", expires: now.addingTimeInterval(86400 * 365))) == nil)
    }

    @Test("configuration: baton.jwt.leeway defaults to 60 s, baton.jwt.max.lifetime to off; both reach the 401 over HTTP")
    func configuration() async throws {
        let defaults = try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: [:])))
        #expect(defaults.jwtLeeway == .seconds(60))
        #expect(defaults.jwtMaxLifetime == nil)
        let set = try BatonConfiguration(
            reader: ConfigReader(provider: InMemoryProvider(values: ["baton.jwt.leeway": 5.0, "baton.jwt.max.lifetime": 900.0])))
        #expect(set.jwtLeeway == .seconds(5))
        #expect(set.jwtMaxLifetime == .seconds(900))
        #expect(throws: BatonConfiguration.Error.self) {
            try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: ["baton.jwt.leeway": -1.0])))
        }
        #expect(throws: BatonConfiguration.Error.self) {
            try BatonConfiguration(reader: ConfigReader(provider: InMemoryProvider(values: ["baton.jwt.max.lifetime": 0.0])))
        }

        let environment = try await TestApplication.environment(flows: TestFlows.directory, registry: TestFlows.registry(), configure: {
            $0.jwtMaxLifetime = .seconds(900)
        })
        try await TestFlows.prepare(environment.pool)
        let app = buildApplication(environment)
        try await app.test(.router) { client in
            let start = TestFlows.startPayload("counter", subject: "user:dee")
            let short = try await TestTokens.token("dee", expires: Date().addingTimeInterval(600))
            let accepted = try await client.command(start, headers: [.authorization: "Bearer \(short)"])
            #expect(accepted.status == .ok, "\(accepted.text)")
            let long = try await TestTokens.token("dee", expires: Date().addingTimeInterval(3600))
            let response = try await client.command(start, headers: [.authorization: "Bearer \(long)"])
            #expect(response.status == .unauthorized)
            #expect(response.json["error"]?["message"]?.stringValue?.hasPrefix("the bearer token lives too long") == true)
            let unknownKid = try await TestTokens.token("dee", expires: Date().addingTimeInterval(600), kid: "old")
            let refused = try await client.command(start, headers: [.authorization: "Bearer \(unknownKid)"])
            #expect(refused.status == .unauthorized)
            #expect(refused.json["error"]?["message"] == "the bearer token's key id (kid) names no key configured here")
        }
        await environment.pool.close()
    }
}
