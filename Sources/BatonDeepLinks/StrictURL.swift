/// An absolute URL read by strict rules, for deep links and `openUrl` targets.
///
/// Browsers and URL libraries repair what they are given (strip tabs, turn `\` into `/`, read
/// `0x7f.1` as an address, skip extra slashes) and disagree with each other while doing it;
/// every repair is a way for a link to mean one thing to the check and another to the app. So
/// nothing is repaired here: anything a repair would be needed for is rejected with a
/// ``DeepLinkReason``. What is accepted is a subset of RFC 3986 that the WHATWG URL Standard
/// reads the same way (the tests hold it to that). Hosts are the one thing compared without
/// regard to case, because DNS names are.
public struct StrictURL: Sendable, Hashable, CustomStringConvertible {
    /// Links longer than this are refused unread (bytes of UTF-8).
    public static let maxBytes = 2048
    /// Schemes that always have a host (the URL Standard's "special" schemes but `file`, which is
    /// refused outright); `https:host` without `//` is refused rather than read as a browser would.
    public static let hierarchicalSchemes: Set<String> = ["http", "https", "ws", "wss", "ftp"]
    /// The port a scheme uses when none is written, so that writing it is not a different URL.
    public static let defaultPorts: [String: Int] = ["http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21]

    /// The text as given.
    public let text: String
    /// Lowercase, as written (an uppercase scheme is refused, not lowered).
    public let scheme: String
    /// Lowercased host name; `nil` for opaque URLs such as `tel:` and `mailto:`.
    public let host: String?
    /// The port written after the host, if any.
    public let port: Int?
    /// The path as written, still percent-encoded; for an opaque URL everything between the
    /// scheme and `?` or `#` (`+4412345` for `tel:+4412345`).
    public let path: String
    /// The path's segments as written (percent-encoded); empty for `""` and `/`. A trailing
    /// slash leaves a final empty segment, so `/a/` is not `/a`.
    public let pathSegments: [String]
    /// The query's parameters in order, values percent-decoded; `nil` when there is no `?`.
    public let query: [QueryParameter]?
    /// The fragment as written, without `#`.
    public let fragment: String?

    /// Whether the URL has no `//host` (`tel:`, `mailto:`).
    public var isOpaque: Bool { host == nil }

    /// Whether the port is absent or the scheme's default written out.
    public var hasDefaultPort: Bool { port == nil || port == Self.defaultPorts[scheme] }

    public var description: String { text }

    /// Parses `text`, or says why not.
    public static func parse(_ text: String) -> Result<StrictURL, URLRejection> {
        do {
            return .success(try StrictURL(parsing: text))
        } catch {
            return .failure(error)
        }
    }

    /// Parses `text`, throwing the first rule it breaks.
    public init(parsing text: String) throws(URLRejection) {
        self.text = text
        let bytes = Array(text.utf8)
        guard bytes.count <= Self.maxBytes else {
            throw URLRejection(.tooLong, "the URL is \(bytes.count) bytes long; links are at most \(Self.maxBytes)")
        }
        // Checked on the whole text first: these are what parsers silently drop or reinterpret
        // (`java\tscript:`, `https:\\evil`, invisible direction marks), wherever they stand.
        for (offset, scalar) in text.unicodeScalars.enumerated() where Self.isRefusedEverywhere(scalar) {
            throw URLRejection(.badCharacter, "\(Self.name(of: scalar)) at character \(offset + 1); URLs never contain it unencoded")
        }

        guard let colon = bytes.firstIndex(of: Byte.colon),
            !bytes[..<colon].contains(where: { $0 == Byte.slash || $0 == Byte.question || $0 == Byte.hash })
        else {
            throw URLRejection(.badScheme, "no scheme: links must be absolute, such as https://host/path or exampleapp://host")
        }
        scheme = try Self.scheme(bytes[..<colon])
        // file: hosts follow rules of their own (localhost means none, no ports, drive
        // letters); a link never needs one, so none is read.
        guard scheme != "file" else { throw URLRejection(.badScheme, "file: URLs are never links") }

        // Split off the fragment and query first, then check the parts in reading order, so that
        // the reason given is the first problem a reader would meet.
        var rest = bytes[(colon + 1)...]
        var fragmentBytes: ArraySlice<UInt8>?
        if let hash = rest.firstIndex(of: Byte.hash) {
            fragmentBytes = rest[(hash + 1)...]
            rest = rest[..<hash]
        }
        var queryBytes: ArraySlice<UInt8>?
        if let question = rest.firstIndex(of: Byte.question) {
            queryBytes = rest[(question + 1)...]
            rest = rest[..<question]
        }

        if rest.starts(with: [Byte.slash, Byte.slash]) {
            let authorityStart = rest.startIndex + 2
            let authorityEnd = rest[authorityStart...].firstIndex(of: Byte.slash) ?? rest.endIndex
            let (host, port) = try Self.authority(rest[authorityStart..<authorityEnd])
            self.host = host
            self.port = port
            let pathBytes = rest[authorityEnd...]
            path = String(decoding: pathBytes, as: UTF8.self)
            pathSegments = try Self.segments(pathBytes)
        } else {
            guard !Self.hierarchicalSchemes.contains(scheme) else {
                throw URLRejection(.badScheme, "\(scheme): URLs must continue with '//' and a host")
            }
            try Self.checkCharacters(rest, allowing: [Byte.slash], in: "the path")
            guard Self.percentDecode(rest) != nil else { throw URLRejection(.badPath, "malformed percent-encoding in '\(Self.shown(rest))'") }
            host = nil
            port = nil
            path = String(decoding: rest, as: UTF8.self)
            pathSegments = []
        }
        query = try queryBytes.map(Self.parameters)
        fragment = try fragmentBytes.map(Self.fragment)
    }

    // MARK: Components

    /// Whether `text` is a scheme as links must write it (`exampleapp`, `tel`).
    static func isScheme(_ text: String) -> Bool {
        (try? scheme(ArraySlice(text.utf8))) != nil
    }

    private static func scheme(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let first = bytes.first, Byte.isLowercaseLetter(first) || Byte.isUppercaseLetter(first) else {
            throw URLRejection(.badScheme, "the scheme '\(text)' must start with a letter")
        }
        for byte in bytes {
            if Byte.isUppercaseLetter(byte) {
                throw URLRejection(.badScheme, "the scheme '\(text)' must be written in lowercase")
            }
            guard Byte.isLowercaseLetter(byte) || Byte.isDigit(byte) || byte == Byte.plus || byte == Byte.minus || byte == Byte.dot else {
                throw URLRejection(.badScheme, "the scheme '\(text)' may only have letters, digits, '+', '-' and '.'")
            }
        }
        return text
    }

    private static func authority(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> (String, Int?) {
        guard !bytes.isEmpty else { throw URLRejection(.badHost, "the host is empty") }
        if let at = bytes.lastIndex(of: Byte.at) {
            let shown = String(decoding: bytes[...at], as: UTF8.self)
            throw URLRejection(
                .userinfo, "'\(shown)' before the host is userinfo; links never carry it (the host is what follows the '@')")
        }
        guard bytes.first != Byte.openBracket else {
            throw URLRejection(.badHost, "IP address hosts are not accepted")
        }
        let colon = bytes.firstIndex(of: Byte.colon)
        let host = try Self.host(bytes[..<(colon ?? bytes.endIndex)])
        guard let colon else { return (host, nil) }
        return (host, try Self.port(bytes[(colon + 1)...]))
    }

    private static func host(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> String {
        let shown = String(decoding: bytes, as: UTF8.self)
        guard !bytes.isEmpty else { throw URLRejection(.badHost, "the host is empty") }
        guard bytes.allSatisfy({ $0 < 0x80 }) else {
            throw URLRejection(
                .badHost, "the host '\(shown)' is not ASCII; internationalised hosts are accepted only in their xn-- form")
        }
        guard !bytes.contains(Byte.percent) else {
            throw URLRejection(.badHost, "the host '\(shown)' is percent-encoded; hosts are written as plain names")
        }
        let lowered = bytes.map { Byte.isUppercaseLetter($0) ? $0 | 0x20 : $0 }
        if let odd = lowered.first(where: { !(Byte.isLowercaseLetter($0) || Byte.isDigit($0) || $0 == Byte.minus || $0 == Byte.dot) }) {
            throw URLRejection(.badHost, "'\(Byte.shown(odd))' is not allowed in a host name ('\(shown)')")
        }
        let labels = lowered.split(separator: Byte.dot, omittingEmptySubsequences: false)
        if labels.count > 1, labels.last!.isEmpty {
            throw URLRejection(.badHost, "the host '\(shown)' ends with a dot")
        }
        for label in labels {
            guard !label.isEmpty else { throw URLRejection(.badHost, "the host '\(shown)' has an empty label (a leading dot or '..')") }
            guard label.first != Byte.minus, label.last != Byte.minus else {
                throw URLRejection(.badHost, "a label of the host '\(shown)' starts or ends with '-'")
            }
            guard label.count <= 63 else { throw URLRejection(.badHost, "a label of the host '\(shown)' is longer than 63 characters") }
        }
        guard lowered.count <= 253 else { throw URLRejection(.badHost, "the host is longer than 253 characters") }
        // The URL Standard reads a host whose last label is a number as an IPv4 address, in
        // decimal, octal or hex and with parts left out (127.1, 0x7f.1, 2130706433); none of
        // those forms is a name, so they all go, and so do plain dotted quads.
        let last = labels.last!
        let isHexNumber = last.count >= 2 && last.prefix(2).elementsEqual([Byte.zero, Byte.lowercaseX]) && last.dropFirst(2).allSatisfy(Byte.isHexDigit)
        if last.allSatisfy(Byte.isDigit) || isHexNumber {
            throw URLRejection(.badHost, "the host '\(shown)' is an IP address or ends in a number; only names are accepted")
        }
        return String(decoding: lowered, as: UTF8.self)
    }

    private static func port(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> Int {
        let shown = String(decoding: bytes, as: UTF8.self)
        guard !bytes.isEmpty else { throw URLRejection(.badPort, "':' after the host without a port number") }
        guard bytes.allSatisfy(Byte.isDigit) else { throw URLRejection(.badPort, "the port '\(shown)' is not a number") }
        guard bytes.first != Byte.zero else { throw URLRejection(.badPort, "the port '\(shown)' has leading zeros") }
        guard bytes.count <= 5, let number = Int(shown), number <= 65535 else {
            throw URLRejection(.badPort, "the port '\(shown)' is above 65535")
        }
        return number
    }

    private static func segments(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> [String] {
        try checkCharacters(bytes, allowing: [Byte.slash], in: "the path")
        guard bytes.count > 1 else { return [] }  // "" and "/" are both the root
        let segments = bytes.dropFirst().split(separator: Byte.slash, omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            if segment.isEmpty, index < segments.count - 1 {
                throw URLRejection(.badPath, "the path has an empty segment ('//')")
            }
            let text = shown(segment)
            guard let decoded = percentDecode(segment) else {
                throw URLRejection(.badPath, "malformed percent-encoding in the path segment '\(text)'")
            }
            if !decoded.isEmpty, decoded.allSatisfy({ $0 == Byte.dot }) {
                throw URLRejection(.badPath, "the path has a dot segment ('\(text)')")
            }
            if decoded.contains(Byte.slash) || decoded.contains(Byte.backslash) {
                throw URLRejection(.badPath, "the path segment '\(text)' encodes a slash or backslash")
            }
            if decoded.contains(where: { $0 < 0x20 || $0 == 0x7F }) {
                throw URLRejection(.badPath, "the path segment '\(text)' encodes a control character")
            }
            guard String(validating: decoded, as: UTF8.self) != nil else {
                throw URLRejection(.badPath, "the path segment '\(text)' does not decode to UTF-8 text")
            }
        }
        return segments.map { String(decoding: $0, as: UTF8.self) }
    }

    private static func parameters(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> [QueryParameter] {
        try checkCharacters(bytes, allowing: Byte.queryExtras, in: "the query")
        guard !bytes.isEmpty else { return [] }
        var parameters: [QueryParameter] = []
        for pair in bytes.split(separator: Byte.ampersand, omittingEmptySubsequences: false) {
            guard !pair.isEmpty else { throw URLRejection(.badQuery, "the query has an empty parameter ('&&', or '&' at an end)") }
            let shown = String(decoding: pair, as: UTF8.self)
            guard let equals = pair.firstIndex(of: Byte.equals) else {
                throw URLRejection(.badQuery, "the query parameter '\(shown)' has no '=' and value")
            }
            let name = pair[..<equals]
            guard !name.isEmpty else { throw URLRejection(.badQuery, "the query parameter '\(shown)' has no name") }
            // Names are compared as written: a percent-encoded name would be a second spelling.
            guard name.allSatisfy({ Byte.isLowercaseLetter($0) || Byte.isUppercaseLetter($0) || Byte.isDigit($0) || $0 == Byte.underscore || $0 == Byte.minus || $0 == Byte.dot }) else {
                throw URLRejection(.badQuery, "the query parameter name '\(String(decoding: name, as: UTF8.self))' may only have letters, digits, '_', '-' and '.'")
            }
            guard let decoded = percentDecode(pair[(equals + 1)...]), let value = String(validating: decoded, as: UTF8.self) else {
                throw URLRejection(.badQuery, "the value of '\(String(decoding: name, as: UTF8.self))' has malformed percent-encoding or is not UTF-8")
            }
            parameters.append(QueryParameter(name: String(decoding: name, as: UTF8.self), value: value))
        }
        return parameters
    }

    private static func fragment(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> String {
        try checkCharacters(bytes, allowing: Byte.queryExtras, in: "the fragment")
        guard percentDecode(bytes) != nil else { throw URLRejection(.fragment, "malformed percent-encoding in the fragment") }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: Characters

    /// Whitespace (any script's), control and format characters (direction marks, zero-width
    /// joiners), and the backslash that browsers read as `/`.
    static func isRefusedEverywhere(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\\" || scalar.properties.isWhitespace
            || scalar.properties.generalCategory == .format
    }

    /// Refuses non-ASCII and the ASCII characters RFC 3986 never allows unencoded in a path,
    /// query or fragment (`"<>[]^`{|}` and friends). `extras` adds to the path characters.
    private static func checkCharacters(_ bytes: ArraySlice<UInt8>, allowing extras: Set<UInt8>, in component: String) throws(URLRejection) {
        for byte in bytes where !(Byte.isPathCharacter(byte) || extras.contains(byte)) {
            if byte >= 0x80 {
                throw URLRejection(.badCharacter, "non-ASCII text in \(component); it must be percent-encoded UTF-8")
            }
            throw URLRejection(.badCharacter, "'\(Byte.shown(byte))' is not allowed unencoded in \(component)")
        }
    }

    /// Percent-decodes `bytes`; `nil` when a `%` is not followed by two hex digits.
    static func percentDecode(_ bytes: some Collection<UInt8>) -> [UInt8]? {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            guard byte == Byte.percent else {
                output.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(Byte.hexValue), let low = iterator.next().flatMap(Byte.hexValue) else { return nil }
            output.append(high << 4 | low)
        }
        return output
    }

    /// Percent-decodes `text` into UTF-8 text; `nil` when malformed or not UTF-8.
    static func percentDecoded(_ text: some StringProtocol) -> String? {
        percentDecode(text.utf8).flatMap { String(validating: $0, as: UTF8.self) }
    }

    private static func shown(_ bytes: ArraySlice<UInt8>) -> String { String(decoding: bytes, as: UTF8.self) }

    private static func name(of scalar: Unicode.Scalar) -> String {
        var hex = String(scalar.value, radix: 16, uppercase: true)
        while hex.count < 4 { hex = "0" + hex }
        let names: [UInt32: String] = [
            0x09: "a tab", 0x0A: "a line feed", 0x0D: "a carriage return", 0x20: "a space", 0x00: "a NUL", 0x5C: "a backslash",
        ]
        return names[scalar.value].map { "\($0) (U+\(hex))" } ?? "U+\(hex)"
    }
}

/// One `name=value` of a query, the value percent-decoded (`+` stays `+`).
public struct QueryParameter: Sendable, Hashable {
    public let name: String
    public let value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// ASCII bytes by name, so the parser reads as the rules it implements.
enum Byte {
    static let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/"), backslash = UInt8(ascii: "\\")
    static let question = UInt8(ascii: "?"), hash = UInt8(ascii: "#"), at = UInt8(ascii: "@")
    static let percent = UInt8(ascii: "%"), dot = UInt8(ascii: "."), minus = UInt8(ascii: "-"), plus = UInt8(ascii: "+")
    static let underscore = UInt8(ascii: "_"), equals = UInt8(ascii: "="), ampersand = UInt8(ascii: "&"), comma = UInt8(ascii: ",")
    static let openBracket = UInt8(ascii: "["), zero = UInt8(ascii: "0"), lowercaseX = UInt8(ascii: "x")
    static let queryExtras: Set<UInt8> = [slash, question]

    /// An ASCII byte as text for messages.
    static func shown(_ byte: UInt8) -> String { String(decoding: [byte], as: UTF8.self) }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    static func isLowercaseLetter(_ byte: UInt8) -> Bool { byte >= 0x61 && byte <= 0x7A }
    static func isUppercaseLetter(_ byte: UInt8) -> Bool { byte >= 0x41 && byte <= 0x5A }
    static func isHexDigit(_ byte: UInt8) -> Bool { hexValue(byte) != nil }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// RFC 3986 `pchar`: unreserved, sub-delims, `:`, `@`, and `%` (its escapes are checked
    /// where the component is decoded).
    static func isPathCharacter(_ byte: UInt8) -> Bool {
        if isLowercaseLetter(byte) || isUppercaseLetter(byte) || isDigit(byte) { return true }
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
            UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "%"):
            return true
        default:
            return false
        }
    }
}
