import BatonJSON
import BatonRuntime
import Crypto
import ExtrasBase64
import Foundation
import Testing

/// The bytes of a minted payload, read back by hand rather than through `verify`: the
/// signature is written into one string (not two encodings joined), and start nonces come
/// from a shared pool of system randomness drawn a batch at a time.
@Suite("Payload signing")
struct PayloadSigningTests {
    static let secret = Array(repeating: UInt8(7), count: 32)

    @Test("a payload is base64url(claims).base64url(HMAC-SHA256 of those bytes), for claims of every length modulo 3")
    func format() throws {
        let signer = try PayloadSigner(keys: [("k1", Self.secret)])
        for length in 1...12 {
            let subject = "user:" + String(repeating: "x", count: length)
            let payload = signer.sign(
                PayloadClaims(subject: subject, flow: "note-create", sessionID: nil, step: 0, event: "start", expires: 4_102_444_800))
            let parts = payload.split(separator: ".", omittingEmptySubsequences: false)
            try #require(parts.count == 2, "\(payload)")
            #expect(!payload.contains("=") && !payload.contains("+") && !payload.contains("/"))
            let body = try Base64.decode(bytes: parts[0].utf8, options: [.base64UrlAlphabet, .omitPaddingCharacter])
            let mac = try Base64.decode(bytes: parts[1].utf8, options: [.base64UrlAlphabet, .omitPaddingCharacter])
            #expect(try JSONValue.parse(body)["s"]?.stringValue == subject)
            let expected = HMAC<SHA256>.authenticationCode(for: body, using: SymmetricKey(data: Self.secret))
            #expect(mac == Array(expected))
            #expect(throws: Never.self) { try signer.verify(payload).get() }
        }
    }

    // A start session's id is a hash of the payload's text: each spelling of one payload that
    // verified (a trailing '=', other unused bits in a last character) started a session of its own.
    @Test("a payload verifies only as minted: padding and other spellings of the same bytes are refused, in the body and in the MAC")
    func oneSpelling() throws {
        let signer = try PayloadSigner(keys: [("k1", Self.secret)])
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for length in 1...6 {
            let payload = signer.sign(
                PayloadClaims(
                    subject: "user:" + String(repeating: "x", count: length), flow: "note-create", sessionID: nil, step: 0, event: "start",
                    expires: 4_102_444_800))
            #expect(throws: Never.self) { try signer.verify(payload).get() }
            let parts = payload.split(separator: ".").map(String.init)
            var respellings = [payload + "=", parts[0] + "=." + parts[1], parts[0] + "==." + parts[1]]
            for (index, part) in parts.enumerated() where part.count % 4 != 0 {
                // The last character's unused low bits, set: the same bytes decode.
                let last = alphabet.firstIndex(of: part.last!)!
                let respelled = String(part.dropLast()) + String(alphabet[last ^ 1])
                respellings.append(index == 0 ? respelled + "." + parts[1] : parts[0] + "." + respelled)
            }
            for respelled in respellings {
                #expect(throws: PayloadSigner.Failure.self, "\(respelled)") { try signer.verify(respelled).get() }
            }
        }
        let device = "8d3f6c2e-5b1a-4e7f-9c0d-2a4b6c8d0e1f"
        let token = signer.deviceToken(for: device)
        #expect(signer.verifyDeviceToken(token, device: device))
        #expect(!signer.verifyDeviceToken(token + "=", device: device))
    }

    @Test("a start payload minted from its template is, for any nonce, the payload the claims sign to with that nonce")
    func startTemplate() throws {
        let signer = try PayloadSigner(keys: [("k1", Self.secret), ("k0", Array(repeating: 9, count: 32))])
        let parameters: [JSONObject?] = [
            nil, [:], ["id": "11111111-0000-4000-8000-000000000001"], ["q": "\"quoted\" \\ and ünïcødé 🎉", "n": 7, "list": [1, "two", nil]],
            ["long": .string(String(repeating: "y", count: 300))],
        ]
        var checked = 0
        for parameters in parameters {
            // Subjects of every length modulo 3 move where the template's base64 head ends.
            for length in 1...6 {
                let claims = PayloadClaims(
                    subject: "user:" + String(repeating: "x", count: length), flow: "playlist-play", sessionID: nil, step: 0,
                    event: "start", expires: 4_102_444_800, parameters: parameters)
                let template = try #require(signer.startTemplate(claims))
                #expect(template.subject == claims.subject)
                // Each payload from the template, with its fresh nonce, is byte for byte what the
                // claims sign to with that nonce; it verifies to them; no two share a nonce.
                var nonces: Set<String> = []
                for _ in 0..<3 {
                    var output = Array("before:".utf8)
                    #expect(signer.sign(template, into: &output))
                    let payload = String(decoding: output.dropFirst(7), as: UTF8.self)
                    var verified = try signer.verify(payload).get()
                    let nonce = try #require(verified.nonce)
                    #expect(nonce.utf8.count == 16)
                    nonces.insert(nonce)
                    var expected = claims
                    expected.nonce = nonce
                    #expect(output == Array(("before:" + signer.sign(expected)).utf8), "\(claims)")
                    verified.nonce = nil
                    var bare = claims
                    bare.keyID = "k1"
                    #expect(verified == bare)
                    checked += 1
                }
                #expect(nonces.count == 3)
            }
        }
        #expect(checked == 90)
    }

