import BatonFlows
import BatonJSON
import Testing

@testable import BatonRuntime

/// `ScreenCache.answer` on its own: the held bytes with a payload signed into each hole, from
/// the templates its first answer made when they fit the request and the signer, else from the
/// hole's claims.
@Suite struct ScreenCacheAnswerTests {
    static let signer = try! PayloadSigner(keys: [("k1", Array(repeating: 7, count: 32))])

    /// `[A][payload][B][payload][C]`, both holes for the user's audience, rendered for `user:alice`.
    func entry() -> ScreenCache.Entry {
        let claims = PayloadClaims(
            subject: "user:alice", flow: "playlist-play", sessionID: nil, step: 0, event: "start", expires: 4_102_444_800,
            parameters: ["id": "11111111-0000-4000-8000-000000000001"])
        return ScreenCache.Entry(
            scope: [], bytes: Array("[A][B][C]".utf8),
            holes: [ScreenCache.Hole(offset: 3, claims: claims, audience: .user), ScreenCache.Hole(offset: 6, claims: claims, audience: .user)],
            etag: "\"e\"", publish: {})
    }

    /// The payloads in an answer, verified by `signer`, with the bytes around them checked.
    func payloads(_ answer: [UInt8], signer: PayloadSigner) throws -> [PayloadClaims] {
        let text = String(decoding: answer, as: UTF8.self)
        try #require(text.hasPrefix("[A]") && text.hasSuffix("[C]"))
        let parts = text.dropFirst(3).dropLast(3).split(separator: "[B]", omittingEmptySubsequences: false)
        try #require(parts.count == 2, "\(text)")
        return try parts.map { try signer.verify(String($0)).get() }
    }

    @Test("the first answer makes the templates, with its signer; every answer's payloads verify to the claims, each with its own nonce")
    func templates() throws {
        let cache = ScreenCache(budget: 1 << 20)
        let entry = entry()
        var nonces: Set<String> = []
        for _ in 0..<3 {
            let answer = try #require(cache.answer(entry, identity: ClientIdentity(user: "alice"), signer: Self.signer))
            let claims = try payloads(answer, signer: Self.signer)
            #expect(claims.map(\.subject) == ["user:alice", "user:alice"])
            #expect(claims.allSatisfy { $0.flow == "playlist-play" && $0.parameters?["id"] == "11111111-0000-4000-8000-000000000001" })
            for claim in claims { nonces.insert(try #require(claim.nonce)) }
        }
        #expect(nonces.count == 6)
        // Made once: asked again (with another signer even), the entry gives the same ones.
        let other = try PayloadSigner(keys: [("k1", Array(repeating: 8, count: 32))])
        let made = entry.templates.templates(for: entry.holes, signer: other)
        #expect(made.count == 2 && made.allSatisfy { $0?.subject == "user:alice" })
        var output: [UInt8] = []
        #expect(made.allSatisfy { Self.signer.sign($0!, into: &output) })
        #expect(!other.sign(made[0]!, into: &output))
    }

    @Test("another signer (the same key id, another secret) or another subject is signed from the claims, never from the templates")
    func fallback() throws {
        let cache = ScreenCache(budget: 1 << 20)
        let entry = entry()
        _ = try #require(cache.answer(entry, identity: ClientIdentity(user: "alice"), signer: Self.signer))
        let other = try PayloadSigner(keys: [("k1", Array(repeating: 8, count: 32))])
        let signed = try #require(cache.answer(entry, identity: ClientIdentity(user: "alice"), signer: other))
        #expect(try payloads(signed, signer: other).map(\.subject) == ["user:alice", "user:alice"])
        #expect(throws: PayloadSigner.Failure.self) { try payloads(signed, signer: Self.signer) }

        let bob = try #require(cache.answer(entry, identity: ClientIdentity(user: "bob"), signer: Self.signer))
        #expect(try payloads(bob, signer: Self.signer).map(\.subject) == ["user:bob", "user:bob"])
        // No subject for the holes' audience: no answer (the caller renders).
        #expect(cache.answer(entry, identity: ClientIdentity(device: "5b0e2c4a-7d1f-4a3b-8c9e-0f1e2d3c4b5a"), signer: Self.signer) == nil)
    }
}
