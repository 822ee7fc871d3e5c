/// Why a link was rejected or an `openUrl` target blocked. The label is the `reason` value of
/// `baton_deeplinks_total{result,reason}`, so the set is small, fixed and never carries input;
/// a struct rather than an enum so that a new reason never breaks a caller's `switch`.
public struct DeepLinkReason: Sendable, Hashable, CustomStringConvertible {
    /// The metric label value, such as `bad_host`.
    public let label: String

    private init(_ label: String) { self.label = label }

    public var description: String { label }

    // MARK: The URL itself (StrictURL)

    /// Longer than ``StrictURL/maxBytes``.
    public static let tooLong = DeepLinkReason("too_long")
    /// Whitespace, a control character, a backslash, non-ASCII outside the host, or an ASCII
    /// character URLs never carry unencoded (`"<>[]^`{|}`).
    public static let badCharacter = DeepLinkReason("bad_character")
    /// No scheme (a relative URL), a malformed or uppercase scheme, or `https:` without `//`.
    public static let badScheme = DeepLinkReason("bad_scheme")
    /// `user@` or `user:password@` before the host.
    public static let userinfo = DeepLinkReason("userinfo")
    /// Empty, percent-encoded, non-ASCII, an IP address in any form, a trailing dot, an empty
    /// label, or a character a host name never has.
    public static let badHost = DeepLinkReason("bad_host")
    /// A malformed port, or one the allowlist does not list.
    public static let badPort = DeepLinkReason("bad_port")
    /// Dot segments (also encoded), encoded `/`, `\` or control characters, `//`, bad
    /// percent-encoding; for an opaque outbound URL, a path its rule's pattern refuses.
    public static let badPath = DeepLinkReason("bad_path")
    /// A parameter without `=` or name, a percent-encoded name, or bad percent-encoding.
    public static let badQuery = DeepLinkReason("bad_query")
    /// A `#fragment` on a deep link (links carry their data in the path and query), or a
    /// malformed one on an outbound URL.
    public static let fragment = DeepLinkReason("fragment")

    // MARK: Matching a deep link against the allowlist

    /// No entry has this scheme, host and path.
    public static let noMatchingEntry = DeepLinkReason("no_matching_entry")
    /// The entry exists but not for this platform (or the platform is unknown).
    public static let platformNotAllowed = DeepLinkReason("platform_not_allowed")
    /// A required query parameter is absent.
    public static let parameterMissing = DeepLinkReason("parameter_missing")
    /// A parameter's value is longer than its cap or does not match its pattern.
    public static let parameterInvalid = DeepLinkReason("parameter_invalid")
    /// A query parameter the entry does not list.
    public static let unknownParameter = DeepLinkReason("unknown_parameter")
    /// A query parameter given more than once.
    public static let repeatedParameter = DeepLinkReason("repeated_parameter")

    // MARK: Outbound (openUrl) targets

    /// No outbound rule lists the scheme.
    public static let schemeNotAllowed = DeepLinkReason("scheme_not_allowed")
    /// The scheme's rule lists hosts and this is not one of them.
    public static let hostNotAllowed = DeepLinkReason("host_not_allowed")

    // MARK: mailto: targets (RFC 6068 header fields)

    /// A header field other than `subject` and `body` (`cc`, `bcc` and `to` add recipients the
    /// rule never saw; others set headers).
    public static let mailtoHeaderNotAllowed = DeepLinkReason("mailto_header_not_allowed")
    /// `subject` or `body` given more than once (clients disagree on which one wins).
    public static let mailtoRepeatedHeader = DeepLinkReason("mailto_repeated_header")
    /// Malformed or missing percent-encoding in an address or a field, a field that is not
    /// `name=value`, a control character in the subject, or a `#`.
    public static let mailtoBadEncoding = DeepLinkReason("mailto_bad_encoding")

    /// Every reason, for registering the metric's label values up front and for the docs.
    public static let all: [DeepLinkReason] = [
        .tooLong, .badCharacter, .badScheme, .userinfo, .badHost, .badPort, .badPath, .badQuery, .fragment,
        .noMatchingEntry, .platformNotAllowed, .parameterMissing, .parameterInvalid, .unknownParameter,
        .repeatedParameter, .schemeNotAllowed, .hostNotAllowed, .mailtoHeaderNotAllowed, .mailtoRepeatedHeader, .mailtoBadEncoding,
    ]
}

/// Why ``StrictURL`` refused a text: the bounded reason plus a sentence for people (logs, the
/// check command). The sentence may quote the input, so it never becomes a metric label.
public struct URLRejection: Error, Sendable, Hashable, CustomStringConvertible {
    public let reason: DeepLinkReason
    public let detail: String

    public init(_ reason: DeepLinkReason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }

    public var description: String { "\(reason.label): \(detail)" }
}
