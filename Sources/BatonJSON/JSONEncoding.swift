/// Compact, deterministic JSON serialisation, written for speed: screens of hundreds of
/// components are encoded on every request. Keys keep their order; strings are escaped as
/// RFC 8259 requires (plus U+2028/U+2029, which break JavaScript string literals).
///
/// Written by hand rather than with Foundation's `JSONEncoder`, which neither keeps key order
/// nor comes near the speed a render needs (docs/benchmarks.md has the figures).
public enum JSONEncoding {
    /// The compact UTF-8 encoding of `value`.
    public static func encode(_ value: JSONValue) -> [UInt8] {
        // Large enough that a screen's encoding rarely grows it: each doubling copies
        // everything written so far.
        var writer = JSONWriter(capacity: 1 << 16)
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
///
/// Strings are the bulk of every screen, and their writes are arranged so the compiler can
/// read them in place from the tree: the room a string can take (every byte escaped) is
/// reserved before the string is looked at, so nothing while its bytes are copied can
/// reallocate — a call that might would make Swift retain and release every string and
/// member name it writes, which cost about a fifth of an encoding.
package struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    /// Whether short strings are read from the `String` value itself (`SmallUTF8`).
    private let readsSmallStrings = SmallUTF8.layoutHolds
    /// Whether a long string's bytes are read where its value points (`StoredUTF8`).
    private let readsStoredStrings = StoredUTF8.layoutHolds
    /// Reads the tree's containers in place.
    private let reader = TreeReader()
    /// Whether a NaN or an infinity was written (as `null`, which does not round-trip).
    package private(set) var wroteNonFinite = false

    package init(capacity: Int = 1 << 16) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
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
        let isFirst = first
        first = false
        withUnsafePointer(to: key) { writeKey(at: $0, isFirst: isFirst) }
    }

    /// `writeKey(_:first:)` for a member name where it lies.
    package mutating func writeKey(at key: UnsafePointer<String>, first: inout Bool) {
        let isFirst = first
        first = false
        writeKey(at: key, isFirst: isFirst)
    }

    @inline(never)
    private mutating func writeKeySlowly(_ key: String, first: inout Bool) {
        if !first { write(byte: UInt8(ascii: ",")) }
        first = false
        writeStringSlowly(key)
        write(byte: UInt8(ascii: ":"))
    }

    // MARK: Values

    package mutating func write(_ value: borrowing JSONValue) {
        withUnsafePointer(to: value) { writeElement(at: $0) }
    }

    /// The value at `value`, read where it lies (see the type's comment).
    package mutating func write(at value: UnsafePointer<JSONValue>) {
        writeElement(at: value)
    }

    /// The object `object` views, read where it lies.
    package mutating func write(_ object: JSONObjectView) {
        write(members: object)
    }

    /// The object `object` views, with the value of its `type` member written as `type`
    /// instead (an action performed as its fallback), every other member as `write(_:)`
    /// writes it.
    package mutating func write(_ object: JSONObjectView, type: String) {
        write(members: object, type: type)
    }

    private mutating func write(elements: UnsafeBufferPointer<JSONValue>) {
        write(byte: UInt8(ascii: "["))
        if let first = elements.baseAddress {
            for index in 0..<elements.count {
                if index > 0 { write(byte: UInt8(ascii: ",")) }
                writeElement(at: first + index)
            }
        }
        write(byte: UInt8(ascii: "]"))
    }

    /// `object`'s members; with `type`, the value of its `type` member written as that.
    private mutating func write(members object: JSONObjectView, type: String? = nil) {
        write(byte: UInt8(ascii: "{"))
        for index in 0..<object.count {
            writeKey(at: object.names + index, isFirst: index == 0)
            if let type, sameName(object.names + index, "type", comparesWords: readsSmallStrings) {
                write(type)
            } else {
                writeElement(at: object.values + index)
            }
        }
        write(byte: UInt8(ascii: "}"))
    }

    /// Bytes encoded beforehand (a member name with its separators, a constant), as they are.
    @inline(__always)
    package mutating func write(encoded bytes: UnsafeBufferPointer<UInt8>) {
        write(bytes)
    }

