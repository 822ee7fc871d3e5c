import BatonFlows

/// The deep links Baton opens and the URLs its screens may send people to, read from
/// `Flows/deeplinks.yaml` (format in `docs/deeplinks.md`). Build one with
/// ``load(source:file:)``; ask it with ``match(_:platform:)``, ``outbound(_:)`` and
/// ``explain(_:platform:)``.
public struct DeepLinkAllowlist: Sendable {
    /// Incoming links, tried in file order; the first whose URL pattern fits decides.
    public let entries: [DeepLinkEntry]
    /// Where `openUrl` actions may point, one rule per scheme.
    public let outbound: [OutboundRule]

    init(entries: [DeepLinkEntry], outbound: [OutboundRule]) {
        self.entries = entries
        self.outbound = outbound
    }
}

/// One kind of incoming link: the URLs that spell it, what its parameters may hold, the
/// platforms that may open it, and the flow or screen it leads to.
public struct DeepLinkEntry: Sendable {
    /// The entry's key in the file (`scan-and-go`); shown in decisions and explanations.
    public let name: String
    /// The URL shapes that lead here, such as `exampleapp://scan-and-go` and its universal link.
    public let urls: [LinkPattern]
    /// Rules for the `{name}` segments of ``urls`` (every URL of an entry has the same ones).
    public let pathParameters: [LinkParameter]
    /// The query parameters the link may carry; any other is refused.
    public let queryParameters: [LinkParameter]
    public let platforms: Set<DeepLinkPlatform>
    public let target: DeepLinkTarget
    /// Which link parameter fills which parameter of the target.
    public let parameterMap: [ParameterMapping]
    public let location: SourceLocation
    /// Where the target is named, for lint messages.
    public let targetLocation: SourceLocation
}

/// Where an allowed deep link leads.
public enum DeepLinkTarget: Sendable, Hashable, CustomStringConvertible {
    /// Start this flow with the link's parameters.
    case flow(String)
    /// Show this screen with the link's parameters.
    case screen(String)

    public var name: String {
        switch self {
        case .flow(let name), .screen(let name): name
        }
    }

    public var description: String {
        switch self {
        case .flow(let name): "flow \(name)"
        case .screen(let name): "screen \(name)"
        }
    }
}

/// The client kinds an entry may allow. A closed list so that a misspelt platform in the file
/// is an error rather than an entry nobody can open.
public enum DeepLinkPlatform: String, Sendable, Hashable, CaseIterable, Comparable {
    case ios, android, web, appclip, widget, other

    public static func < (a: DeepLinkPlatform, b: DeepLinkPlatform) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// A URL shape of an entry: scheme, host, optional port and path, where a path segment is
/// either exact text or a `{name}` parameter that takes one whole segment.
public struct LinkPattern: Sendable, CustomStringConvertible {
    /// One path segment of a pattern.
    public enum Segment: Sendable, Hashable {
        /// Must equal the URL's segment as written (percent-encoding included).
        case literal(String)
        /// Takes the URL's segment, percent-decoded, as the parameter's value.
        case parameter(String)
    }

    public let scheme: String
    /// Lowercase host name.
    public let host: String
    /// A port the link must carry; `nil` for the scheme's default (or none).
    public let port: Int?
    public let segments: [Segment]
    /// The pattern as written in the file.
    public let text: String
    public let location: SourceLocation

    public var description: String { text }

    /// The names of the `{name}` segments, in order.
    public var parameterNames: [String] {
        segments.compactMap {
            if case .parameter(let name) = $0 { return name }
            return nil
        }
    }
}

/// What one link parameter may hold: the whole value must match `pattern` and be at most
/// `maxLength` bytes of UTF-8, after percent-decoding.
public struct LinkParameter: Sendable {
    public let name: String
    /// Path parameters are always required; query parameters unless `required: false`.
    public let required: Bool
    public let pattern: String
    public let maxLength: Int
    public let location: SourceLocation

    /// Whether `value` is acceptable; `nil` when it is, else why not.
    func problem(with value: String) -> String? {
        if value.utf8.count > maxLength {
            return "'\(name)' is \(value.utf8.count) bytes long; at most \(maxLength)"
        }
        if !PatternCache.wholeMatch(pattern, value) {
            return "'\(name)' = \(value.debugDescription) does not match \(pattern)"
        }
        return nil
    }
}

/// One line of an entry's `params:`: the target's parameter and the link parameter it takes.
public struct ParameterMapping: Sendable {
    public let targetParameter: String
    public let linkParameter: String
    public let location: SourceLocation
}

/// Where `openUrl` actions of one scheme may point: any URL of the scheme, only listed hosts
/// (for `https`), or only opaque URLs whose text after the colon matches a pattern (`tel:`).
public struct OutboundRule: Sendable {
    public let scheme: String
    /// Allowed hosts; empty means any host (never for `http`/`https`, which must list them).
    public let hosts: [String]
    /// Ports allowed besides the scheme's default.
    public let ports: Set<Int>
    /// For opaque URLs (`tel:`, `mailto:`): what must follow the colon, as a whole match.
    public let pattern: String?
    public let location: SourceLocation
}
