import BatonRuntime

/// Bearer tokens whose signature was verified, with the claims they carry: a phone sends the
/// same token on every request for the token's lifetime, and verifying it again — three base64
/// decodes, an HMAC (or an RSA or ECDSA verification), two JSON parses — was 2–3 % of a
/// screen's CPU with HS256 and costs far more with the public-key algorithms.
///
/// Only the signature's verdict is remembered. The checks that depend on the clock or the
/// configuration (`exp`, `nbf`, the lifetime, `iss`, `aud`, the subject) run on every request,
/// so a cached token stops working when it expires (with the configured leeway, as any other).
/// A token is found only by its exact bytes — tokens are ASCII (base64url and dots), and only
/// ASCII tokens are held, since Swift compares other strings by canonical equivalence (`K` and
/// the Kelvin sign U+212A are equal) — and one whose signature fails is never remembered:
/// without the key, nobody can put a token here.
///
/// Bounded in two generations (``GenerationalCache``): at most `2 × capacity` tokens of at most
/// `maxTokenBytes` each are held.
final class VerifiedTokens<Claims: Sendable>: Sendable {
    private let store: GenerationalCache<String, Claims>
    var capacity: Int { store.capacity }
    /// Longer tokens are verified every time rather than held (the authenticator refuses
    /// tokens over 8 KiB anyway).
    static var maxTokenBytes: Int { 2048 }

    /// - Parameter capacity: tokens per generation; 0 remembers none.
    init(capacity: Int) {
        store = GenerationalCache(capacity: capacity)
    }

    /// The claims of `token` if its signature was verified before.
    func claims(of token: String) -> Claims? {
        guard Self.isHeld(token) else { return nil }
        return store.value(for: token)
    }

    /// Remembers that `token`'s signature verified, with the claims read from it.
    func remember(_ token: String, claims: Claims) {
        guard Self.isHeld(token) else { return }
        store.insert(claims, for: token)
    }

    /// How many tokens are held (for tests and the bound above).
    var count: Int { store.usage.count }

    /// Whether a token of this text may be held: ASCII, and not too long.
    private static func isHeld(_ token: String) -> Bool {
        token.utf8.count <= maxTokenBytes && token.utf8.allSatisfy { $0 < 0x80 }
    }
}
