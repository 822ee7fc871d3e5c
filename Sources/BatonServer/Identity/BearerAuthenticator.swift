import BatonFlows
import BatonJSON
import BatonRuntime
import Crypto
import ExtrasBase64
import Foundation
import JWTKit

/// Verifies `Authorization: Bearer <JWT>` tokens: HS256 with a shared secret, or RS256/ES256
/// with configured public keys. `exp` is required and enforced, `nbf` when present (both with a
/// clock leeway), `iss` and `aud` when configured, and a maximum lifetime when configured. A `kid`
/// must name a configured key. The token's `sub` is the user id.
public final class BearerAuthenticator: Sendable {
    private let keys: JWTKeyCollection
    /// The HS256 secret's HMAC state, set up once: the fast path below starts each check from a
    /// copy of it.
    private let hs256: HMACSHA256?
    /// The `kid`s tokens may name: the public keys' names.
    private let keyIDs: Set<String>
    /// The `alg` a token verified with each key must name: by key id, and for a token without
    /// one (the HS256 secret, else the first public key).
    private let algorithms: [String: String]
    private let defaultAlgorithm: String?
    private let issuer: String?
    private let audience: String?
    private let leeway: Duration
    private let maxLifetime: Duration?
    private let clock: @Sendable () -> Date
    /// Tokens whose signature verified: the checks after it still run on every request.
    let verified: VerifiedTokens<Claims>
    /// Whether any key is configured (without one, bearer tokens are refused).
    public let isConfigured: Bool