    @Test("a template mints only with the key that made it: with another, nothing is appended")
    func startTemplateRefusals() throws {
        let claims = PayloadClaims(subject: "user:alice", flow: "f", sessionID: nil, step: 0, event: "start", expires: 4_102_444_800)
        let signer = try PayloadSigner(keys: [("k1", Self.secret)])
        // The same key id with another secret (another replica's configuration, a test's).
        let other = try PayloadSigner(keys: [("k1", Array(repeating: 8, count: 32))])
        let template = try #require(signer.startTemplate(claims))
        var output: [UInt8] = [1, 2, 3]
        #expect(!other.sign(template, into: &output))
        #expect(output == [1, 2, 3])
        // A copy of the signer holds the same keys.
        let copy = signer
        #expect(copy.sign(template, into: &output))
    }

    @Test("a start payload's session id is the first 16 bytes of its SHA-256 as a version-8 UUID: stored sessions keep matching their payloads")
    func sessionIDDerivation() {
        // Pinned values: repeats of a start action find its session by this id, across deploys.
        #expect(PayloadSigner.sessionID(forStartPayload: "abc").uuidString == "BA7816BF-8F01-8FEA-8141-40DE5DAE2223")
        for payload in ["", "abc", "eyJzIjoidXNlcjphbGljZSJ9.c2lnbmF0dXJl", "ünïcødé 🎉", String(repeating: "x", count: 4000)] {
            var bytes = Array(SHA256.hash(data: Array(payload.utf8)).prefix(16))
            bytes[6] = (bytes[6] & 0x0F) | 0x80
            bytes[8] = (bytes[8] & 0x3F) | 0x80
            let expected = bytes.withUnsafeBytes { raw in UUID(uuid: raw.load(as: uuid_t.self)) }
            #expect(PayloadSigner.sessionID(forStartPayload: payload) == expected, "\(payload.prefix(20))")
        }
    }

    @Test("start nonces are 96 random bits, never repeated across many batches of the shared pool, from several threads")
    func nonces() async throws {
        let drawn = await withTaskGroup(of: [String].self) { group in
            for _ in 0..<4 { group.addTask { (0..<5_000).map { _ in PayloadSigner.makeNonce() } } }
            return await group.reduce(into: [String]()) { $0 += $1 }
        }
        #expect(drawn.count == 20_000)
        #expect(Set(drawn).count == drawn.count, "a nonce was handed out twice")
        var ones = 0
        for nonce in drawn {
            let bytes = try Base64.decode(bytes: nonce.utf8, options: [.base64UrlAlphabet, .omitPaddingCharacter])
            #expect(bytes.count == 12)
            ones += bytes.reduce(0) { $0 + $1.nonzeroBitCount }
        }
        // Random bits are ones half the time: 960 000 bits, so a few thousand either side.
        let share = Double(ones) / Double(drawn.count * 96)
        #expect(abs(share - 0.5) < 0.01, "share of one bits \(share)")
    }
}

@Suite("Signing keys from configuration")
struct SigningKeyConfigurationTests {
    // With one id twice, the second key never verified anything: payloads and device tokens
    // signed with it failed without a word.
    @Test("a key id given twice is refused")
    func duplicateKeyIDs() {
        #expect(throws: PayloadSigner.KeyError.self) {
            try PayloadSigner(keys: [("k1", Array(repeating: 7, count: 32)), ("k1", Array(repeating: 8, count: 32))])
        }
    }

    @Test("an entry without its key id is refused by its place, never printed (it would be all secret)")
    func secretNotPrinted() {
        let secret = "c2VjcmV0LXNpZ25pbmcta2V5LW5vdC10by1iZS1wcmludGVk"
        do {
            _ = try PayloadSigner(configuration: "k1:\(secret), \(secret)")
            Issue.record("an entry without a key id was accepted")
        } catch {
            let said = "\(error)"
            #expect(said.contains("entry 2 does not"), "\(said)")
            #expect(!said.contains(secret), "\(said)")
        }
    }
}
