import Synchronization

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
/// Bounded in two generations (an approximation of least-recently-used that needs no list): new
/// tokens go into the current one; when it holds `capacity`, it becomes the previous one and
/// the old previous one is dropped; a token found in the previous generation moves back to the
/// current one. At most `2 × capacity` tokens of at most `maxTokenBytes` each are held.
/// Written by hand: none of the project's dependencies offers a bounded cache, and this is
/// short.
final class VerifiedTokens<Claims: Sendable>: Sendable {
    private struct Generations {
        var current: [String: Claims] = [:]
        var previous: [String: Claims] = [:]
    }

    private let state = Mutex(Generations())
    let capacity: Int
    /// Longer tokens are verified every time rather than held (the authenticator refuses
    /// tokens over 8 KiB anyway).
    static var maxTokenBytes: Int { 2048 }

    /// - Parameter capacity: tokens per generation; 0 remembers none.
    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// The claims of `token` if its signature was verified before.
    func claims(of token: String) -> Claims? {
        guard Self.isHeld(token) else { return nil }
        var dropped: [String: Claims]?  // freed after the lock is let go
        defer { _ = dropped }
        return state.withLock { generations in
            if let claims = generations.current[token] { return claims }
            guard let claims = generations.previous.removeValue(forKey: token) else { return nil }
            dropped = Self.insert(token, claims, into: &generations, capacity: capacity)
            return claims
        }
    }

    /// Remembers that `token`'s signature verified, with the claims read from it.
    func remember(_ token: String, claims: Claims) {
        guard capacity > 0, Self.isHeld(token) else { return }
        let dropped = state.withLock { Self.insert(token, claims, into: &$0, capacity: capacity) }
        _ = dropped  // freed here, after the lock is let go
    }

    /// How many tokens are held (for tests and the bound above).
    var count: Int { state.withLock { $0.current.count + $0.previous.count } }

    /// Whether a token of this text may be held: ASCII, and not too long.
    private static func isHeld(_ token: String) -> Bool {
        token.utf8.count <= maxTokenBytes && token.utf8.allSatisfy { $0 < 0x80 }
    }

    /// Inserts, turning the generations over when the current one is full; returns the
    /// generation that fell out, for the caller to free outside the lock.
    private static func insert(_ token: String, _ claims: Claims, into generations: inout Generations, capacity: Int)
        -> [String: Claims]?
    {
        var dropped: [String: Claims]?
        if generations.current.count >= capacity {
            dropped = generations.previous
            generations.previous = generations.current
            generations.current = Dictionary(minimumCapacity: capacity)
        }
        generations.current[token] = claims
        return dropped
    }
}
