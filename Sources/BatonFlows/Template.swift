import BatonJSON
import Foundation

/// Text with `{{name.path}}` references, parsed once when a flow loads.
///
/// References are dotted paths into the values a flow can see (`params.playlist`,
/// `input.text`, `result.name`, `data.playlist.title`, `item.id`, `subject.id`, `error`). There
/// are no operators, calls or filters: Baton templates interpolate, they do not compute.
public struct TemplateString: Sendable, Hashable {
    public enum Segment: Sendable, Hashable {
        case literal(String)
        case reference([String])
    }

    public var segments: [Segment]
    /// Where the template was written (not part of its identity).
    public var location: SourceLocation?

    public static func == (a: TemplateString, b: TemplateString) -> Bool { a.segments == b.segments }
    public func hash(into hasher: inout Hasher) { hasher.combine(segments) }

    public init(segments: [Segment], location: SourceLocation? = nil) {
        self.segments = segments
        self.location = location
    }

    /// Parses `text`; throws a message for an unterminated or malformed reference.
    public init(parsing text: String, location: SourceLocation? = nil) throws(TemplateError) {
        var segments: [Segment] = []
        var rest = Substring(text)
        while let open = rest.range(of: "{{") {
            if open.lowerBound > rest.startIndex { segments.append(.literal(String(rest[rest.startIndex..<open.lowerBound]))) }
            let afterOpen = rest[open.upperBound...]
            guard let close = afterOpen.range(of: "}}") else {
                throw TemplateError(message: "'{{' without a closing '}}'")
            }
            let expression = afterOpen[afterOpen.startIndex..<close.lowerBound].trimmingSpaces
            let path = expression.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard !expression.isEmpty,
                path.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" } })
            else {
                throw TemplateError(
                    message: "'{{\(expression)}}' is not a reference; write a dotted name such as {{input.text}} (templates have no expressions)")
            }
            segments.append(.reference(path))
            rest = afterOpen[close.upperBound...]
        }
        if !rest.isEmpty { segments.append(.literal(String(rest))) }
        self.segments = segments
        self.location = location
    }

    /// A template of plain text.
    public static func literal(_ text: String) -> TemplateString { TemplateString(segments: text.isEmpty ? [] : [.literal(text)]) }

    /// Every reference path in the template.
    public var references: [[String]] {
        segments.compactMap { if case .reference(let path) = $0 { path } else { nil } }
    }

    /// Whether the template has no references.
    public var isLiteral: Bool { references.isEmpty }

    /// The text with references replaced by their values (missing values become empty).
    public func render(_ scope: TemplateScope) -> String {
        if segments.count == 1 {
            switch segments[0] {
            case .literal(let text): return text
            case .reference(let path): return scope.lookup(path)?.interpolationText ?? ""
            }
        }
        // Look the references up first, so the text is built in one allocation.
        var parts: [String] = []
        parts.reserveCapacity(segments.count)
        var length = 0
        for segment in segments {
            let part: String
            switch segment {
            case .literal(let text): part = text
            case .reference(let path): part = scope.lookup(path)?.interpolationText ?? ""
            }
            length += part.utf8.count
            parts.append(part)
        }
        var output = ""
        output.reserveCapacity(length)
        for part in parts { output += part }
        return output
    }

    /// Like ``render(_:)``, but a template that is exactly one reference keeps the referenced
    /// value's JSON type (a number stays a number, an object an object).
    public func value(_ scope: TemplateScope) -> JSONValue {
        if segments.count == 1, case .reference(let path) = segments[0] { return scope.lookup(path) ?? .null }
        return .string(render(scope))
    }
}

/// Why a template could not be parsed.
public struct TemplateError: Error, Sendable {
    public var message: String
}

/// The values templates can reference, by top-level name.
///
/// A handful of names (`params`, `data`, `subject`, `item`…), kept in a short list rather than
/// a dictionary: a lookup compares a few short names instead of hashing one, and `each` sets
/// `item` and `index` per element without copying a hash table.
public struct TemplateScope: Sendable {
    private var names: [String] = []
    private var roots: [JSONValue] = []

