import Crypto

/// HMAC-SHA256 (RFC 2104) on swift-crypto's `SHA256`, with the key's inner and outer hash
/// states set up once.
///
/// swift-crypto's `HMAC<SHA256>` does the same, but it is generic and not inlinable: called
/// from this module, each `update` and `finalize` runs its unspecialized code (generic metadata
/// lookups, `DataProtocol` regions), which was about half of what a start payload's signature
/// cost, ten of them per screen. `SHA256` is concrete, so this runs specialized. Written by
/// hand for that reason only; `HMACSHA256Tests` holds it to `HMAC<SHA256>` byte for byte.
/// Payload MACs, device tokens and HS256 bearer tokens use it.
package struct HMACSHA256: Sendable {
    /// The hash after `key ⊕ ipad`, and after `key ⊕ opad`.
    private let inner: SHA256
    private let outer: SHA256

    package static let blockSize = 64

    package init(key: UnsafeRawBufferPointer) {
        var block = [UInt8](repeating: 0, count: Self.blockSize)
        if key.count > Self.blockSize {
            SHA256.hash(data: key).withUnsafeBytes { digest in block.replaceSubrange(0..<digest.count, with: digest) }
        } else {
            block.replaceSubrange(0..<key.count, with: key)
        }
        var inner = SHA256()
        var outer = SHA256()
        let innerPad = block.map { $0 ^ 0x36 }
        let outerPad = block.map { $0 ^ 0x5c }
        innerPad.withUnsafeBytes { inner.update(bufferPointer: $0) }
        outerPad.withUnsafeBytes { outer.update(bufferPointer: $0) }
        self.inner = inner
        self.outer = outer
    }

    package func authenticationCode(for message: UnsafeRawBufferPointer) -> SHA256.Digest {
        Self.authenticationCode(after: Prefixed(inner: inner, outer: outer), for: message)
    }

    /// The MAC's state once `prefix` is hashed: for many messages that begin with the same
    /// bytes, each finished from here (``authenticationCode(after:for:)``) hashes its own end
    /// only.
    package struct Prefixed: Sendable {
        fileprivate let inner: SHA256
        fileprivate let outer: SHA256
    }

    /// The state once `prefix` is hashed after the key.
    package func prefixed(_ prefix: UnsafeRawBufferPointer) -> Prefixed {
        var inner = self.inner
        inner.update(bufferPointer: prefix)
        return Prefixed(inner: inner, outer: outer)
    }

    /// The MAC of the prefix `state` was made with, followed by `rest`.
    package static func authenticationCode(after state: Prefixed, for rest: UnsafeRawBufferPointer) -> SHA256.Digest {
        var inner = state.inner
        inner.update(bufferPointer: rest)
        var outer = state.outer
        inner.finalize().withUnsafeBytes { outer.update(bufferPointer: $0) }
        return outer.finalize()
    }

    /// Whether `mac` is `code`, in time that depends on the lengths only.
    package static func equalInConstantTime(_ code: SHA256.Digest, _ mac: [UInt8]) -> Bool {
        guard mac.count == SHA256.byteCount else { return false }
        return code.withUnsafeBytes { code in
            var difference: UInt8 = 0
            for index in 0..<SHA256.byteCount { difference |= code[index] ^ mac[index] }
            return difference == 0
        }
    }
}
