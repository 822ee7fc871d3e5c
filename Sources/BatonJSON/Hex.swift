import Foundation

/// Lowercase hexadecimal, without Foundation's formatting.
public enum Hex {
    /// The first `count` bytes (all, by default) of a digest or a MAC as lowercase hex digits,
    /// read where they lie: through its `Sequence` conformance a digest copies its bytes into
    /// an array first (0.75 % of a screen's CPU for its ETag).
    public static func encode(bytesOf value: some ContiguousBytes, prefix count: Int = .max) -> String {
        value.withUnsafeBytes { encode(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
    }

    /// `bytes` as lowercase hex digits.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        // Written into the string's own storage: no digit table array, no byte array to copy.
        String(unsafeUninitializedCapacity: bytes.count * 2) { output in
            let digits: StaticString = "0123456789abcdef"
            var index = 0
            for byte in bytes {
                output[index] = digits.utf8Start[Int(byte >> 4)]
                output[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                index += 2
            }
            return index
        }
    }
}
