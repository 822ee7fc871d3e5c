import BatonFlows
import Crypto
import Foundation

/// Who the request comes from: a verified user (bearer token), a device (`X-Device-Id`),
/// both, or neither.
public struct ClientIdentity: Sendable, Equatable {
    public var user: String?
    public var device: String?

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
        case .user: return user == parsed.id
        case .device: return device == parsed.id
        }
    }

    public var isAnonymous: Bool { user == nil && device == nil }
}

/// What the client can render: contract version, platform, app version, capabilities.
public struct ClientProfile: Sendable, Equatable {
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
    }

    public var kind: Kind
    public var message: String
    /// The flow the command was for, when known (metrics label).
    public var flow: String?

    public init(_ kind: Kind, _ message: String, flow: String? = nil) {
        self.kind = kind
        self.message = message
        self.flow = flow
    }

    public var description: String { message }

    /// The HTTP error an effect, guard or loader asked for.
    public init(_ error: FlowCallError, flow: String?) {
        switch error.kind {
        case .forbidden: self.init(.forbidden, error.message, flow: flow)
        case .notFound: self.init(.notFound, error.message, flow: flow)
        case .invalid: self.init(.invalidRequest, error.message, flow: flow)
        case .unauthenticated: self.init(.unauthenticated, error.message, flow: flow)
        }
    }
}

/// A rendered screen: its exact bytes and their strong ETag.
public struct ScreenReply: Sendable {
    public var body: [UInt8]
    /// `"<32 hex digits>"`: SHA-256 of the body, truncated (a strong validator: equal ETags
    /// mean equal bytes).
    public var etag: String

    public init(body: [UInt8]) {
        self.body = body
        self.etag = "\"" + SHA256.hash(data: body).prefix(16).map { String(format: "%02x", $0) }.joined() + "\""
    }
}
