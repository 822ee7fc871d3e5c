import Foundation

extension UUID {
    /// Reads the canonical text form — 8-4-4-4-12 hex digits, either case, nothing around
    /// them. Written by hand: Foundation's `UUID(uuidString:)` parses with `sscanf`, which a
    /// profile of the playlist screen (a UUID per row) put at about 1 % of Baton's CPU, and
    /// which also lets a group start with a space, a sign or `0x`; this does not.
    public init?(canonical text: String) {
        var text = text
        guard let uuid = text.withUTF8({ UUID(canonicalUTF8: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = uuid
    }

    /// ``init(canonical:)`` from UTF-8 bytes (a column value as PostgreSQL sends it).
    public init?(canonicalUTF8 text: UnsafeRawBufferPointer) {
        guard text.count == 36 else { return nil }
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        let parsed = withUnsafeMutableBytes(of: &bytes) { output -> Bool in
            var at = 0
            for index in 0..<16 {
                if at == 8 || at == 13 || at == 18 || at == 23 {
                    guard text[at] == UInt8(ascii: "-") else { return false }
                    at += 1
                }
                guard let high = Self.digit(text[at]), let low = Self.digit(text[at + 1]) else { return false }
                output[index] = high << 4 | low
                at += 2
            }
            return true
        }
        guard parsed else { return nil }
        self.init(uuid: bytes)
    }

    @inline(__always)
    private static func digit(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte &- UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte &- UInt8(ascii: "a") &+ 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte &- UInt8(ascii: "A") &+ 10
        default: nil
        }
    }

    /// The canonical lowercase form (8-4-4-4-12 hex digits), written directly:
    /// `uuidString.lowercased()` builds two strings, and ids are written for every row a
    /// loader returns and every UUID parameter sent.
    public var lowercased: String {
        String(unsafeUninitializedCapacity: Self.canonicalLength) { output in
            writeCanonical(to: UnsafeMutableRawBufferPointer(output))
            return Self.canonicalLength
        }
    }

    /// The length of the canonical text form.
    static let canonicalLength = 36

    /// Writes the canonical lowercase form into `output`, which has room for
    /// ``canonicalLength`` bytes.
    func writeCanonical(to output: UnsafeMutableRawBufferPointer) {
        precondition(output.count >= Self.canonicalLength)
        withUnsafeBytes(of: uuid) { bytes in
            let digits: StaticString = "0123456789abcdef"
            var index = 0
            for position in 0..<16 {
                if position == 4 || position == 6 || position == 8 || position == 10 {
                    output[index] = UInt8(ascii: "-")
                    index += 1
                }
                let byte = bytes[position]
                output[index] = digits.utf8Start[Int(byte >> 4)]
                output[index + 1] = digits.utf8Start[Int(byte & 0x0F)]
                index += 2
            }
        }
    }
}
