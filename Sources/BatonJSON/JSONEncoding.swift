/// Compact, deterministic JSON serialisation, written for speed: screens of hundreds of
/// components are encoded on every request. Keys keep their order; strings are escaped as
/// RFC 8259 requires (plus U+2028/U+2029, which break JavaScript string literals).
///
/// Written by hand rather than with Foundation's `JSONEncoder`, which neither keeps key order
/// nor comes near the speed a render needs (docs/benchmarks.md has the figures).
public enum JSONEncoding {
    /// The compact UTF-8 encoding of `value`.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        var writer = JSONWriter(capacity: 1024)
        writer.write(value)
        return writer.bytes()
    }

    /// Numbers JSON can carry: finite doubles in shortest round-trip form, integral values
    /// without a fraction; NaN and infinities (not representable) become `null`.
    public static func format(_ number: Double) -> String {
        guard number.isFinite else { return "null" }
        if number == number.rounded(), abs(number) < 1e15 { return String(Int(number)) }
        return String(number)
    }
}

/// A growable output buffer for one encoding: plain pointer writes, capacity checked once
/// per token rather than once per byte. The downgrade pass writes through it too, and uses
/// `position`/`truncate(to:)` to take back a member it turns out to drop.
package struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    package init(capacity: Int = 1 << 16) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written so far.
    package func bytes() -> [UInt8] {
        Array(UnsafeBufferPointer(start: base, count: count))
    }

    /// How many bytes are written; a mark to `truncate(to:)`.
    package var position: Int { count }

    /// Takes back everything written after `mark`.
    package mutating func truncate(to mark: Int) {
        precondition(mark >= 0 && mark <= count, "truncating past the end")
        count = mark
    }

    /// An object member's key and colon, with the comma before it unless it is the first.
    package mutating func writeKey(_ key: String, first: inout Bool) {
        if !first { write(byte: UInt8(ascii: ",")) }
        first = false
        write(key)
        write(byte: UInt8(ascii: ":"))
    }

    // MARK: Values

    package mutating func write(_ value: borrowing JSONValue) {
        switch value {
        case .null: write(raw: "null")
        case .bool(let flag): write(raw: flag ? "true" : "false")
        case .int(let number): write(number)
        case .double(let number): write(number)
        case .string(let text): write(text)
        case .array(let elements):
            write(byte: UInt8(ascii: "["))
            // Through the buffers, members are borrowed rather than copied out one by one.
            elements.withUnsafeBufferPointer { elements in
                for index in elements.indices {
                    if index > 0 { write(byte: UInt8(ascii: ",")) }
                    write(elements[index])
                }
            }
            write(byte: UInt8(ascii: "]"))
        case .object(let object):
            write(byte: UInt8(ascii: "{"))
            var first = true
            object.forEachMember { key, member in
                writeKey(key, first: &first)
                write(member)
            }
            write(byte: UInt8(ascii: "}"))
        }
    }

    package mutating func write(_ number: Int) {
        reserve(20)
        if number >= 0, number < 10 {
            base[count] = UInt8(ascii: "0") &+ UInt8(number)
            count += 1
            return
        }
        // Digits backwards into a stack buffer: no String, no allocation.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = number.magnitude
            var index = 20
            repeat {
                index -= 1
                digits[index] = UInt8(ascii: "0") &+ UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude > 0
            if number < 0 { write(byte: UInt8(ascii: "-")) }
            write(UnsafeBufferPointer(rebasing: digits[index..<20]))
        }
    }

    package mutating func write(_ number: Double) {
        guard number.isFinite else { return write(raw: "null") }
        if number == number.rounded(), abs(number) < 1e15 { return write(Int(number)) }
        var text = String(number)
        text.withUTF8 { write($0) }
    }

    /// `text` as a JSON string literal.
    package mutating func write(_ text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ writeString($0) }) == nil {
            var copy = text
            copy.withUTF8 { writeString($0) }
        }
    }

    // MARK: Strings

    /// UTF-8 bytes as a string literal, escaped. Scanning and copying are one pass that
    /// moves eight bytes at a time while none of them needs an escape (most strings never do).
    private mutating func writeString(_ bytes: UnsafeBufferPointer<UInt8>) {
        let length = bytes.count
        // Room for the quotes and for a short string's word, stored whole (8 bytes).
        reserve(length &+ 10)
        var out = count
        base[out] = UInt8(ascii: "\"")
        out &+= 1
        guard let source = bytes.baseAddress else {
            base[out] = UInt8(ascii: "\"")
            count = out &+ 1
            return
        }
        if Self.isLittleEndian, length < 8 {
            // Short strings (most member names): the bytes in one word, padded with spaces.
            let word = Self.shortWord(source, length: length)
            if !Self.mayNeedEscaping(word) {
                UnsafeMutableRawPointer(base + out).storeBytes(of: word, as: UInt64.self)
                out &+= length
                base[out] = UInt8(ascii: "\"")
                count = out &+ 1
                return
            }
        }
        var index = 0
        var copiedSince = 0  // source bytes from here on were copied as they are
        while index < length {
            if index &+ 8 <= length {
                let word = UnsafeRawPointer(source + index).loadUnaligned(as: UInt64.self)
                if !Self.mayNeedEscaping(word) {
                    UnsafeMutableRawPointer(base + out).storeBytes(of: word, as: UInt64.self)
                    index &+= 8
                    out &+= 8
                    continue
                }
            } else if length &- 8 >= copiedSince {
                // The last few bytes: check the final eight, overlapping bytes already
                // copied as they are, rather than going byte by byte.
                let back = 8 &- (length &- index)
                let word = UnsafeRawPointer(source + (index &- back)).loadUnaligned(as: UInt64.self)
                if !Self.mayNeedEscaping(word) {
                    UnsafeMutableRawPointer(base + (out &- back)).storeBytes(of: word, as: UInt64.self)
                    out &+= length &- index
                    index = length
                    break
                }
            }
            let byte = source[index]
            if !Self.isSpecial(byte) || (byte == 0xE2 && !Self.isLineSeparator(source, at: index, length: length)) {
                base[out] = byte
                index &+= 1
                out &+= 1
                continue
            }
            // An escape: write it through the checked path, then make room for the rest.
            count = out
            switch byte {
            case UInt8(ascii: "\""): write(raw: "\\\"")
            case UInt8(ascii: "\\"): write(raw: "\\\\")
            case 0x0A: write(raw: "\\n")
            case 0x0D: write(raw: "\\r")
            case 0x09: write(raw: "\\t")
            case 0x08: write(raw: "\\b")
            case 0x0C: write(raw: "\\f")
            case 0xE2:
                write(raw: source[index &+ 2] == 0xA8 ? "\\u2028" : "\\u2029")
                index &+= 2
            default:
                write(raw: "\\u00")
                write(byte: Self.hexDigit(byte >> 4))
                write(byte: Self.hexDigit(byte & 0xF))
            }
            index &+= 1
            copiedSince = index
            reserve(length &- index &+ 1)
            out = count
        }
        base[out] = UInt8(ascii: "\"")
        count = out &+ 1
    }

    private static var isLittleEndian: Bool {
        #if _endian(little)
            true
        #else
            false
        #endif
    }

    /// Up to seven bytes as one word laid out as in memory (on a little-endian machine), the
    /// rest spaces; read in 4-, 2- and 1-byte loads so the word is built in registers (going
    /// through memory stalls on the reload).
    @inline(__always)
    private static func shortWord(_ source: UnsafePointer<UInt8>, length: Int) -> UInt64 {
        let raw = UnsafeRawPointer(source)
        var word: UInt64 = 0x2020_2020_2020_2020
        var shift: UInt64 = 0
        if length & 4 != 0 {
            word = (word & ~0xFFFF_FFFF) | UInt64(raw.loadUnaligned(as: UInt32.self))
            shift = 32
        }
        if length & 2 != 0 {
            let half = UInt64(raw.loadUnaligned(fromByteOffset: Int(shift / 8), as: UInt16.self))
            word = (word & ~(0xFFFF << shift)) | (half << shift)
            shift += 16
        }
        if length & 1 != 0 {
            let byte = UInt64(source[Int(shift / 8)])
            word = (word & ~(0xFF << shift)) | (byte << shift)
        }
        return word
    }

    /// Whether the 0xE2 at `index` starts U+2028 or U+2029 (E2 80 A8 / E2 80 A9).
    @inline(__always)
    private static func isLineSeparator(_ source: UnsafePointer<UInt8>, at index: Int, length: Int) -> Bool {
        index &+ 2 < length && source[index &+ 1] == 0x80 && (source[index &+ 2] == 0xA8 || source[index &+ 2] == 0xA9)
    }

    /// Whether a UTF-8 byte starts something a JSON string literal cannot carry as is:
    /// control characters, `"` and `\`, and 0xE2 (the lead byte of U+2028/U+2029).
    @inline(__always)
    private static func isSpecial(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0xE2
    }

    /// Whether any of eight bytes `isSpecial` — exact when false, so a word that passes is
    /// copied without looking at its bytes (the "has a byte less than n" and "has a zero
    /// byte" tests of Bit Twiddling Hacks).
    @inline(__always)
    private static func mayNeedEscaping(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func hasZeroByte(_ value: UInt64) -> Bool { (value &- ones) & ~value & highs != 0 }
        let control = (word &- ones &* 0x20) & ~word & highs != 0
        return control || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C)) || hasZeroByte(word ^ (ones &* 0xE2))
    }

    @inline(__always)
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") &+ nibble : UInt8(ascii: "a") &+ nibble &- 10
    }

    // MARK: Bytes

    @inline(__always)
    package mutating func write(byte: UInt8) {
        reserve(1)
        base[count] = byte
        count &+= 1
    }

    @inline(__always)
    package mutating func write(raw text: StaticString) {
        write(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inline(__always)
    private mutating func write(_ buffer: UnsafeBufferPointer<UInt8>) {
        guard let source = buffer.baseAddress, !buffer.isEmpty else { return }
        reserve(buffer.count)
        (base + count).update(from: source, count: buffer.count)
        count &+= buffer.count
    }

    @inline(__always)
    private mutating func reserve(_ extra: Int) {
        if count &+ extra > capacity { grow(to: count + extra) }
    }

    @inline(never)
    private mutating func grow(to needed: Int) {
        var newCapacity = capacity * 2
        while newCapacity < needed { newCapacity *= 2 }
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
