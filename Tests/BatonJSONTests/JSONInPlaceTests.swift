import BatonJSON
import Testing

/// Views of a tree's containers (`JSONObjectView`, `TreeReader`): read from the containers'
/// bits they must be exactly what the documented accessors give, or the encoder and the
/// downgrade pass would read the wrong memory.
@Suite("JSON containers read in place")
struct JSONInPlaceTests {
    /// Objects and arrays of every shape the tree holds: empty, small, hashed (16 members
    /// and more), grown by appending, with members removed, nested.
    static var samples: [JSONValue] {
        var grown: [JSONValue] = []
        for index in 0..<37 { grown.append(.int(index)) }
        var shrunk = JSONObject(uniqueKeysWithValues: (0..<30).map { ("key \($0)", JSONValue.string("value \($0)")) })
        for index in stride(from: 0, to: 30, by: 3) { shrunk.removeValue(forKey: "key \(index)") }
        var small: JSONObject = ["type": "text", "id": "a", "text": "Hello"]
        small.reserveCapacity(40)
        let wide = JSONObject(uniqueKeysWithValues: (0..<200).map { ("member \($0) with a name past fifteen bytes", JSONValue.int($0)) })
        return [
            [:], [], .object(small), .object(shrunk), .object(wide), .array(grown), .array(Array(grown[3..<9])),
            ["nested": [["deeper": [1, 2, [:]]], []], "list": .array([.object(small), .object(shrunk)])],
        ]
    }

    @Test("containers are read from their bits here, so the encoder and the downgrade pass take that path")
    func layoutHolds() {
        #expect(ContainerLayout.holds)
    }

    @Test("every container, read from its bits, is the container read the documented way")
    func sameViews() {
        let bits = TreeReader(readingBits: true)
        let documented = TreeReader(readingBits: false)
        func compare(_ value: UnsafePointer<JSONValue>) {
            if let object = bits.object(at: value) {
                let other = documented.object(at: value)!
                #expect(object.count == other.count)
                guard case .object(let copy) = value.pointee else { Issue.record("not an object"); return }
                #expect(object.count == copy.count)
                for index in 0..<object.count {
                    #expect(object.names[index] == copy.keys[index])
                    #expect(object.names + index == other.names + index)
                    #expect(object.values + index == other.values + index)
                    compare(object.values + index)
                }
            } else if let elements = bits.elements(at: value) {
                let other = documented.elements(at: value)!
                #expect(elements.count == other.count)
                guard case .array(let copy) = value.pointee else { Issue.record("not an array"); return }
                #expect(elements.count == copy.count)
                for index in elements.indices {
                    #expect(elements.baseAddress! + index == other.baseAddress! + index)
                    compare(elements.baseAddress! + index)
                }
            } else {
                #expect(documented.object(at: value) == nil && documented.elements(at: value) == nil)
            }
        }
        for sample in Self.samples {
            withUnsafePointer(to: sample) { compare($0) }
        }
        // Scalars are neither.
        for scalar: JSONValue in [nil, true, 1, 1.5, "text", .string(String(repeating: "x", count: 40))] {
            withUnsafePointer(to: scalar) {
                #expect(bits.object(at: $0) == nil && bits.elements(at: $0) == nil)
            }
        }
    }

    @Test("the encoder writes every sample so it parses back the same, member order kept")
    func encodesSamples() throws {
        for sample in Self.samples {
            let bytes = JSONEncoding.encode(sample)
            #expect(try JSONValue.parse(bytes) == sample)
            // Order: the first member of a non-empty object comes first.
            if case .object(let object) = sample, let first = object.keys.first {
                #expect(String(decoding: bytes, as: UTF8.self).hasPrefix("{" + String(decoding: JSONEncoding.encode(.string(first)), as: UTF8.self)))
            }
        }
    }

    @Test("member names are found by their bytes: short and long storage alike, canonical equivalents not")
    func namesByBytes() {
        var long = String(repeating: "x", count: 40)
        long.removeAll(keepingCapacity: true)
        long += "type"  // four bytes in a large string's storage
        #expect(unsafeBitCast(long, to: (UInt64, UInt64).self).1 & (1 << 61) == 0, "not a small string")
        let object: JSONObject = [long: 1, "e\u{301}": 2, "\u{212A}": 3, "fifteen-bytes!!": 4, "sixteen-bytes!!!": 5]
        withUnsafePointer(to: JSONValue.object(object)) { value in
            let view = TreeReader().object(at: value)!
            #expect(view.index(of: "type") == 0)
            #expect(view.index(of: "\u{E9}") == nil)  // é precomposed: the same character, other bytes
            #expect(view.index(of: "e\u{301}") == 1)
            #expect(view.index(of: "K") == nil)  // the Kelvin sign is canonically K
            #expect(view.index(of: "\u{212A}") == 2)
            #expect(view.index(of: "fifteen-bytes!!") == 3)
            #expect(view.index(of: "sixteen-bytes!!!") == 4)
            #expect(view.index(of: "sixteen-bytes!!") == nil)
            #expect(view.string("type") == nil)
        }
    }
}