    public init(_ values: [String: JSONValue] = [:]) {
        self.values = values
    }

    /// A scope of `names[i]` = `roots[i]`; the names are distinct.
    init(names: [String], roots: [JSONValue]) {
        assert(names.count == roots.count && Set(names).count == names.count, "a scope's names pair with its values, once each")
        self.names = names
        self.roots = roots
    }

    /// Every top-level value by name.
    public var values: [String: JSONValue] {
        get { Dictionary(zip(names, roots), uniquingKeysWith: { _, last in last }) }
        set {
            names = Array(newValue.keys)
            roots = Array(newValue.values)
        }
    }

    public func lookup(_ path: [String]) -> JSONValue? {
        guard let first = path.first, let slot = slot(first) else { return nil }
        var current = roots[slot]
        for part in path.dropFirst() {
            switch current {
            case .object(let object):
                guard let next = object[part] else { return nil }
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

    /// A scope with one more (or a replaced) top-level value.
    public func with(_ name: String, _ value: JSONValue) -> TemplateScope {
        var copy = self
        copy.set(name, value)
        return copy
    }

    /// Sets a top-level value in place (`each` reuses one scope for all its elements).
    mutating func set(_ name: String, _ value: JSONValue) {
        if let slot = slot(name) {
            roots[slot] = value
        } else {
            names.append(name)
            roots.append(value)
        }
    }

    /// The scope as one JSON object, names in byte order; nil when it holds a number that is
    /// not finite. A template sees a value only through what it encodes to (text interpolation
    /// formats numbers as the encoder does, `1` and `1.0` alike), so two scopes with the same
    /// encoding render the same bytes — except NaN and the infinities, which encode as `null`
    /// but render otherwise (a database loader can return them from a `float8`).
    public var encoded: [UInt8]? {
        // Written member by member: no object built to encode, and one pass finds a NaN.
        var writer = JSONWriter(capacity: 4096)
        var first = true
        writer.write(byte: UInt8(ascii: "{"))
        for index in names.indices.sorted(by: { names[$0].utf8.lexicographicallyPrecedes(names[$1].utf8) }) {
            writer.writeKey(names[index], first: &first)
            writer.write(roots[index])
        }
        writer.write(byte: UInt8(ascii: "}"))
        return writer.wroteNonFinite ? nil : writer.bytes()
    }

    private func slot(_ name: String) -> Int? {
        let length = name.utf8.count
        for index in names.indices where names[index].utf8.count == length && names[index] == name { return index }
        return nil
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return text
    }
}

/// A mapping template's members in order, and their keys on their own when no two are the same,
/// which is what a rendered object of them shares (``JSONValue/object(uniqueKeys:values:)``).
public struct TemplateMembers: RandomAccessCollection, Sendable {
    public let pairs: [(String, JSONTemplate)]
    let uniqueKeys: ContiguousArray<String>?

    public init(_ pairs: [(String, JSONTemplate)]) {
        self.pairs = pairs
        let keys = ContiguousArray(pairs.map(\.0))
        uniqueKeys = Set(keys).count == keys.count ? keys : nil
    }

    public var startIndex: Int { pairs.startIndex }
    public var endIndex: Int { pairs.endIndex }
    public subscript(position: Int) -> (String, JSONTemplate) { pairs[position] }
}

/// A JSON tree whose strings may hold references, with two structural keys on mappings:
/// `when: "{{ref}}"` keeps the mapping only if the reference is truthy (non-empty text, a
/// non-zero number, `true`, a non-empty list or object; `when: "!{{ref}}"` inverts), and
/// `each: "{{ref}}"` repeats it once per element of a list, with the element as `item` (and
/// its position as `index`). Used for screens and for effect arguments.
public indirect enum JSONTemplate: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int)
    case double(Double)
    case text(TemplateString)
    case array([JSONTemplate])
    case object(TemplateMembers, when: Condition?, each: [String]?, location: SourceLocation?)

    /// A `when:` condition.
    public struct Condition: Sendable, Hashable {
        public var path: [String]
        public var negated: Bool
    }

    public static func == (a: JSONTemplate, b: JSONTemplate) -> Bool {
        switch (a, b) {
        case (.null, .null): return true
        case (.bool(let x), .bool(let y)): return x == y
        case (.int(let x), .int(let y)): return x == y
        case (.double(let x), .double(let y)): return x == y
        case (.text(let x), .text(let y)): return x == y
        case (.array(let x), .array(let y)): return x == y
        case (.object(let x, let wx, let ex, _), .object(let y, let wy, let ey, _)):
            return wx == wy && ex == ey && x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .int(let value): hasher.combine(value)
        case .double(let value): hasher.combine(value)
        case .text(let value): hasher.combine(value)
        case .array(let values): hasher.combine(values)
        case .object(let pairs, let when, let each, _):
            for (key, value) in pairs {
                hasher.combine(key)
                hasher.combine(value)
            }
            hasher.combine(when)
            hasher.combine(each)
        }
    }

    /// Builds a template from YAML, collecting template syntax errors.
    public static func from(_ node: SourceNode, diagnostics: inout [Diagnostic]) -> JSONTemplate {
        switch node {
        case .scalar(let scalar):
            let value = scalar.jsonValue
            switch value {
            case .null: return .null
            case .bool(let flag): return .bool(flag)
            case .int(let number): return .int(number)
            case .double(let number): return .double(number)
            default:
                do {
                    return .text(try TemplateString(parsing: scalar.text, location: scalar.location))
                } catch {
                    diagnostics.append(.error(error.message, at: scalar.location))
                    return .text(.literal(scalar.text))
                }
            }
        case .sequence(let items, _):
            return .array(items.map { from($0, diagnostics: &diagnostics) })
        case .mapping(let pairs, let location):
            var members: [(String, JSONTemplate)] = []
            var when: Condition?
            var each: [String]?
            for (key, value) in pairs {
                switch key.text {
                case "when":
                    when = condition(value, diagnostics: &diagnostics)
                case "each":
                    if let parsed = condition(value, diagnostics: &diagnostics) {
                        if parsed.negated { diagnostics.append(.error("'each' takes a reference to a list, not a negation", at: value.location)) }
                        each = parsed.path
                    }
                default:
                    members.append((key.text, from(value, diagnostics: &diagnostics)))
                }
            }
            return .object(TemplateMembers(members), when: when, each: each, location: location)
        }
    }

    private static func condition(_ node: SourceNode, diagnostics: inout [Diagnostic]) -> Condition? {
        guard case .scalar(let scalar) = node else {
            diagnostics.append(.error("expected a reference such as \"{{data.items}}\", found \(node.kindDescription)", at: node.location))
            return nil
        }
        var text = Substring(scalar.text)
        var negated = false
        if text.hasPrefix("!") {
            negated = true
            text = text.dropFirst()
        }
        guard let template = try? TemplateString(parsing: String(text)), template.segments.count == 1,
            case .reference(let path) = template.segments[0]
        else {
            diagnostics.append(.error("expected exactly one reference such as \"{{data.items}}\" (or \"!{{…}}\"), found '\(scalar.text)'", at: scalar.location))
            return nil
        }
        return Condition(path: path, negated: negated)
    }

    /// Every reference in the template with where it is, and the scope additions (`item`,
    /// `index`) active there.
    public func references(inEach: Bool = false) -> [(path: [String], location: SourceLocation?, inEach: Bool)] {
        switch self {
        case .null, .bool, .int, .double: return []
        case .text(let template): return template.references.map { ($0, template.location, inEach) }
        case .array(let items): return items.flatMap { $0.references(inEach: inEach) }
        case .object(let pairs, let when, let each, let location):
            var found: [(path: [String], location: SourceLocation?, inEach: Bool)] = []
            if let each { found.append((each, location, inEach)) }
            let inner = inEach || each != nil
            if let when { found.append((when.path, location, inner)) }
            for (_, value) in pairs { found += value.references(inEach: inner) }
            return found
        }
    }

    /// Renders to JSON. Mappings dropped by `when` produce nothing; inside arrays, `each`
    /// expands in place.
    public func render(_ scope: TemplateScope) -> JSONValue? {
        switch self {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .int(let value): return .int(value)
        case .double(let value): return .double(value)
        case .text(let template): return template.value(scope)
        case .array(let items):
            var output: [JSONValue] = []
            output.reserveCapacity(items.count)
            for item in items { item.renderInto(&output, scope) }
            return .array(output)
        case .object(let pairs, let when, let each, _):
            if each == nil {
                return Self.renderObject(pairs, when: when, scope)
            }
            var output: [JSONValue] = []
            renderInto(&output, scope)
            return output.first
        }
    }

    private func renderInto(_ output: inout [JSONValue], _ scope: TemplateScope) {
        guard case .object(let pairs, let when, let each, _) = self else {
            if let value = render(scope) { output.append(value) }
            return
        }
        guard let each else {
            if let object = Self.renderObject(pairs, when: when, scope) { output.append(object) }
            return
        }
        guard case .array(let elements)? = scope.lookup(each) else { return }
        output.reserveCapacity(output.count + elements.count)
        var itemScope = scope
        for (index, element) in elements.enumerated() {
            itemScope.set("item", element)
            itemScope.set("index", .int(index))
            if let object = Self.renderObject(pairs, when: when, itemScope) { output.append(object) }
        }
    }

    /// One mapping, or nil when its `when` does not hold.
    private static func renderObject(_ pairs: TemplateMembers, when: Condition?, _ scope: TemplateScope) -> JSONValue? {
        if let when, isTruthy(scope.lookup(when.path)) == when.negated { return nil }
        var values = ContiguousArray<JSONValue>()
        values.reserveCapacity(pairs.count)
        for (_, value) in pairs {
            guard let rendered = value.render(scope) else { break }
            values.append(rendered)
        }
        // Every member rendered (the usual case): the object shares the template's keys.
        if values.count == pairs.count, let keys = pairs.uniqueKeys { return .object(uniqueKeys: keys, values: values) }
        // A member rendered nothing (it is left out), or keys repeat (the last one wins).
        var object = JSONObject()
        object.reserveCapacity(pairs.count)
        for (index, value) in values.enumerated() { object[pairs[index].0] = value }
        for (key, value) in pairs.dropFirst(values.count + 1) {
            if let rendered = value.render(scope) { object[key] = rendered }
        }
        return .object(object)
    }

    /// `when` truthiness: null, false, 0, "", the string "false" and empty containers are
    /// false (the string "0" is true: a service's text, not a count).
    public static func isTruthy(_ value: JSONValue?) -> Bool {
        switch value {
        case nil, .null?: return false
        case .bool(let flag)?: return flag
        case .int(let number)?: return number != 0
        case .double(let number)?: return number != 0
        case .string(let text)?: return !text.isEmpty && text != "false"
        case .array(let items)?: return !items.isEmpty
        case .object(let object)?: return !object.isEmpty
        }
    }
}

extension JSONTemplate {
    /// A representative rendering for static checks: every reference becomes placeholder text,
    /// every `each` repeats once, every `when` holds.
    public func sample() -> JSONValue {
        switch self {
        case .null: return .null
        case .bool(let value): return .bool(value)
        case .int(let value): return .int(value)
        case .double(let value): return .double(value)
        case .text(let template):
            return .string(template.segments.map { if case .literal(let text) = $0 { text } else { "x" } }.joined())
        case .array(let items): return .array(items.map { $0.sample() })
        case .object(let pairs, _, _, _):
            var object = JSONObject()
            for (key, value) in pairs { object[key] = value.sample() }
            return .object(object)
        }
    }

    /// The location of a mapping template (nil for other kinds).
    public var location: SourceLocation? {
        if case .object(_, _, _, let location) = self { return location }
        if case .text(let template) = self { return template.location }
        return nil
    }

    /// The member `key` of a mapping template.
    public subscript(key: String) -> JSONTemplate? {
        guard case .object(let pairs, _, _, _) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }

    /// The literal text of a template that has no references.
    public var literalText: String? {
        guard case .text(let template) = self, template.isLiteral else { return nil }
        return template.render(TemplateScope())
    }
}
