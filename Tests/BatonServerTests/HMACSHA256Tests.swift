import BatonJSON
import Crypto
import Testing

@testable import BatonRuntime

/// Baton's HMAC-SHA256 (set up once per key, run on the concrete `SHA256`) against
/// swift-crypto's `HMAC<SHA256>`, and its constant-time comparison.
@Suite struct HMACSHA256Tests {
    static func bytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    @Test("the same MAC as HMAC<SHA256> for keys around the block size and messages of every length to 300 bytes")
    func matchesSwiftCrypto() {
        var generator = SystemRandomNumberGenerator()
        for keyLength in [0, 1, 16, 32, 63, 64, 65, 100, 200] {
            let key = Self.bytes(keyLength, using: &generator)
            let ours = key.withUnsafeBytes { HMACSHA256(key: $0) }
            for messageLength in 0...300 {
                let message = Self.bytes(messageLength, using: &generator)
                let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
                let actual = message.withUnsafeBytes { Array(ours.authenticationCode(for: $0)) }
                #expect(actual == expected, "key of \(keyLength) bytes, message of \(messageLength)")
            }
        }
    }

    @Test("a MAC finished from a hashed prefix is the MAC of the whole, wherever the split falls, and the state is reusable")
    func prefixed() {
        var generator = SystemRandomNumberGenerator()
        for keyLength in [16, 32, 64, 100] {
            let key = Self.bytes(keyLength, using: &generator)
            let ours = key.withUnsafeBytes { HMACSHA256(key: $0) }
            for messageLength in [0, 1, 55, 63, 64, 65, 127, 128, 129, 250] {
                let message = Self.bytes(messageLength, using: &generator)
                let expected = Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
                for split in Set([0, messageLength / 3, messageLength / 2, 64, messageLength]) where split <= messageLength {
                    let state = message.withUnsafeBytes { ours.prefixed(UnsafeRawBufferPointer(rebasing: $0[..<split])) }
                    // Twice from one state: finishing one must not move the other.
                    for _ in 0..<2 {
                        let actual = message.withUnsafeBytes {
                            Array(HMACSHA256.authenticationCode(after: state, for: UnsafeRawBufferPointer(rebasing: $0[split...])))
                        }
                        #expect(actual == expected, "key of \(keyLength) bytes, message of \(messageLength), split at \(split)")
                    }
                }
            }
        }
    }

    @Test("RFC 4231 test case 2: key \"Jefe\"")
    func knownAnswer() {
        let ours = Array("Jefe".utf8).withUnsafeBytes { HMACSHA256(key: $0) }
        let code = Array("what do ya want for nothing?".utf8).withUnsafeBytes { Array(ours.authenticationCode(for: $0)) }
        #expect(Hex.encode(code) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test("equal only to the same 32 bytes")
    func comparison() {
        let key = Array("a key".utf8).withUnsafeBytes { HMACSHA256(key: $0) }
        let code = Array("a message".utf8).withUnsafeBytes { key.authenticationCode(for: $0) }
        let bytes = Array(code)
        #expect(HMACSHA256.equalInConstantTime(code, bytes))
        for index in bytes.indices {
            var altered = bytes
            altered[index] ^= 1
            #expect(!HMACSHA256.equalInConstantTime(code, altered))
        }
        #expect(!HMACSHA256.equalInConstantTime(code, Array(bytes.dropLast())))
        #expect(!HMACSHA256.equalInConstantTime(code, bytes + [0]))
        #expect(!HMACSHA256.equalInConstantTime(code, []))
    }
}