    /// Why a token was refused (the message goes to the client; no token content is echoed).
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    struct Claims: JWTPayload, Equatable {
        var sub: SubjectClaim
        var exp: ExpirationClaim
        var nbf: NotBeforeClaim?
        var iat: IssuedAtClaim?
        var iss: IssuerClaim?
        var aud: AudienceClaim?
        /// Grants Baton Studio's API (`BATON_STUDIO=true`); absent in app users' tokens.
        var studio: StudioClaim?

        /// Signature only: `exp`, `nbf` and the lifetime are checked afterwards against the
        /// configured clock and leeway (jwt-kit's checks have no leeway).
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// `"studio": true`. Anything else an identity provider may put under that name reads as
    /// no grant rather than making the whole token unreadable for the app.
    struct StudioClaim: Codable, Sendable, Equatable {
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
    ///   - leeway: clock skew tolerated on `exp` and `nbf`.
    ///   - maxLifetime: the longest `exp − iat` (or `exp − now` without `iat`, or with one in the
    ///     future) accepted; nil: any.
    ///   - clock: now (tests move it).
    ///   - rememberedTokens: how many verified tokens to remember, in each of the cache's two
    ///     generations (``VerifiedTokens``); 0 verifies every token's signature every time.
    public init(
        hs256Secret: String?, publicKeys: String?, issuer: String?, audience: String?, leeway: Duration = .seconds(60),
        maxLifetime: Duration? = nil, clock: @escaping @Sendable () -> Date = { Date() }, rememberedTokens: Int = 1024
    ) async throws {
        let keys = JWTKeyCollection()
        var keyIDs = Set<String>()
        var algorithms: [String: String] = [:]
        var defaultAlgorithm: String?
        var configured = false
        var hs256: HMACSHA256?
        if let secret = hs256Secret, !secret.isEmpty {
            guard secret.utf8.count >= 16 else {
                throw Failure(description: "BATON_JWT_HS256_SECRET must be at least 16 bytes")
            }
            await keys.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256)
            hs256 = Array(secret.utf8).withUnsafeBytes { HMACSHA256(key: $0) }
            defaultAlgorithm = "HS256"
            configured = true
        }
        for (index, entry) in Self.pemEntries(publicKeys).enumerated() {
            let kid = JWKIdentifier(string: entry.name)
            keyIDs.insert(entry.name)
            if let key = try? ES256PublicKey(pem: entry.pem) {
                await keys.add(ecdsa: key, kid: kid)
                algorithms[entry.name] = "ES256"
                if index == 0, hs256 == nil {
                    await keys.add(ecdsa: key)
                    defaultAlgorithm = "ES256"
                }
            } else if let key = try? Insecure.RSA.PublicKey(pem: entry.pem) {
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: kid)
                algorithms[entry.name] = "RS256"
                if index == 0, hs256 == nil {
                    await keys.add(rsa: key, digestAlgorithm: .sha256)
                    defaultAlgorithm = "RS256"
                }
            } else {
                throw Failure(description: "BATON_JWT_PUBLIC_KEYS: '\(entry.name)' is not an RSA or P-256 public key in PEM form")
            }
            configured = true
        }
        self.keys = keys
        self.hs256 = hs256
        self.keyIDs = keyIDs
        self.algorithms = algorithms
        self.defaultAlgorithm = defaultAlgorithm
        self.issuer = issuer
        self.audience = audience
        self.leeway = leeway
        self.maxLifetime = maxLifetime
        self.clock = clock
        self.verified = VerifiedTokens(capacity: rememberedTokens)
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
                sub: SubjectClaim(value: subject), exp: ExpirationClaim(value: expires), nbf: nil, iat: IssuedAtClaim(value: Date()),
                iss: issuer.map { IssuerClaim(value: $0) }, aud: audience.map { AudienceClaim(value: [$0]) },
                studio: studio ? StudioClaim(granted: true) : nil))
    }

    /// The `kid` of a token's header, without verifying anything; nil when there is none or the
    /// header does not parse (verification then refuses the token).
    ///
    /// Read with Baton's own base64url and JSON parsers: Foundation's `JSONDecoder` costs more
    /// than the rest of this check. A header they refuse, or one where the two could read
    /// differently (escapes, a repeated `kid`), goes the Foundation way jwt-kit reads it.
    static func keyID(ofToken token: String) -> String? {
        let header = token.utf8.prefix { $0 != UInt8(ascii: ".") }
        if let bytes = try? Base64.decode(bytes: header, options: [.base64UrlAlphabet, .omitPaddingCharacter]),
            !bytes.contains(UInt8(ascii: "\\")), occurrences(of: Self.kidMember, in: bytes) <= 1,
            case .object(let members)? = try? JSONValue.parse(bytes)
        {
            return members["kid"]?.stringValue
        }
        return keyIDThroughFoundation(ofToken: token)
    }

    private static let kidMember = Array(#""kid""#.utf8)

    private static func occurrences(of needle: [UInt8], in bytes: [UInt8]) -> Int {
        guard bytes.count >= needle.count else { return 0 }
        var count = 0
        for start in 0...(bytes.count - needle.count) where bytes[start] == needle[0] && bytes[start..<(start + needle.count)].elementsEqual(needle) {
            count += 1
        }
        return count
    }

    /// The reading jwt-kit gives the header, for the headers the fast path leaves alone.
    /// A token's header as jwt-kit reads it (Foundation's `JSONDecoder`): its `kid` and `alg`,
    /// and whether it has `crit`; nil when it does not decode, or its `kid` is not text.
    static func headerThroughFoundation(ofToken token: String) -> (kid: String?, alg: String?, crit: Bool)? {
        guard let header = token.split(separator: ".", omittingEmptySubsequences: false).first else { return nil }
        var base64 = header.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        struct Header: Decodable {
            enum Key: String, CodingKey { case kid, alg, crit }
            var kid: String?
            var alg: String?
            var crit: Bool
            init(from decoder: any Decoder) throws {
                let members = try decoder.container(keyedBy: Key.self)
                kid = try members.decodeIfPresent(String.self, forKey: .kid)
                alg = try? members.decodeIfPresent(String.self, forKey: .alg)
                crit = members.contains(.crit)
            }
        }
        guard let data = Data(base64Encoded: base64), let parsed = try? JSONDecoder().decode(Header.self, from: data) else { return nil }
        return (parsed.kid, parsed.alg, parsed.crit)
    }

    static func keyIDThroughFoundation(ofToken token: String) -> String? {
        headerThroughFoundation(ofToken: token)?.kid
    }

    /// The claims of an HS256 token verified without jwt-kit, or nil to leave the token to
    /// jwt-kit (which then accepts or refuses it as before).
    ///
    /// jwt-kit decodes the header and the claims with Foundation's `JSONDecoder`, which costs
    /// more than everything else in the check (docs/benchmarks.md). This reads them with Baton's
    /// own base64url and JSON parsers, for the tokens both read the same way: a header of
    /// `"alg": "HS256"` without a `kid`, no escapes anywhere (an escape can spell a member name
    /// differently), no claim named twice, and every claim of the type jwt-kit decodes it as.
    /// Anything else — another algorithm, a `kid`, a claim of another type, a signature that
    /// does not match — goes to jwt-kit, so this never accepts a token jwt-kit would refuse.
    static func hs256Claims(ofToken token: String, keyed: HMACSHA256) -> Claims? {
        var token = token
        return token.withUTF8 { bytes -> Claims? in
            guard let first = bytes.firstIndex(of: UInt8(ascii: ".")),
                let second = bytes[(first + 1)...].firstIndex(of: UInt8(ascii: ".")),
                !bytes[(second + 1)...].contains(UInt8(ascii: "."))
            else { return nil }
            let options: Base64.DecodingOptions = [.base64UrlAlphabet, .omitPaddingCharacter]
            guard let header = try? Base64.decode(bytes: bytes[..<first], options: options),
                let payload = try? Base64.decode(bytes: bytes[(first + 1)..<second], options: options),
                let signature = try? Base64.decode(bytes: bytes[(second + 1)...], options: options),
                !header.contains(UInt8(ascii: "\\")), !payload.contains(UInt8(ascii: "\\")),
                occurrences(of: algMember, in: header) == 1, occurrences(of: kidMember, in: header) == 0,
                case .object(let headerMembers)? = try? JSONValue.parse(header), headerMembers["alg"]?.stringValue == "HS256",
                headerMembers["crit"] == nil
            else { return nil }
            let mac = keyed.authenticationCode(for: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[..<second])))
            guard HMACSHA256.equalInConstantTime(mac, signature) else { return nil }
            guard claimMembers.allSatisfy({ occurrences(of: $0, in: payload) <= 1 }),
                case .object(let claims)? = try? JSONValue.parse(payload),
                case .string(let subject)? = claims["sub"], let expires = date(claims["exp"]) ?? nil
            else { return nil }
            guard let notBefore = date(claims["nbf"]), let issuedAt = date(claims["iat"]) else { return nil }
            var verified = Claims(
                sub: SubjectClaim(value: subject), exp: ExpirationClaim(value: expires), nbf: notBefore.map { NotBeforeClaim(value: $0) },
                iat: issuedAt.map { IssuedAtClaim(value: $0) })
            switch claims["iss"] {
            case nil: break
            case .string(let issuer)?: verified.iss = IssuerClaim(value: issuer)
            default: return nil
            }
            switch claims["aud"] {
            case nil: break
            case .string(let audience)?: verified.aud = AudienceClaim(value: [audience])
            case .array(let audiences)?:
                let strings = audiences.compactMap(\.stringValue)
                guard strings.count == audiences.count else { return nil }
                verified.aud = AudienceClaim(value: strings)
            default: return nil
            }
            switch claims["studio"] {
            case nil: break
            case .bool(let granted)?: verified.studio = StudioClaim(granted: granted)
            default: return nil
            }
            return verified
        }
    }

    /// Whether the token's header or claims give a member name twice, or are not JSON Baton
    /// reads (nested past 64 levels: no issuer's are); either way the token is refused as not valid.
    static func repeatsAMemberName(_ token: String) -> Bool {
        let parts = token.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { return true }
        let options: Base64.DecodingOptions = [.base64UrlAlphabet, .omitPaddingCharacter]
        for part in parts.prefix(2) {
            guard let bytes = try? Base64.decode(bytes: Array(part), options: options),
                (try? JSONValue.parse(bytes, refusingDuplicateNames: true)) != nil
            else { return true }
        }
        return false
    }

    private static let algMember = Array(#""alg""#.utf8)
    private static let claimMembers = ["sub", "exp", "nbf", "iat", "iss", "aud", "studio"].map { Array("\"\($0)\"".utf8) }

    /// A claim jwt-kit decodes as a `Date` (seconds since 1970): `.some(nil)` when absent, nil
    /// when present as anything but a finite number.
    private static func date(_ value: JSONValue?) -> Date?? {
        switch value {
        case nil: return .some(nil)
        case .int(let seconds)?: return Date(timeIntervalSince1970: Double(seconds))
        case .double(let seconds)? where seconds.isFinite: return Date(timeIntervalSince1970: seconds)
        default: return nil
        }
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
        if let known = verified.claims(of: token) {
            claims = known
        } else if let hs256, let fast = Self.hs256Claims(ofToken: token, keyed: hs256) {
            claims = fast
            verified.remember(token, claims: fast)
        } else {
            // jwt-kit verifies a token whose kid it does not know with the default key; a kid is
            // the issuer saying which key signed, so one naming no configured key is refused.
            let kid = Self.keyID(ofToken: token)
            if let kid, !keyIDs.contains(kid) {
                throw Failure(description: "the bearer token's key id (kid) names no key configured here")
            }
            // jwt-kit verifies with the key it picked whatever `alg` says (`none` included), and
            // ignores `crit`: a token names its key's algorithm and no extension Baton does not
            // know (RFC 8725 §3.1, RFC 7515 §4.1.11), or it is refused.
            let expected = kid.flatMap { algorithms[$0] } ?? defaultAlgorithm
            guard let header = Self.headerThroughFoundation(ofToken: token) else { throw Failure(description: "the bearer token is not valid") }
            guard header.alg == expected, !header.crit else {
                throw Failure(description: "the bearer token's header does not fit its key (alg \(expected ?? "?"), no crit)")
            }
            // jwt-kit reads a repeated claim's first value, where RFC 7519 §4 allows only the
            // last or a refusal: {"studio": true, "studio": false} was a studio grant here and
            // none to a verifier that follows the RFC. (The fast path above reads the last value,
            // and leaves a token repeating a claim it reads to this path.)
            guard !Self.repeatsAMemberName(token) else { throw Failure(description: "the bearer token is not valid") }
            do {
                claims = try await keys.verify(token, as: Claims.self)
            } catch {
                throw Failure(description: "the bearer token is not valid")
            }
            verified.remember(token, claims: claims)
        }
        let now = clock()
        let leewaySeconds = leeway.seconds
        guard now < claims.exp.value.addingTimeInterval(leewaySeconds) else {
            throw Failure(description: "the bearer token has expired")
        }
        if let notBefore = claims.nbf?.value, now < notBefore.addingTimeInterval(-leewaySeconds) {
            throw Failure(description: "the bearer token is not valid yet (nbf is in the future)")
        }
        if let maxLifetime {
            // Measured from iat, or from now when iat is absent or in the future: an iat set just
            // before a far-away exp must not pass for a short-lived token.
            let issued = claims.iat.map { min($0.value, now) } ?? now
            let lifetime = claims.exp.value.timeIntervalSince(issued)
            let limit = maxLifetime.seconds
            guard lifetime <= limit else {
                // A faulty issuer's exp can be past what an Int holds: said, not converted.
                let seconds = lifetime < 1e15 ? String(Int(lifetime.rounded(.up))) : "over 10^15"
                throw Failure(
                    description: "the bearer token lives too long (\(seconds) s from \(issued == now ? "now" : "iat") to exp; "
                        + "at most \(Int(limit)) s is accepted here)")
            }
        }
        // By bytes, not canonical equivalence: another spelling is another issuer or audience.
        if let issuer, claims.iss?.value.hasSameBytes(as: issuer) != true {
            throw Failure(description: "the bearer token was not issued for this service")
        }
        if let audience, claims.aud?.value.contains(where: { $0.hasSameBytes(as: audience) }) != true {
            throw Failure(description: "the bearer token is not meant for this service")
        }
        guard Self.isUsableSubject(claims.sub.value) else { throw Failure(description: "the bearer token's subject is not usable") }
        return claims
    }

    /// Whether a token's subject can name a user here: not empty, at most 256 bytes, no control
    /// characters (C0, DEL, C1), and no invisible or direction characters, which would let it
    /// print as another user in logs, the studio and templates.
    public static func isUsableSubject(_ subject: String) -> Bool {
        !subject.isEmpty && subject.utf8.count <= 256
            && !subject.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) })
            && !InputCheck.containsInvisibleOrBidiControl(subject)
    }
}
