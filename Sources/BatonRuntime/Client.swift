import BatonJSON
import BatonFlows
import Crypto
import Foundation

/// Who the request comes from: a verified user (bearer token), a device (`X-Device-Id`),
/// both, or neither.
public struct ClientIdentity: Sendable, Equatable {
    public var user: String?
    public var device: String?
    /// The client's network address, when known (per-address limits; never a subject).
    public var address: String?

    public init(user: String? = nil, device: String? = nil) {
        self.user = user
        self.device = device
    }

    public static let anonymous = ClientIdentity()

    /// The subject a flow with this audience runs as, if the request can provide one.
    public func subject(for audience: FlowDefinition.Audience) -> FlowSubject? {
        switch audience {
        case .user: return user.map { FlowSubject(kind: .user, id: $0) }
        case .device: return device.map { FlowSubject(kind: .device, id: $0) }
        case .any: return user.map { FlowSubject(kind: .user, id: $0) } ?? device.map { FlowSubject(kind: .device, id: $0) }
        }
    }

    /// The subject screens are rendered for: the user if signed in, else the device.
    public var primarySubject: FlowSubject? { subject(for: .any) }

    /// Whether the request speaks for `subject` (`user:…` or `device:…`).
    public func speaks(for subject: String) -> Bool {
        guard let parsed = FlowSubject(subject) else { return false }
        switch parsed.kind {
        // By bytes: another user's id may be canonically equivalent ("\u{212A}im" and "Kim").
        case .user: return user?.hasSameBytes(as: parsed.id) ?? false
        case .device: return device?.hasSameBytes(as: parsed.id) ?? false
        }
    }

    public var isAnonymous: Bool { user == nil && device == nil }
}

/// What the client can render: contract version, platform, app version, capabilities.
public struct ClientProfile: Sendable, Hashable {
    public var contract: Int
    public var platform: String
    public var appVersion: String?
    public var capabilities: Set<String>

    public init(contract: Int, platform: String = "other", appVersion: String? = nil, capabilities: Set<String> = []) {
        self.contract = contract
        self.platform = platform
        self.appVersion = appVersion
        self.capabilities = capabilities
    }

    /// The URL command actions post to.
    public var commandURL: String { "/v\(contract)/command" }
}

/// How a command ended, for metrics (`baton_commands_total{outcome}`).
public enum CommandOutcome: String, Sendable, CaseIterable {
    case done, refresh, input, screen, error, replayed, stale, invalid
}

/// A command's answer: the exact bytes to send.
public struct CommandReply: Sendable {
    public var body: [UInt8]
    /// True when the bytes are the stored answer of an earlier identical command.
    public var replayed: Bool
    public var outcome: CommandOutcome
    public var flow: String
}

/// A command refused with an HTTP error (the server maps kinds to statuses and codes).
public struct CommandError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case invalidPayload, invalidRequest, unauthenticated, forbidden, notFound
        /// The same idempotency key's first request is still running (409, retry shortly).
        case inFlight
        /// The idempotency key was used for a different request (422).
        case idempotencyKeyReused
        /// Too many requests of a kind from this client (429, retry after ``retryAfter``).
        case rateLimited
    }

    public var kind: Kind
    public var message: String
    /// The flow the command was for, when known (metrics label).
    public var flow: String?
    /// For ``Kind/rateLimited``: seconds until a retry may succeed, and the limit reached.
    public var retryAfter: Int?
    public var limit: (name: String, quota: Int, window: Int)?

    public init(_ kind: Kind, _ message: String, flow: String? = nil) {
        self.kind = kind
        self.message = message
        self.flow = flow
    }

    public var description: String { message }

    /// The HTTP status and error code this refusal is answered with (PROTOCOL §1): the one
    /// place the server and the scenario runner read it from.
    public var wire: (status: Int, code: String) {
        switch kind {
        case .invalidPayload: (400, "invalid_payload")
        case .invalidRequest: (400, "invalid_request")
        case .unauthenticated: (401, "unauthenticated")
        case .forbidden: (403, "forbidden")
        case .notFound: (404, "not_found")
        case .inFlight: (409, "conflict")
        case .idempotencyKeyReused: (422, "idempotency_key_reused")
        case .rateLimited: (429, "rate_limited")
        }
    }

    /// The HTTP error an effect, guard or loader asked for.
    public init(_ error: FlowCallError, flow: String?) {
        switch error.kind {
        case .forbidden: self.init(.forbidden, error.message, flow: flow)
        case .notFound: self.init(.notFound, error.message, flow: flow)
        case .invalid: self.init(.invalidRequest, error.message, flow: flow)
        case .unauthenticated: self.init(.unauthenticated, error.message, flow: flow)
        case .rateLimited:
            self.init(.rateLimited, error.message, flow: flow)
            retryAfter = error.retryAfter
            limit = error.limit
        }
    }
}

