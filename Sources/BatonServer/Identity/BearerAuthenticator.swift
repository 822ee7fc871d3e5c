import Foundation
import JWTKit

/// Verifies `Authorization: Bearer <JWT>` tokens: HS256 with a shared secret, or RS256/ES256
/// with configured public keys. `exp` is required and enforced, `nbf` when present, `iss` and
/// `aud` when configured. The token's `sub` is the user id.
public final class BearerAuthenticator: Sendable {
    private let keys: JWTKeyCollection
    private let issuer: String?
    private let audience: String?
    /// Whether any key is configured (without one, bearer tokens are refused).
    public let isConfigured: Bool

    /// Why a token was refused (the message goes to the client; no token content is echoed).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var nbf: NotBeforeClaim?
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        /// Grants Baton Studio's API (`BATON_STUDIO=true`); absent in app users' tokens.
        var studio: StudioClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {
            try exp.verifyNotExpired()
            try nbf?.verifyNotBefore()
        }
    }

    /// `"studio": true`. Anything else an identity provider may put under that name reads as
    /// no grant rather than making the whole token unreadable for the app.
    struct StudioClaim: Codable, Sendable {
        var granted: Bool

        init(granted: Bool) { self.granted = granted }

        init(from decoder: any Decoder) throws {
            granted = (try? decoder.singleValueContainer().decode(Bool.self)) ?? false
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(granted)
        }
    }

    /// - Parameters:
    ///   - hs256Secret: the shared secret for HS256 tokens.
    ///   - publicKeys: comma-separated PEM files (or inline PEM blocks) for RS256/ES256; a
    ///     file's base name is its `kid`, the first key also verifies tokens without one.
    public init(hs256Secret: String?, publicKeys: String?, issuer: String?, audience: String?) async throws {
        let keys = JWTKeyCollection()
        var configured = false
        if let secret = hs256Secret, !secret.isEmpty {
            guard secret.utf8.count >= 16 else {
                throw Failure(description: "BATON_JWT_HS256_SECRET must be at least 16 bytes")
            }
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            configured = true
        }
        for (index, entry) in Self.pemEntries(publicKeys).enumerated() {
            let kid = JWKIdentifier(string: entry.name)
            if let key = try? ES256PublicKey(pem: entry.pem) {
                await keys.add(ecdsa: key, kid: kid)
                if index == 0, hs256Secret == nil { await keys.add(ecdsa: key) }
            } else if let key = try? Insecure.RSA.PublicKey(pem: entry.pem) {
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: kid)
                if index == 0, hs256Secret == nil { await keys.add(rsa: key, digestAlgorithm: .sha256) }
            } else {
                throw Failure(description: "BATON_JWT_PUBLIC_KEYS: '\(entry.name)' is not an RSA or P-256 public key in PEM form")
            }
            configured = true
        }
        self.keys = keys
        self.issuer = issuer
        self.audience = audience
        self.isConfigured = configured
    }

    /// The HS256 secret `scripts/run.sh` serves with on a laptop; never for production.
    public static let developmentSecret = "development-jwt-secret-not-for-production"

    /// An HS256 token for `subject`, for development and tools (`baton token`, `baton
    /// client`): production tokens come from the identity provider.
    public static func developmentToken(
        subject: String, secret: String, issuer: String? = nil, audience: String? = nil, lifetime: Duration = .seconds(3600),
        studio: Bool = false
    ) async throws -> String {
        guard secret.utf8.count >= 16 else { throw Failure(description: "BATON_JWT_HS256_SECRET must be at least 16 bytes") }
        let keys = JWTKeyCollection()
        await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
        let expires = Date().addingTimeInterval(Double(lifetime.components.seconds))
        return try await keys.sign(
            Claims(
                sub: SubjectClaim(value: subject), exp: ExpirationClaim(value: expires), nbf: nil,
                iss: issuer.map { IssuerClaim(value: $0) }, aud: audience.map { AudienceClaim(value: [$0]) },
                studio: studio ? StudioClaim(granted: true) : nil))
    }

    static func pemEntries(_ configuration: String?) -> [(name: String, pem: String)] {
        guard let configuration, !configuration.isEmpty else { return [] }
        if configuration.contains("-----BEGIN") {
            // Inline PEM blocks, possibly several.
            let blocks = configuration.components(separatedBy: "-----END PUBLIC KEY-----").filter { $0.contains("-----BEGIN") }
            return blocks.enumerated().map { ("key\($0.offset + 1)", $0.element + "-----END PUBLIC KEY-----") }
        }
        return configuration.split(separator: ",").map { path in
            let file = String(path).trimmingCharacters(in: .whitespaces)
            let name = URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent
            return (name, (try? String(contentsOfFile: file, encoding: .utf8)) ?? "")
        }
    }

    /// The user id of a valid token. Throws ``Failure`` for a bad one.
    public func user(fromToken token: String) async throws -> String {
        try await claims(fromToken: token).sub.value
    }

    /// The user id of a valid token, and whether it carries `"studio": true` (Baton Studio's
    /// API with `BATON_STUDIO=true`). Throws ``Failure`` for a bad token.
    public func studioGrant(fromToken token: String) async throws -> (user: String, studio: Bool) {
        let claims = try await claims(fromToken: token)
        return (claims.sub.value, claims.studio?.granted == true)
    }

    private func claims(fromToken token: String) async throws -> Claims {
        guard isConfigured else { throw Failure(description: "bearer tokens are not accepted here (no keys configured)") }
        guard token.utf8.count <= 8192 else { throw Failure(description: "the bearer token is too long") }
        let claims: Claims
        do {
            claims = try await keys.verify(token, as: Claims.self)
        } catch let error as JWTError where error.errorType == .claimVerificationFailure {
            throw Failure(description: "the bearer token has expired or is not valid yet")
        } catch {
            throw Failure(description: "the bearer token is not valid")
        }
        if let issuer, claims.iss?.value != issuer { throw Failure(description: "the bearer token was not issued for this service") }
        if let audience {
            do { try claims.aud?.verifyIntendedAudience(includes: audience) } catch {
                throw Failure(description: "the bearer token is not meant for this service")
            }
            if claims.aud == nil { throw Failure(description: "the bearer token is not meant for this service") }
        }
        let subject = claims.sub.value
        guard !subject.isEmpty, subject.utf8.count <= 256, !subject.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
            throw Failure(description: "the bearer token's subject is not usable")
        }
        return claims
    }
}
