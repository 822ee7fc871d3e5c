/// Reading a tree's arrays and objects where they lie, without copying them out.
///
/// Taking an array or an object out of a `JSONValue` — a `switch` that binds it, a `for`
/// over a list — copies it: a retain of each storage it holds, and a release afterwards,
/// each an atomic operation. The encoder and the downgrade pass visit every container of
/// every screen, and with the compiler unable to prove the tree unchanged while they write,
/// those copies were over a quarter of their time (docs/benchmarks.md, "Containers read in
/// place"). A view is the container's elements, or its member names and values, as
/// pointers into the tree's own storage: reading through it copies nothing but the
/// strings and numbers read.
///
/// A view is valid only while the value it was read from is alive and unchanged. The
/// encoder and the downgrade pass make and use their views inside one walk over a tree
/// they hold for the whole walk; nothing keeps one.
package struct JSONObjectView {
    /// The member names, in order.
    package let names: UnsafePointer<String>
    /// The member values, in the same order.
    package let values: UnsafePointer<JSONValue>
    package let count: Int
    /// Whether short names are compared as words (`SmallUTF8.layoutHolds`).
    @usableFromInline let comparesWords: Bool

    @inlinable
    init(names: UnsafePointer<String>, values: UnsafePointer<JSONValue>, count: Int, comparesWords: Bool) {
        self.names = names
        self.values = values
        self.count = count
        self.comparesWords = comparesWords
    }

    /// The index of the member `name` (its UTF-8 bytes; a scan, as the objects of a screen
    /// have a handful of members).
    @inlinable @inline(__always)
    package func index(of name: String) -> Int? {
        for index in 0..<count where sameName(names + index, name, comparesWords: comparesWords) { return index }
        return nil
    }

    /// The value of the member `name`, where it lies.
    @inlinable @inline(__always)
    package func value(_ name: String) -> UnsafePointer<JSONValue>? {
        index(of: name).map { values + $0 }
    }

    /// The member `name`, if it is a string.
    @inlinable @inline(__always)
    package func string(_ name: String) -> String? {
        guard let value = value(name), case .string(let text) = value.pointee else { return nil }
        return text
    }
}

/// Makes views of the containers of a tree (see `JSONObjectView`). A value rather than
/// static functions so the check of the layout it reads is made once, when it is made, not
/// on every read.
package struct TreeReader {
    /// Whether containers are read from their bits (`ContainerLayout`).
    @usableFromInline let readsBits: Bool
    /// The bits the `.object` case sets in the last word of its payload.
    @usableFromInline let objectTag: UInt64
    /// Whether short names are compared as words (`SmallUTF8.layoutHolds`).
    @usableFromInline let comparesWords: Bool

    package init() {
        self.init(readingBits: ContainerLayout.holds)
    }

    /// `readingBits` false reads every container the documented way (tests compare the two).
    package init(readingBits: Bool) {
        readsBits = readingBits
        objectTag = ContainerLayout.objectTag
        comparesWords = SmallUTF8.layoutHolds
    }

    /// The object at `value`, or nil when it holds something else.
    @inlinable @inline(__always)
    package func object(at value: UnsafePointer<JSONValue>) -> JSONObjectView? {
        guard case .object = value.pointee else { return nil }
        return readsBits
            ? ContainerLayout.object(at: value, tag: objectTag, comparesWords: comparesWords)
            : ContainerLayout.copyingObject(at: value, comparesWords: comparesWords)
    }

    /// The elements of the array at `value`, or nil when it holds something else.
    @inlinable @inline(__always)
    package func elements(at value: UnsafePointer<JSONValue>) -> UnsafeBufferPointer<JSONValue>? {
        guard case .array = value.pointee else { return nil }
        return readsBits ? ContainerLayout.elements(at: value) : ContainerLayout.copyingElements(at: value)
    }
}

extension JSONObject {
    /// Calls `body` with a view of this object (for an object the caller built, not one
    /// read from a tree).
    package func withView<Result>(_ body: (JSONObjectView) throws -> Result) rethrows -> Result {
        try withUnsafePointer(to: JSONValue.object(self)) { try body(TreeReader().object(at: $0)!) }
    }
}

/// Whether two member names have the same UTF-8 bytes. Names of up to 15 bytes are kept
/// inside the `String` value, and two such strings have the same bytes exactly when they
/// have the same two words: compared without touching their storage.
@inlinable @inline(__always)
package func sameName(_ stored: UnsafePointer<String>, _ name: String, comparesWords: Bool) -> Bool {
    #if _endian(little) && _pointerBitWidth(_64)
    let raw = UnsafeRawPointer(stored)
    let (low, high) = unsafeBitCast(name, to: (UInt64, UInt64).self)
    let storedHigh = raw.load(fromByteOffset: 8, as: UInt64.self)
    if raw.load(as: UInt64.self) == low, storedHigh == high { return true }
    // Both small (bit 61 of the discriminator) and different: different bytes.
    if comparesWords, storedHigh & high & (1 << 61) != 0 { return false }
    #endif
    let text = stored.pointee
    return text.utf8.count == name.utf8.count && text.utf8.elementsEqual(name.utf8)
}

/// String equality that settles most unequal pairs on their length, without calling into
/// the general comparison.
@inlinable @inline(__always)
package func same(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && a == b
}

