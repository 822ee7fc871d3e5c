import BatonJSON
import Yams

/// A YAML value with the position it came from, so every later error can point at it.
public indirect enum SourceNode: Sendable {
    case scalar(SourceScalar)
    case mapping([(key: SourceScalar, value: SourceNode)], SourceLocation)
    case sequence([SourceNode], SourceLocation)

    public var location: SourceLocation {
        switch self {
        case .scalar(let scalar): scalar.location
        case .mapping(_, let location), .sequence(_, let location): location
        }
    }

    /// A short name of the node's kind for messages ("a mapping", "a list", "text").
    public var kindDescription: String {
        switch self {
        case .scalar: "a scalar"
        case .mapping: "a mapping"
        case .sequence: "a list"
        }
    }

    /// The value under `key` of a mapping.
    public subscript(key: String) -> SourceNode? {
        guard case .mapping(let pairs, _) = self else { return nil }
        return pairs.first { $0.key.text == key }?.value
    }

    /// The key node for `key` (for pointing at the key rather than its value).
    public func keyNode(_ key: String) -> SourceScalar? {
        guard case .mapping(let pairs, _) = self else { return nil }
        return pairs.first { $0.key.text == key }?.key
    }

    /// Converts to a JSON value. Plain scalars become numbers, booleans or null when they
    /// look like one (`12`, `true`, `null`, `~`); quoted scalars always stay text.
    public var jsonValue: JSONValue {
        switch self {
        case .scalar(let scalar): return scalar.jsonValue
        case .mapping(let pairs, _):
            var object = JSONObject()
            for (key, value) in pairs { object[key.text] = value.jsonValue }
            return .object(object)
        case .sequence(let items, _): return .array(items.map(\.jsonValue))
        }
    }
}

/// A scalar with its text, whether it was quoted, and where it is.
public struct SourceScalar: Sendable {
    public var text: String
    public var quoted: Bool
    public var location: SourceLocation

    public var jsonValue: JSONValue {
        guard !quoted else { return .string(text) }
        switch text {
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        case "null", "Null", "NULL", "~", "": return .null
        default:
            if let integer = Int(text) { return .int(integer) }
            if text.contains("."), let number = Double(text), number.isFinite { return .double(number) }
            return .string(text)
        }
    }
}

/// Parses YAML into ``SourceNode``s, refusing what flow files have no use for and what could
/// hurt: duplicate keys (YAML forbids them; most parsers silently keep one), anchors and aliases
/// (no sharing is needed, and alias bombs expand exponentially), more than 64 levels of
/// nesting, or more than 200 000 nodes.
public enum YAMLSource {
    public static let maxDepth = 64
    public static let maxNodes = 200_000
    /// Flow and screen files larger than this are refused unread (1 MiB).
    public static let maxBytes = 1 << 20

    /// Parses `text` (from `file`, for locations). Errors come back as diagnostics.
    public static func parse(_ text: String, file: String) -> Result<SourceNode, Diagnostic> {
        guard text.utf8.count <= maxBytes else {
            return .failure(.error("the file is larger than \(maxBytes / 1024) KiB", at: SourceLocation(file: file, line: 1, column: 1)))
        }
        // The YAML composer recurses once per level: refuse deep nesting before it runs.
        if let problem = nestingProblem(in: text) {
            return .failure(.error(problem.message, at: SourceLocation(file: file, line: problem.line, column: problem.column)))
        }
        if let problem = aliasUse(in: text) ?? YAMLStrictness.problem(in: text) {
            return .failure(.error(problem.message, at: SourceLocation(file: file, line: problem.line, column: problem.column)))
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            return .failure(diagnostic(error, file: file))
        } catch {
            return .failure(.error("not valid YAML: \(error)", at: SourceLocation(file: file, line: 1, column: 1)))
        }
        guard let root else {
            return .failure(.error("the file is empty", at: SourceLocation(file: file, line: 1, column: 1)))
        }
        var budget = maxNodes
        do {
            return .success(try convert(root, file: file, depth: 0, budget: &budget))
        } catch let diagnostic as Diagnostic {
            return .failure(diagnostic)
        } catch {
            return .failure(.error("\(error)", at: SourceLocation(file: file, line: 1, column: 1)))
        }
    }

    private static func convert(_ node: Node, file: String, depth: Int, budget: inout Int) throws -> SourceNode {
        let location = SourceLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
        budget -= 1
        guard budget >= 0 else { throw Diagnostic.error("the document has more than \(maxNodes) nodes", at: location) }
        guard depth <= maxDepth else { throw Diagnostic.error("nesting deeper than \(maxDepth) levels", at: location) }
        switch node {
        case .scalar(let scalar):
            return .scalar(SourceScalar(text: scalar.string, quoted: scalar.style != .plain && scalar.style != .any, location: location))
        case .mapping(let mapping):
            var pairs: [(key: SourceScalar, value: SourceNode)] = []
            var seen: [String: SourceLocation] = [:]
            for (keyNode, valueNode) in mapping {
                guard case .scalar(let key) = try convert(keyNode, file: file, depth: depth + 1, budget: &budget) else {
                    throw Diagnostic.error("mapping keys must be plain text", at: location)
                }
                if let first = seen[key.text] {
                    throw Diagnostic.error("duplicate key '\(key.text)' (first at line \(first.line))", at: key.location)
                }
                seen[key.text] = key.location
                pairs.append((key, try convert(valueNode, file: file, depth: depth + 1, budget: &budget)))
            }
            return .mapping(pairs, location)
        case .sequence(let sequence):
            return .sequence(try sequence.map { try convert($0, file: file, depth: depth + 1, budget: &budget) }, location)
        case .alias:
            throw Diagnostic.error("YAML aliases are not supported in Baton files", at: location)
        }
    }