/// A rendered screen: its exact bytes and their ETag.
public struct ScreenReply: Sendable {
    public var body: [UInt8]
    /// `"<32 hex digits>"`: SHA-256 of the body with every action payload masked, of whom the
    /// payloads were minted for, of their validity and of the definitions served, truncated.
    ///
    /// Each render mints fresh start payloads (a nonce per start action), so the bytes differ
    /// every time; what the user sees does not. Masking them keeps `304 Not Modified` working;
    /// hashing the subject and the validity makes the ETag change when the payloads a client
    /// keeps would not be interchangeable with fresh ones (another user, or about to expire).
    /// So does hashing the served definitions (`served`, ``ServedFlows/etagSeed``): what a start
    /// action starts, and with which parameters, is only inside its payload, and a release can
    /// change it alone. And so does hashing when the client last started a session
    /// (`latestStart`): a start payload it used is answered `refresh` once its session moves on,
    /// so a 304 must not keep it.
    public var etag: String

    public init(body: [UInt8], subject: String, validUntil: Int, served: [UInt8] = [], latestStart: Int64 = 0) {
        self.init(body: body, subject: subject, validUntil: validUntil, served: served, latestStart: latestStart) { _, _ in }
    }

    /// The same, showing `observe` each chunk of the body and the payload that follows it (nil
    /// after the last chunk), in one pass: the screen cache cuts the payloads out as it goes.
    init(
        body: [UInt8], subject: String, validUntil: Int, served: [UInt8], latestStart: Int64,
        observing observe: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) -> Void
    ) {
        self.body = body
        var hash = SHA256()
        hash.update(data: served)
        hash.update(data: Array(subject.utf8) + [0])
        Self.splittingPayloads(body) { chunk, payload in
            hash.update(bufferPointer: chunk)
            observe(chunk, payload)
        }
        withUnsafeBytes(of: Int64(validUntil).littleEndian) { hash.update(bufferPointer: $0) }
        withUnsafeBytes(of: latestStart.littleEndian) { hash.update(bufferPointer: $0) }
        self.etag = "\"" + Hex.encode(bytesOf: hash.finalize(), prefix: 16) + "\""
    }

    /// A held screen's reply: its bytes with fresh payloads, and the ETag computed when it was
    /// rendered (the same: the ETag masks payloads, and the subject and validity are the cache's key).
    init(body: [UInt8], etag: String) {
        self.body = body
        self.etag = etag
    }

    /// Feeds `body` to `consume` in order: each chunk that ends where a `"payload":"…"` member's
    /// value begins, with that value; then the rest after the last value, with nil. The
    /// sequence can only be a member name: inside a JSON string a quote is escaped.
    static func splittingPayloads(_ body: [UInt8], _ consume: (UnsafeRawBufferPointer, UnsafeRawBufferPointer?) -> Void) {
        let marker = Array(#""payload":""#.utf8)
        body.withUnsafeBytes { bytes in
            var chunkStart = 0
            var index = 0
            while index + marker.count <= bytes.count {
                if bytes[index] == marker[0], bytes[index..<(index + marker.count)].elementsEqual(marker) {
                    let valueStart = index + marker.count
                    // Payloads are base64url and a dot: no escapes, the next quote ends them.
                    var end = valueStart
                    while end < bytes.count, bytes[end] != UInt8(ascii: "\"") { end += 1 }
                    consume(
                        UnsafeRawBufferPointer(rebasing: bytes[chunkStart..<valueStart]),
                        UnsafeRawBufferPointer(rebasing: bytes[valueStart..<end]))
                    chunkStart = end
                    index = end
                } else {
                    index += 1
                }
            }
            consume(UnsafeRawBufferPointer(rebasing: bytes[chunkStart...]), nil)
        }
    }
}

extension CommandInput {
    /// A digest of the input in one canonical form (members in a fixed order, absent and null
    /// alike): two requests with the same digest asked for the same thing.
    var digest: String {
        var canonical: [JSONValue] = [text.map(JSONValue.string) ?? .null, choice.map(JSONValue.string) ?? .null]
        canonical.append(choices.map { .array($0.map(JSONValue.string)) } ?? .null)
        canonical.append(barcode.map(JSONValue.string) ?? .null)
        return Hex.encode(bytesOf: SHA256.hash(data: JSONEncoding.encode(.array(canonical))), prefix: 16)
    }
}