    /// A member name of an object being written, read where it lies (see the type's comment).
    @inline(__always)
    private mutating func writeKey(at key: UnsafePointer<String>, isFirst: Bool) {
        if readsSmallStrings, let small = SmallUTF8(at: key) {
            reserve(SmallUTF8.room)
            if !isFirst { append(UInt8(ascii: ",")) }
            if !appendQuoted(small) { appendQuoted(key.pointee) }
            return append(UInt8(ascii: ":"))
        }
        guard Self.isInline(key.pointee) else {
            var first = isFirst
            return writeKeySlowly(key.pointee, first: &first)
        }
        reserve(Self.room(key.pointee))
        if !isFirst { append(UInt8(ascii: ",")) }
        appendQuoted(key.pointee)
        append(UInt8(ascii: ":"))
    }

    /// A value of the tree being written, read where it lies. Each `pointee` below is a read
    /// of its own, so a string is read in place after its room is reserved (see the type's
    /// comment), and containers are walked through views (`JSONObjectView`), not copied.
    @inline(__always)
    private mutating func writeElement(at value: UnsafePointer<JSONValue>) {
        if readsSmallStrings, case .string = value.pointee {
            if write(small: SmallUTF8(payloadAt: value)) { return }
            if readsStoredStrings, let bytes = StoredUTF8.bytes(at: UnsafeRawPointer(value)) { return writeQuoted(bytes) }
        }
        if let object = reader.object(at: value) { return write(members: object) }
        if let elements = reader.elements(at: value) { return write(elements: elements) }
        if case .string(let text) = value.pointee {
            guard Self.isInline(text) else { return writeStringSlowly(text) }
        }
        if case .string(let text) = value.pointee { reserve(Self.room(text)) }
        switch value.pointee {
        case .null: write(raw: "null")
        case .bool(let flag): write(raw: flag ? "true" : "false")
        case .int(let number): write(number)
        case .double(let number): write(number)
        case .string(let text): appendQuoted(text)
        case .array, .object: break  // written above
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
        guard number.isFinite else {
            wroteNonFinite = true
            return write(raw: "null")
        }
        if number == number.rounded(), abs(number) < 1e15 { return write(Int(number)) }
        var text = String(number)
        text.withUTF8 { write($0) }
    }

    /// `text` as a JSON string literal.
    package mutating func write(_ text: String) {
        if readsSmallStrings, write(small: SmallUTF8(text)) { return }
        guard Self.isInline(text) else { return writeStringSlowly(text) }
        reserve(Self.room(text))
        appendQuoted(text)
    }

    // MARK: Strings

    /// Strings up to this many UTF-8 bytes are written in one pass into room reserved for
    /// the worst case (every byte escaped, six times its size); longer ones in pieces.
    private static let inlineLimit = 4096

    /// Whether `text` is written in one pass: short enough, and stored as UTF-8 in one piece
    /// (a bridged `NSString` or a shared substring's storage is not).
    @inline(__always)
    private static func isInline(_ text: borrowing String) -> Bool {
        text.utf8.count <= inlineLimit && text.isContiguousUTF8
    }

    /// The room `appendQuoted(text)` may take, with a separator on either side.
    @inline(__always)
    private static func room(_ text: borrowing String) -> Int {
        text.utf8.count &* 6 &+ 32
    }

    /// A small string as a string literal, when none of its bytes needs an escape; false,
    /// with nothing written, for any other string (the general path then writes it).
    @inline(__always)
    private mutating func write(small: SmallUTF8?) -> Bool {
        guard let small else { return false }
        reserve(SmallUTF8.room)
        return appendQuoted(small)
    }

    /// A small string as a string literal, into room already reserved (`SmallUTF8.room`),
    /// when none of its bytes needs an escape: its two words stored whole, checked once.
    /// False, with nothing written, when one does (the general path then writes it).
    @inline(__always)
    private mutating func appendQuoted(_ small: SmallUTF8) -> Bool {
        // Spaces, which never need escaping, stand in for the bytes past the string's end.
        let spaces: UInt64 = 0x2020_2020_2020_2020
        let lowPadding = small.count >= 8 ? 0 : spaces &<< UInt64(small.count &* 8)
        let highPadding = small.count <= 8 ? spaces : spaces &<< UInt64((small.count &- 8) &* 8)
        guard Self.specialBytes(small.low | lowPadding) | Self.specialBytes(small.high | highPadding) == 0 else { return false }
        let out = base + count
        out[0] = UInt8(ascii: "\"")
        UnsafeMutableRawPointer(out + 1).storeBytes(of: small.low.littleEndian, as: UInt64.self)
        UnsafeMutableRawPointer(out + 9).storeBytes(of: small.high.littleEndian, as: UInt64.self)
        out[small.count &+ 1] = UInt8(ascii: "\"")
        count &+= small.count &+ 2
        return true
    }

    /// `text` as a string literal, into room already reserved (`room(text)`): it calls
    /// nothing that could reallocate.
    @inline(__always)
    private mutating func appendQuoted(_ text: borrowing String) {
        _ = text.utf8.withContiguousStorageIfAvailable { appendQuoted($0) }
    }

    /// A string's UTF-8 bytes as a string literal, into room already reserved (six bytes
    /// per byte and 32 more).
    @inline(__always)
    private mutating func appendQuoted(_ bytes: UnsafeBufferPointer<UInt8>) {
        var out = base + count
        out.pointee = UInt8(ascii: "\"")
        out += 1
        if let start = bytes.baseAddress {
            var input = start
            let end = start + bytes.count
            Self.appendEscaped(&input, until: end, start: start, end: end, to: &out)
        }
        out.pointee = UInt8(ascii: "\"")
        count = out - base &+ 1
    }

    /// A string's UTF-8 bytes, read where they lie, as a string literal.
    @inline(__always)
    private mutating func writeQuoted(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count <= Self.inlineLimit else { return writeQuotedInPieces(bytes) }
        reserve(bytes.count &* 6 &+ 32)
        appendQuoted(bytes)
    }

    /// A string that is long or not stored contiguously: made contiguous (a copy, for a
    /// bridged string), then escaped piece by piece.
    @inline(never)
    private mutating func writeStringSlowly(_ text: String) {
        var text = text
        text.withUTF8 { writeQuotedInPieces($0) }
    }

    /// A string's UTF-8 bytes as a string literal, escaped piece by piece, each into room
    /// reserved for it.
    @inline(never)
    private mutating func writeQuotedInPieces(_ bytes: UnsafeBufferPointer<UInt8>) {
        write(byte: UInt8(ascii: "\""))
        if let start = bytes.baseAddress {
            var input = start
            let end = start + bytes.count
            while input < end {
                let stop = input + min(end - input, Self.inlineLimit)
                reserve((stop - input) &* 6 &+ 32)
                var out = base + count
                Self.appendEscaped(&input, until: stop, start: start, end: end, to: &out)
                count = out - base
            }
        }
        write(byte: UInt8(ascii: "\""))
    }

    /// Copies string bytes from `input` on, escaped, until at least `stop`, advancing both
    /// pointers. One pass, eight bytes at a time: each word is stored whole, then checked;
    /// where it holds a byte to escape, the output keeps the bytes before that one and the
    /// escape is written over the rest. Needs room for six bytes per input byte up to `stop`
    /// and 32 more (two words loaded past `stop` within the string, or a word and an escape,
    /// and the slack of two whole words stored).
    /// Reads nothing outside `start..<end`.
    @inline(__always)
    private static func appendEscaped(
        _ input: inout UnsafePointer<UInt8>, until stop: UnsafePointer<UInt8>, start: UnsafePointer<UInt8>, end: UnsafePointer<UInt8>,
        to out: inout UnsafeMutablePointer<UInt8>
    ) {
        while input < stop {
            let remaining = end - input
            if remaining >= 16 {
                // Two words at a time while neither needs an escape (most of a long string).
                let low = UInt64(littleEndian: UnsafeRawPointer(input).loadUnaligned(as: UInt64.self))
                let high = UInt64(littleEndian: UnsafeRawPointer(input).loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                UnsafeMutableRawPointer(out).storeBytes(of: low.littleEndian, as: UInt64.self)
                UnsafeMutableRawPointer(out).storeBytes(of: high.littleEndian, toByteOffset: 8, as: UInt64.self)
                if specialBytes(low) | specialBytes(high) == 0 {
                    input += 16
                    out += 16
                    continue
                }
            }
            let word: UInt64
            let taken: Int
            if remaining >= 8 {
                word = UInt64(littleEndian: UnsafeRawPointer(input).loadUnaligned(as: UInt64.self))
                taken = 8
            } else {
                word = lastWord(input, remaining: remaining, canReadBack: end - start >= 8)
                taken = remaining
            }
            UnsafeMutableRawPointer(out).storeBytes(of: word.littleEndian, as: UInt64.self)
            let special = specialBytes(word)
            if special == 0 {
                input += taken
                out += taken
                continue
            }
            // The padding above a short word's bytes never needs escaping, so the first
            // special byte is always one of the string's.
            let plain = special.trailingZeroBitCount &>> 3
            input += plain
            out += plain
            (input, out) = escape(input, end: end, to: out)
        }
    }

    /// Writes the byte at `input`, which `specialBytes` flagged, as a string literal needs
    /// it, and moves past it. 0xE2 is escaped only as the lead of U+2028/U+2029.
    /// Not inlined (escapes are rare), and it reallocates nothing.
    @inline(never)
    private static func escape(
        _ input: UnsafePointer<UInt8>, end: UnsafePointer<UInt8>, to out: UnsafeMutablePointer<UInt8>
    ) -> (input: UnsafePointer<UInt8>, out: UnsafeMutablePointer<UInt8>) {
        let byte = input.pointee
        let escaped: UInt8
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): escaped = byte
        case 0x0A: escaped = UInt8(ascii: "n")
        case 0x0D: escaped = UInt8(ascii: "r")
        case 0x09: escaped = UInt8(ascii: "t")
        case 0x08: escaped = UInt8(ascii: "b")
        case 0x0C: escaped = UInt8(ascii: "f")
        case 0xE2:
            guard end - input >= 3, input[1] == 0x80, input[2] == 0xA8 || input[2] == 0xA9 else {
                out.pointee = byte
                return (input + 1, out + 1)
            }
            // "\u2028" or "\u2029"
            out[0] = UInt8(ascii: "\\")
            out[1] = UInt8(ascii: "u")
            out[2] = UInt8(ascii: "2")
            out[3] = UInt8(ascii: "0")
            out[4] = UInt8(ascii: "2")
            out[5] = input[2] == 0xA8 ? UInt8(ascii: "8") : UInt8(ascii: "9")
            return (input + 3, out + 6)
        default:
            // Other control characters: "\u00XX"
            out[0] = UInt8(ascii: "\\")
            out[1] = UInt8(ascii: "u")
            out[2] = UInt8(ascii: "0")
            out[3] = UInt8(ascii: "0")
            out[4] = hexDigit(byte &>> 4)
            out[5] = hexDigit(byte & 0xF)
            return (input + 1, out + 6)
        }
        out[0] = UInt8(ascii: "\\")
        out[1] = escaped
        return (input + 1, out + 2)
    }