/// Where the standard library and swift-collections keep an array's elements and an
/// object's names and values, read from the values' bits (no copy of the container, so no
/// retain): on 64-bit platforms,
/// - a `ContiguousArray`/`Array` is a reference to its storage object, which keeps its
///   count 16 bytes in and its elements from 32 bytes in;
/// - an `OrderedDictionary` is its keys (an `OrderedSet`: an optional hash table, then a
///   `ContiguousArray`) and then its values (a `ContiguousArray`);
/// - a `JSONValue` holds its case's payload from its start, the case kept in spare bits of
///   the last word (the same bits for every object).
///
/// None of this is promised by the language's documentation, so it is checked once
/// against containers read the documented way (`holds`); where it does not hold, views are
/// made the documented way, from a copy of the container (retained and released, as
/// before).
package enum ContainerLayout {
    /// The bits a `.object` case sets in the last word of its payload.
    @usableFromInline static let objectTag: UInt64 = {
        let sample: JSONObject = ["a": 1]
        return words(of: JSONValue.object(sample)).2 ^ words(of: sample).2
    }()

    private static func words<T>(of value: T) -> (UInt64, UInt64, UInt64) {
        withUnsafeBytes(of: value) { raw in
            raw.count >= 24 ? (raw.load(as: UInt64.self), raw.load(fromByteOffset: 8, as: UInt64.self), raw.load(fromByteOffset: 16, as: UInt64.self)) : (0, 0, 0)
        }
    }

    @inlinable @inline(__always)
    static func buffer<Element>(storage: UInt64, of _: Element.Type) -> UnsafeBufferPointer<Element> {
        let raw = UnsafeRawPointer(bitPattern: UInt(truncatingIfNeeded: storage)).unsafelyUnwrapped
        return UnsafeBufferPointer(start: (raw + 32).assumingMemoryBound(to: Element.self), count: raw.load(fromByteOffset: 16, as: Int.self))
    }

    @inlinable @inline(__always)
    static func elements(at value: UnsafePointer<JSONValue>) -> UnsafeBufferPointer<JSONValue> {
        buffer(storage: UnsafeRawPointer(value).load(as: UInt64.self), of: JSONValue.self)
    }

    @inlinable @inline(__always)
    static func object(at value: UnsafePointer<JSONValue>, tag: UInt64, comparesWords: Bool) -> JSONObjectView {
        let raw = UnsafeRawPointer(value)
        let names = buffer(storage: raw.load(fromByteOffset: 8, as: UInt64.self), of: String.self)
        let values = buffer(storage: raw.load(fromByteOffset: 16, as: UInt64.self) ^ tag, of: JSONValue.self)
        return JSONObjectView(
            names: names.baseAddress.unsafelyUnwrapped, values: values.baseAddress.unsafelyUnwrapped, count: names.count, comparesWords: comparesWords)
    }

    /// `elements(at:)` the documented way. The pointer outlives the call it came from: the
    /// storage it points into is the tree's, which stays where it is while the tree holds
    /// it (the copy only added a reference to it).
    @usableFromInline @inline(never)
    static func copyingElements(at value: UnsafePointer<JSONValue>) -> UnsafeBufferPointer<JSONValue> {
        guard case .array(let elements) = value.pointee else { return UnsafeBufferPointer(start: nil, count: 0) }
        return elements.withUnsafeBufferPointer { $0 }
    }

    /// `object(at:)` the documented way (see `copyingElements(at:)`).
    @usableFromInline @inline(never)
    static func copyingObject(at value: UnsafePointer<JSONValue>, comparesWords: Bool) -> JSONObjectView {
        guard case .object(let object) = value.pointee else { preconditionFailure("not an object") }
        let names = object.keys.withContiguousStorageIfAvailable { $0.baseAddress } ?? nil
        let values = object.values.withUnsafeBufferPointer { $0.baseAddress }
        return JSONObjectView(names: names ?? placeholder(), values: values ?? placeholder(), count: object.count, comparesWords: comparesWords)
    }

    /// Where an empty buffer starts when it has no address: never read.
    @usableFromInline static func placeholder<T>() -> UnsafePointer<T> {
        UnsafePointer(bitPattern: MemoryLayout<T>.alignment).unsafelyUnwrapped
    }

    /// Whether containers read from their bits are the containers read the documented way:
    /// the same addresses and counts, for empty, small and hashed objects and arrays.
    package static let holds: Bool = {
        #if _endian(little) && _pointerBitWidth(_64)
        guard MemoryLayout<JSONValue>.size == 24, MemoryLayout<JSONObject>.size == 24, MemoryLayout<[JSONValue]>.size == 8 else { return false }
        var objects: [JSONObject] = [[:], ["type": "text"], ["a": 1, "b": [2], "c": ["d": nil]]]
        objects.append(JSONObject(uniqueKeysWithValues: (0..<40).map { ("member \($0) with a long name", JSONValue.int($0)) }))
        for sample in objects {
            let value = JSONValue.object(sample)
            let (read, documented) = withUnsafePointer(to: value) {
                (object(at: $0, tag: objectTag, comparesWords: false), copyingObject(at: $0, comparesWords: false))
            }
            guard read.count == documented.count, read.count == sample.count else { return false }
            guard read.count == 0 || (read.names == documented.names && read.values == documented.values) else { return false }
        }
        let arrays: [[JSONValue]] = [[], [1], ["a", ["b": 2], [3]], (0..<100).map { .int($0) }]
        for sample in arrays {
            let value = JSONValue.array(sample)
            let (read, documented) = withUnsafePointer(to: value) { (elements(at: $0), copyingElements(at: $0)) }
            guard read.count == sample.count, read.count == documented.count else { return false }
            guard read.isEmpty || read.baseAddress == documented.baseAddress else { return false }
        }
        return true
        #else
        return false
        #endif
    }()
}
