/// A `mailto:` URL read the way a mail client reads it (RFC 6068): the addresses before `?`, then
/// header fields. Outbound rules match only the addresses, so the fields are where a target could
/// smuggle recipients in (`?cc=`, `?bcc=`, `?to=`) or hide a second address behind an encoded
/// comma. Only `subject` and `body` are accepted, each at most once and properly encoded.
public struct MailtoURL: Sendable, Hashable {
    /// The addresses before `?`, percent-decoded, in order.
    public let addresses: [String]
    /// The decoded `subject`, if given.
    public let subject: String?
    /// The decoded `body`, if given.
    public let body: String?

    /// The header fields a target may set: text for the draft, never a recipient or a header.
    public static let allowedFields: Set<String> = ["subject", "body"]

    /// Reads `text` (which starts with `mailto:`). Fails with a ``DeepLinkReason`` of the
    /// `mailto_*` family, or `bad_path` for a `mailto://` form.
    public static func parse(_ text: String) -> Result<MailtoURL, URLRejection> {
        do throws(URLRejection) { return .success(try MailtoURL(text)) } catch { return .failure(error) }
    }

    private init(_ text: String) throws(URLRejection) {
        let bytes = Array(text.utf8)
        let prefix = Array("mailto:".utf8)
        guard bytes.starts(with: prefix) else { throw URLRejection(.badScheme, "not a mailto: URL") }
        var rest = bytes[prefix.count...]
        if rest.starts(with: [Byte.slash, Byte.slash]) {
            throw URLRejection(.badPath, "'mailto:' links are written mailto:<address>, without //")
        }
        // RFC 6068 has no fragment; a '#' would have to be encoded, and what a client does with
        // one it meets is its own guess.
        if rest.contains(Byte.hash) {
            throw URLRejection(.mailtoBadEncoding, "'#' must be percent-encoded in a mailto: link (it has no fragment)")
        }
        var fieldBytes: ArraySlice<UInt8>?
        if let question = rest.firstIndex(of: Byte.question) {
            fieldBytes = rest[(question + 1)...]
            rest = rest[..<question]
        }
        addresses = try Self.addresses(rest)
        var subject: String?
        var body: String?
        for (name, value) in try Self.fields(fieldBytes ?? []) {
            switch name {
            case "subject":
                guard subject == nil else { throw URLRejection(.mailtoRepeatedHeader, "'subject' is given more than once") }
                // A line break in a subject is a new header line to some clients (U+0085, U+2028
                // and U+2029 to some), and a format character hides or reorders what it says.
                if let scalar = value.unicodeScalars.first(where: { $0.value < 0x20 || Self.isHiddenBreakOrFormat($0) }) {
                    throw URLRejection(.mailtoBadEncoding, "the subject contains a control character (U+\(Self.hex(scalar)))")
                }
                subject = value
            case "body":
                guard body == nil else { throw URLRejection(.mailtoRepeatedHeader, "'body' is given more than once") }
                // Line breaks and tabs are what a body is made of; other controls are not text.
                if let scalar = value.unicodeScalars.first(where: { ($0.value < 0x20 && ![0x09, 0x0A, 0x0D].contains($0.value)) || Self.isHiddenBreakOrFormat($0) }) {
                    throw URLRejection(.mailtoBadEncoding, "the body contains a control character (U+\(Self.hex(scalar)))")
                }
                body = value
            default:
                let why = ["to", "cc", "bcc"].contains(name) ? " (it would add recipients the allowlist never sees)" : ""
                throw URLRejection(.mailtoHeaderNotAllowed, "the header field '\(name)' is not allowed\(why); only subject and body are")
            }
        }
        self.subject = subject
        self.body = body
    }

    /// DEL, the C1 controls (U+0085 among them), the line and paragraph separators, and format
    /// characters (direction overrides, zero-width ones): not text in a header field. (The C0
    /// controls are each caller's to judge: a body may hold tabs and line breaks.)
    static func isHiddenBreakOrFormat(_ scalar: Unicode.Scalar) -> Bool {
        if scalar.value < 0x20 { return false }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// `addr-spec *("," addr-spec)`, each percent-decoded. A decoded address may not contain
    /// what separates addresses or fields: an encoded ',' would be a second recipient that a
    /// pattern written for one address might not notice.
    private static func addresses(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> [String] {
        guard !bytes.isEmpty else { return [] }
        var addresses: [String] = []
        for part in bytes.split(separator: Byte.comma, omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw URLRejection(.badPath, "an empty address (',' at an end or ',,')") }
            guard let decoded = StrictURL.percentDecode(part), let address = String(validating: decoded, as: UTF8.self) else {
                throw URLRejection(.mailtoBadEncoding, "the address '\(String(decoding: part, as: UTF8.self))' has malformed percent-encoding or is not UTF-8")
            }
            if let scalar = address.unicodeScalars.first(where: { $0.value <= 0x20 || Self.isHiddenBreakOrFormat($0) || ",;?&#<>\"".unicodeScalars.contains($0) }) {
                throw URLRejection(.mailtoBadEncoding, "the address \(address.debugDescription) contains '\(scalar.escaped(asASCII: true))', which would change what a mail client reads")
            }
            addresses.append(address)
        }
        return addresses
    }

    /// `hfield *("&" hfield)`, `hfield = hfname "=" hfvalue`. Names compare case-insensitively
    /// (RFC 6068) and must be written plainly; values use only `qchar`s, everything else encoded.
    private static func fields(_ bytes: ArraySlice<UInt8>) throws(URLRejection) -> [(String, String)] {
        guard !bytes.isEmpty else { return [] }
        var fields: [(String, String)] = []
        for pair in bytes.split(separator: Byte.ampersand, omittingEmptySubsequences: false) {
            guard let equals = pair.firstIndex(of: Byte.equals), equals > pair.startIndex else {
                throw URLRejection(.mailtoBadEncoding, "the header field '\(String(decoding: pair, as: UTF8.self))' is not name=value")
            }
            let name = pair[..<equals]
            guard name.allSatisfy({ Byte.isLowercaseLetter($0) || Byte.isUppercaseLetter($0) || Byte.isDigit($0) || $0 == Byte.minus }) else {
                throw URLRejection(.mailtoBadEncoding, "the header field name '\(String(decoding: name, as: UTF8.self))' must be written plainly (letters, digits, '-')")
            }
            let value = pair[(equals + 1)...]
            if let byte = value.first(where: { !isQueryCharacter($0) }) {
                throw URLRejection(.mailtoBadEncoding, "'\(Byte.shown(byte))' must be percent-encoded in a mailto: header value")
            }
            guard let decoded = StrictURL.percentDecode(value), let text = String(validating: decoded, as: UTF8.self) else {
                throw URLRejection(.mailtoBadEncoding, "the value of '\(String(decoding: name, as: UTF8.self))' has malformed percent-encoding or is not UTF-8")
            }
            fields.append((String(decoding: name, as: UTF8.self).lowercased(), text))
        }
        return fields
    }

    /// RFC 6068 `qchar`: unreserved, `%`, `!$'()*+,;:@`. Notably not `=`, `/`, `?` or `&`.
    private static func isQueryCharacter(_ byte: UInt8) -> Bool {
        Byte.isLowercaseLetter(byte) || Byte.isUppercaseLetter(byte) || Byte.isDigit(byte)
            || "-._~%!$'()*+,;:@".utf8.contains(byte)
    }

    private static func hex(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
