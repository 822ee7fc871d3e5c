/// Lowercase hexadecimal, without Foundation's formatting.
public enum Hex {
    /// `bytes` as lowercase hex digits.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        encode(Array(bytes))
    }

    /// `bytes` as lowercase hex digits. Inlinable, so a caller's collection type is specialised
    /// (an ETag's digest bytes, per screen).
    @inlinable
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