    /// The last `remaining` (1–7) bytes of a string, as the low bytes of a word (memory
    /// order from the low end) whose high bytes are spaces, which never need escaping.
    /// Read without touching a byte past the end: as the top of the string's last eight
    /// bytes when it has eight (`canReadBack`), else in two overlapping loads rather than
    /// a branch per length.
    @inline(__always)
    private static func lastWord(_ input: UnsafePointer<UInt8>, remaining: Int, canReadBack: Bool) -> UInt64 {
        let padding = (0x2020_2020_2020_2020 as UInt64) &<< UInt64(remaining &* 8)
        if canReadBack {
            let last = UInt64(littleEndian: UnsafeRawPointer(input + remaining - 8).loadUnaligned(as: UInt64.self))
            return last &>> UInt64((8 &- remaining) &* 8) | padding
        }
        let raw = UnsafeRawPointer(input)
        if remaining >= 4 {
            let low = UInt64(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self)))
            let high = UInt64(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: remaining &- 4, as: UInt32.self)))
            return low | high &<< UInt64((remaining &- 4) &* 8) | padding
        }
        // One to three bytes: the first, the middle and the last cover them all.
        let first = UInt64(input[0])
        let middle = UInt64(input[remaining &>> 1]) &<< UInt64((remaining &>> 1) &* 8)
        let last = UInt64(input[remaining &- 1]) &<< UInt64((remaining &- 1) &* 8)
        return first | middle | last | padding
    }

    /// The high bit of each byte of `word` (memory order from the low end) that a string
    /// literal cannot carry as is — a control character, `"` or `\` — or that is 0xE2, the
    /// lead byte of U+2028/U+2029. No bit set means no such byte. A borrow can carry up and
    /// set bits above a set one, so only the lowest is exact: it marks the first such byte
    /// (the "has a byte less than n" and "has a zero byte" tests of Bit Twiddling Hacks).
    @inline(__always)
    private static func specialBytes(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        @inline(__always) func zeroBytes(_ value: UInt64) -> UInt64 { (value &- ones) & ~value & highs }
        let control = (word &- ones &* 0x20) & ~word & highs
        return control | zeroBytes(word ^ (ones &* 0x22)) | zeroBytes(word ^ (ones &* 0x5C)) | zeroBytes(word ^ (ones &* 0xE2))
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

    /// A byte into room already reserved.
    @inline(__always)
    private mutating func append(_ byte: UInt8) {
        base[count] = byte
        count &+= 1
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

/// The UTF-8 bytes of a small string, read from the `String` value's own two words.
///
/// Swift keeps a string of up to 15 UTF-8 bytes inside the value, with no storage object —
/// nearly every member name and many values of a screen. Reading them through the standard
/// library's `withContiguousStorageIfAvailable` copies them to the stack and loops over them
/// by length; reading the two words directly lets the writer check and store them whole.
///
/// This relies on the standard library's layout of a small string on 64-bit little-endian
/// platforms: bytes 0–7 in the first word, 8–14 in the second, whose top byte is the
/// discriminator (bit 63 immortal and bit 61 small set, bit 60 foreign clear; the count in
/// bits 56–59). That layout is part of the ABI on Apple platforms and the same on Linux.
/// It is checked once against known strings (`layoutHolds`); where it does not hold, or on
/// any other platform, no string reads as small and every one takes the general path.
package struct SmallUTF8 {
    /// Bytes 0–7, in memory order from the low end.
    let low: UInt64
    /// Bytes 8–14; the top byte (the discriminator) is cleared.
    let high: UInt64
    let count: Int

    /// The room writing one takes, escaped or not (15 bytes six times over, quotes and a
    /// separator on either side), and what the whole-word stores need.
    static let room = 15 * 6 + 32

    @inline(__always)
    init?(_ text: borrowing String) {
        #if _endian(little) && _pointerBitWidth(_64)
        let words = unsafeBitCast(text, to: (UInt64, UInt64).self)
        self.init(words: words.0, words.1)
        #else
        return nil
        #endif
    }

    /// The string at `text`, read as its two words (no copy of the value, so no retain).
    @inline(__always)
    init?(at text: UnsafePointer<String>) {
        self.init(wordsAt: UnsafeRawPointer(text))
    }

    /// The string of a `.string` value at `value`, read in place: an enum case's payload lies
    /// at its start, and `JSONValue` keeps its case in spare bits of its third word (the last
    /// of an object's payload, see `ContainerLayout`), past a string's two, so the string's
    /// two words are as they are in a `String` (checked in `layoutHolds`).
    @inline(__always)
    init?(payloadAt value: UnsafePointer<JSONValue>) {
        self.init(wordsAt: UnsafeRawPointer(value))
    }

    @inline(__always)
    private init?(wordsAt raw: UnsafeRawPointer) {
        #if _endian(little) && _pointerBitWidth(_64)
        self.init(words: raw.load(as: UInt64.self), raw.load(fromByteOffset: 8, as: UInt64.self))
        #else
        return nil
        #endif
    }

    @inline(__always)
    private init?(words low: UInt64, _ high: UInt64) {
        // Immortal and small, not foreign (the ASCII flag, bit 62, may be either).
        guard high &>> 60 & 0b1011 == 0b1010 else { return nil }
        self.low = low
        self.high = high & 0x00FF_FFFF_FFFF_FFFF
        self.count = Int(truncatingIfNeeded: high &>> 56 & 0xF)
    }

    /// Whether strings read here as the standard library reads them: short ones as small,
    /// with the same bytes, and a long one not at all.
    package static let layoutHolds: Bool = {
        #if _endian(little) && _pointerBitWidth(_64)
        let samples = ["", "a", "id", "type", "1234567", "12345678", "fifteen bytes!!", "ü✓", "\u{0}\"\\"]
        for sample in samples {
            guard let small = SmallUTF8(sample), small.count == sample.utf8.count else { return false }
            let bytes = withUnsafeBytes(of: (small.low.littleEndian, small.high.littleEndian)) { Array($0.prefix(small.count)) }
            guard bytes == Array(sample.utf8) else { return false }
            // A `.string` value keeps the same two words at its start.
            let inValue = withUnsafePointer(to: JSONValue.string(sample)) { SmallUTF8(payloadAt: $0) }
            guard let inValue, inValue.low == small.low, inValue.high == small.high, inValue.count == small.count else { return false }
        }
        let long = String(repeating: "sixteen or more bytes", count: 2)
        return SmallUTF8(long) == nil
        #else
        return false
        #endif
    }()
}

/// The UTF-8 bytes of a long string stored in one piece, read from the `String` value's two
/// words: a string of 16 bytes or more — URLs, payloads, texts — keeps its bytes in a
/// storage object (or, for a literal, in the binary) that the value points at. Reading them
/// the documented way (`withContiguousStorageIfAvailable`) copies the value: a retain and a
/// release of its storage, each an atomic operation, for every such string written.
///
/// On 64-bit platforms the first word holds the count (bits 0–47) and flags (bit 60: the
/// bytes are at the storage's tail); the second holds the storage's address (bits 0–59) and
/// a discriminator (bits 60–63: small, foreign and bridged forms set one of bits 60–62).
/// The bytes start 32 bytes past the address, a literal's address being biased to match.
/// This is the standard library's layout on those platforms (ABI on Apple's), checked once
/// against strings read the documented way (`layoutHolds`): where it does not hold, every
/// string takes the documented path.
package enum StoredUTF8 {
    /// The bytes of the string at `text` (a `String`, or a `.string` value: the payload lies
    /// at its start), when it is long and stored in one piece; nil for any other string.
    @inline(__always)
    static func bytes(at text: UnsafeRawPointer) -> UnsafeBufferPointer<UInt8>? {
        #if _endian(little) && _pointerBitWidth(_64)
        let flags = text.load(as: UInt64.self)
        let object = text.load(fromByteOffset: 8, as: UInt64.self)
        guard object &>> 60 & 0b0111 == 0, flags & (1 << 60) != 0 else { return nil }
        let start = UnsafePointer<UInt8>(bitPattern: UInt(truncatingIfNeeded: object & 0x0FFF_FFFF_FFFF_FFFF) &+ 32)
        return UnsafeBufferPointer(start: start, count: Int(truncatingIfNeeded: flags & 0xFFFF_FFFF_FFFF))
        #else
        return nil
        #endif
    }

    /// Whether long strings read here are the strings read the documented way: literals,
    /// strings built at run time and grown, non-ASCII ones, in a `String` and in a `.string`
    /// value; and whether short ones are not read here at all.
    package static let layoutHolds: Bool = {
        #if _endian(little) && _pointerBitWidth(_64)
        var grown = String(repeating: "grown at run time, ", count: 3)
        grown += "then appended to: ✓"
        let decoded = String(decoding: Array("decoded from bytes, sixteen or more".utf8), as: UTF8.self)
        let sliced = String("a substring made into a string of its own".dropFirst(2))
        let samples = ["a literal of sixteen bytes or more", grown, decoded, sliced, "non-ASCII: ü, ✓, 😀 and more"]
        for sample in samples {
            guard let documented = sample.utf8.withContiguousStorageIfAvailable({ ($0.baseAddress, $0.count) }) else { return false }
            let read = withUnsafePointer(to: sample) { bytes(at: UnsafeRawPointer($0)) }
            let inValue = withUnsafePointer(to: JSONValue.string(sample)) { bytes(at: UnsafeRawPointer($0)) }
            guard let read, let inValue, read.baseAddress == documented.0, read.count == documented.1 else { return false }
            guard inValue.baseAddress == read.baseAddress, inValue.count == read.count, Array(read) == Array(sample.utf8) else { return false }
        }
        for short in ["", "a", "fifteen bytes!!"] {
            guard withUnsafePointer(to: short, { bytes(at: UnsafeRawPointer($0)) }) == nil else { return false }
        }
        return true
        #else
        return false
        #endif
    }()
}
