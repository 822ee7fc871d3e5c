import Foundation

extension JSONValue: Codable {
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let number = try? container.decode(Int.self) {
            self = .int(number)
        } else if let number = try? container.decode(Double.self) {
            self = .double(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let elements = try? container.decode([JSONValue].self) {
            self = .array(elements)
        } else {
            // Foundation hands objects over as a dictionary; sort keys so the result is stable.
            let members = try container.decode([String: JSONValue].self)
            var object = JSONObject()
            for key in members.keys.sorted() { object[key] = members[key] }
            self = .object(object)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(Dictionary(uniqueKeysWithValues: value.map { ($0.key, $0.value) }))
        }
    }
}

extension JSONValue {
    /// Why a document could not be parsed.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Parses a JSON document (RFC 8259; any top-level value). Nesting deeper than
    /// `maxDepth` is refused before parsing, so hostile input cannot exhaust the stack.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws -> JSONValue {
        let data = Data(bytes)
        var depth = 0
        var deepest = 0
        var inString = false
        var escaped = false
        for byte in data {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                deepest = max(deepest, depth)
                if deepest > maxDepth { throw ParseError(description: "nested more than \(maxDepth) levels deep") }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        do {
            return try JSONDecoder().decode(JSONValue.self, from: data)
        } catch let error as DecodingError {
            throw ParseError(description: describe(error))
        } catch {
            throw ParseError(description: "not valid JSON")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .dataCorrupted(let context):
            if let underlying = context.underlyingError as? NSError,
                let detail = underlying.userInfo[NSDebugDescriptionErrorKey] as? String
            {
                return "not valid JSON: \(detail)"
            }
            return "not valid JSON: \(context.debugDescription)"
        default:
            return "not valid JSON"
        }
    }
}
