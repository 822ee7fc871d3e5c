@_exported import OrderedCollections

/// A JSON document as a value: what flows, screens and responses are made of.
///
/// Objects keep their keys in insertion order, so a screen or response encodes to the same
/// bytes every time — which the ETag of a screen and the byte-for-byte replay of a command
/// response rely on.
public enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value): return value.rounded() == value && abs(value) < 9e15 ? Int(value) : nil
        default: return nil
        }
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// The member `key` of an object (nil for anything else or a missing key).
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The value at a dotted path such as `result.name` or `items.0.id`.
    public func value(atPath path: some StringProtocol) -> JSONValue? {
        value(at: path.split(separator: ".", omittingEmptySubsequences: false))
    }

    /// The value reached by following `parts`: object members by name, array elements by index.
    public func value<Parts: Sequence>(at parts: Parts) -> JSONValue? where Parts.Element: StringProtocol {
        var current = self
        for part in parts {
            switch current {
            case .object(let object):
                guard let next = object[String(part)] else { return nil }
                current = next
            case .array(let array):
                guard let index = Int(part), array.indices.contains(index) else { return nil }
                current = array[index]
            default:
                return nil
            }
        }
        return current
    }

    /// Whether a string anywhere in the value, member names included, holds U+0000, which
    /// PostgreSQL's `text` and `jsonb` refuse.
    public var containsNUL: Bool {
        switch self {
        case .string(let string): return string.utf8.contains(0)
        case .array(let elements): return elements.contains { $0.containsNUL }
        case .object(let members): return members.contains { $0.key.utf8.contains(0) || $0.value.containsNUL }
        case .null, .bool, .int, .double: return false
        }
    }

    /// How the value reads when interpolated into text: strings as they are, numbers and
    /// booleans in JSON form, null as empty, containers as compact JSON.
    public var interpolationText: String {
        switch self {
        case .null: return ""
        case .bool(let value): return value ? "true" : "false"
        case .int(let value): return String(value)
        case .double(let value): return JSONEncoding.format(value)
        case .string(let value): return value
        case .array, .object: return String(decoding: JSONEncoding.encode(self), as: UTF8.self)
        }
    }
}

extension JSONValue: Hashable {
    /// JSON equality: objects compare as unordered sets of members (their order is kept for
    /// encoding only); `1` and `1.0` are equal (an int and a double when the double is exactly
    /// that int). `-0` reads as the int 0, and `-0.0` writes as `0`: the sign of a zero is not
    /// kept, which RFC 8259 allows.
    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.string(let x), .string(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        // Exactly that int: through `Double(x)` alone, 2^53 + 1 equalled the double 2^53 (which
        // equals the int 2^53), and equality was not transitive.
        case (.int(let x), .double(let y)), (.double(let y), .int(let x)): return Int(exactly: y) == x
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x), .object(let y)):
            guard x.count == y.count else { return false }
            for (key, value) in x {
                guard let other = y[key], other == value else { return false }
            }
            return true
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .string(let value): hasher.combine(value)
        case .int(let value): hasher.combine(Double(value))
        case .double(let value): hasher.combine(value)
        case .array(let values): hasher.combine(values)
        case .object(let object):
            // Order-independent: combine members' hashes commutatively.
            var combined = 0
            for (key, value) in object {
                var member = Hasher()
                member.combine(key)
                member.combine(value)
                combined ^= member.finalize()
            }
            hasher.combine(object.count)
            hasher.combine(combined)
        }
    }
}

/// An ordered JSON object.
public typealias JSONObject = OrderedDictionary<String, JSONValue>

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        // Sized once: assigned one by one into an empty object, its keys and values grew 1, 2, 4, …
        var object = JSONObject(minimumCapacity: elements.count)
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

extension JSONValue: CustomStringConvertible {
    public var description: String { String(decoding: JSONEncoding.encode(self), as: UTF8.self) }
}

extension JSONValue {
    /// An object of `keys`, which the caller knows to be unique, and their values in the same
    /// order. The keys' storage is shared, not copied and not searched key by key: a template
    /// renders objects with the same keys many times per screen.
    public static func object(uniqueKeys keys: ContiguousArray<String>, values: ContiguousArray<JSONValue>) -> JSONValue {
        .object(JSONObject(uncheckedUniqueKeys: keys, values: values))
    }
}