    /// Finds nesting deeper than ``maxDepth``: flow brackets (`[`, `{`) outside quotes, or block
    /// nesting estimated from indentation and `- ` prefixes. Conservative and linear.
    static func nestingProblem(in text: String) -> (message: String, line: Int, column: Int)? {
        var depth = 0
        var line = 1
        var column = 0
        var quote: UInt8?
        var escaped = false
        var atLineStart = true
        var indent = 0
        var comment = false
        // A line's indicators (`- `, `? `) nest as deep as its indentation; a line made of them
        // alone (`- - - …`, to its end or the file's) nests as deep, so it is measured there too.
        var indicators = false
        // Two marks in a row (`----`, a rule in a block of text) are text, not indicators.
        var previous: UInt8 = 0
        var prose = false
        func tooDeep() -> Bool { indicators && !prose && indent / 2 > maxDepth * 2 }
        for byte in text.utf8 {
            column += 1
            if byte == UInt8(ascii: "\n") {
                if atLineStart, tooDeep() { return ("nesting deeper than \(maxDepth) levels", line, column) }
                line += 1
                column = 0
                atLineStart = true
                indent = 0
                indicators = false
                prose = false
                previous = 0
                comment = false
                if quote == UInt8(ascii: "'") { quote = nil }
                continue
            }
            if comment { continue }
            if atLineStart {
                if byte == UInt8(ascii: " ") {
                    indent += 1
                    previous = byte
                    continue
                }
                if byte == UInt8(ascii: "-") || byte == UInt8(ascii: "?") {
                    if previous == UInt8(ascii: "-") || previous == UInt8(ascii: "?") { prose = true }
                    previous = byte
                    indent += 2
                    indicators = true
                    continue
                }
                atLineStart = false
                if indent / 2 > maxDepth * 2 {
                    return ("nesting deeper than \(maxDepth) levels", line, column)
                }
            }
            if let open = quote {
                if escaped { escaped = false } else if open == UInt8(ascii: "\"") && byte == UInt8(ascii: "\\") { escaped = true } else if byte == open { quote = nil }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "'"): quote = byte
            case UInt8(ascii: "#"): comment = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > maxDepth { return ("nesting deeper than \(maxDepth) levels", line, column) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth = max(0, depth - 1)
            default: break
            }
        }
        if atLineStart, tooDeep() { return ("nesting deeper than \(maxDepth) levels", line, column) }
        return nil
    }

    /// Finds an anchor (`&name`) or alias (`*name`) outside quoted text and comments. Yams
    /// resolves aliases while composing and keeps anchors only weakly, so they are found in the
    /// text: a conservative scan that never misses one (at worst it flags `&` in odd places).
    static func aliasUse(in text: String) -> (message: String, line: Int, column: Int)? {
        var line = 1
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            defer { line += 1 }
            var quote: Character?
            var escaped = false
            var previous: Character = " "
            var column = 0
            for character in rawLine {
                column += 1
                defer { previous = character }
                if let open = quote {
                    if escaped {
                        escaped = false
                    } else if open == "\"" && character == "\\" {
                        escaped = true
                    } else if character == open {
                        quote = nil
                    }
                    continue
                }
                switch character {
                case "\"", "'":
                    if previous == " " || previous == ":" || previous == "[" || previous == "{" || previous == "," || previous == "-" {
                        quote = character
                    }
                case "#" where previous == " " || column == 1:
                    break
                case "&", "*":
                    // Anchors and aliases start a node: after indentation, `- `, `: `, `[`, `{` or `,`.
                    let before = rawLine.prefix(column - 1).trimmingTrailingSpaces
                    if before.isEmpty || before.hasSuffix(":") || before.hasSuffix("-") || before.hasSuffix("[")
                        || before.hasSuffix("{") || before.hasSuffix(",") || before.hasSuffix("!")
                    {
                        let kind = character == "&" ? "anchors (&name)" : "aliases (*name)"
                        return ("YAML \(kind) are not supported in Baton files; repeat the value instead", line, column)
                    }
                default:
                    break
                }
                if character == "#", previous == " " || column == 1 { break }
            }
        }
        return nil
    }

    private static func diagnostic(_ error: YamlError, file: String) -> Diagnostic {
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _),
            .composer(let context, let problem, let mark, _):
            // What libyaml was reading names where the mistake began: an unclosed quote is found
            // only at the end of the file, and its context is the quote's place.
            let started = context.map { " \($0.text) (from line \($0.mark.line), column \($0.mark.column))" } ?? ""
            return .error("YAML syntax: \(problem)\(started)", at: SourceLocation(file: file, line: mark.line, column: mark.column))
        case .duplicatedKeysInMapping(let duplicates, let context):
            let keys = duplicates.map { "'\($0)'" }.joined(separator: ", ")
            return .error(
                "duplicate key \(keys) in one mapping (YAML keys must be unique)",
                at: SourceLocation(file: file, line: context.mark.line, column: context.mark.column))
        default:
            return .error("YAML syntax: \(error)", at: SourceLocation(file: file, line: 1, column: 1))
        }
    }
}

extension Substring {
    fileprivate var trimmingTrailingSpaces: Substring {
        var text = self
        while text.last == " " || text.last == "\t" { text = text.dropLast() }
        return text
    }
}
