import BatonFlows
import BatonJSON
import Testing

@testable import BatonRuntime

/// `ScreenCache.answer` on its own: the held bytes with a payload signed into each hole, from
/// the hole's template when it fits the request and the signer, else from its claims.
@Suite struct ScreenCacheAnswerTests {
    static let signer = try! PayloadSigner(keys: [("k1", Array(repeating: 7, count: 32))])

    /// Two holes in `[A][payload][B][payload][C]`, both for the user's audience, the first with
    /// a template made by `signer` for `user:alice`, the second without one.
    func entry() throws -> ScreenCache.Entry {
        let claims = PayloadClaims(
            subject: "user:alice", flow: "playlist-play", sessionID: nil, step: 0, event: "start", expires: 4_102_444_800,
            parameters: ["id": "11111111-0000-4000-8000-000000000001"])
        let template = try #require(Self.signer.startTemplate(claims))
        return ScreenCache.Entry(
            scope: [], bytes: Array("[A][B][C]".utf8),
            holes: [
                ScreenCache.Hole(offset: 3, claims: claims, audience: .user, template: template),
                ScreenCache.Hole(offset: 6, claims: claims, audience: .user, template: nil),
            ],
            etag: "\"e\"", publish: {})
    }

    /// The payloads in an answer, verified by `signer`, with the bytes around them.
    func payloads(_ answer: [UInt8], signer: PayloadSigner) throws -> [PayloadClaims] {
        let text = String(decoding: answer, as: UTF8.self)
        try #require(text.hasPrefix("[A]") && text.hasSuffix("[C]"))
        let parts = text.dropFirst(3).dropLast(3).split(separator: "[B]", omittingEmptySubsequences: false)
        try #require(parts.count == 2, "\(text)")
        return try parts.map { try signer.verify(String($0)).get() }
    }

    @Test("with the template's signer and subject, and from the claims where there is no template, every payload verifies to the claims")
    func templateAndClaims() throws {
        let cache = ScreenCache(budget: 1 << 20)
        let answer = try #require(cache.answer(try entry(), identity: ClientIdentity(user: "alice"), signer: Self.signer))
        let claims = try payloads(answer, signer: Self.signer)
        #expect(claims.map(\.subject) == ["user:alice", "user:alice"])
        #expect(claims.allSatisfy { $0.flow == "playlist-play" && $0.parameters?["id"] == "11111111-0000-4000-8000-000000000001" })
        #expect(claims[0].nonce != claims[1].nonce)
    }

    @Test("another signer (the same key id, another secret) or another subject is signed from the claims, never from the template")
    func fallback() throws {
        let cache = ScreenCache(budget: 1 << 20)
        let other = try PayloadSigner(keys: [("k1", Array(repeating: 8, count: 32))])
        let signed = try #require(cache.answer(try entry(), identity: ClientIdentity(user: "alice"), signer: other))
        #expect(try payloads(signed, signer: other).map(\.subject) == ["user:alice", "user:alice"])
        #expect(throws: PayloadSigner.Failure.self) { try payloads(signed, signer: Self.signer) }

        let bob = try #require(cache.answer(try entry(), identity: ClientIdentity(user: "bob"), signer: Self.signer))
        #expect(try payloads(bob, signer: Self.signer).map(\.subject) == ["user:bob", "user:bob"])
        // No subject for the hole's audience: no answer (the caller renders).
        #expect(cache.answer(try entry(), identity: ClientIdentity(device: "5b0e2c4a-7d1f-4a3b-8c9e-0f1e2d3c4b5a"), signer: Self.signer) == nil)
    }
}
