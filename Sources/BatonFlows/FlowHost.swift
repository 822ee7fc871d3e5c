import BatonJSON

/// Who is acting: a signed-in user or an anonymous device.
public struct FlowSubject: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable { case user, device }

    public var kind: Kind
    public var id: String

    public init(kind: Kind, id: String) {
        self.kind = kind
        self.id = id
    }

    /// `user:<id>` or `device:<uuid>`: how subjects are stored and signed.
    public var description: String { "\(kind.rawValue):\(id)" }

    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":"), let kind = Kind(rawValue: String(text[..<colon])) else { return nil }
        let id = String(text[text.index(after: colon)...])
        guard !id.isEmpty else { return nil }
        self.init(kind: kind, id: id)
    }

    /// The subject as templates see it: `{{subject.kind}}`, `{{subject.id}}`.
    public var jsonValue: JSONValue { ["kind": .string(kind.rawValue), "id": .string(id)] }
}

/// What an effect, guard or loader is told about the call.
public struct FlowCall: Sendable {
    public var subject: FlowSubject
    /// The flow (empty for a screen outside any flow).
    public var flow: String
    /// The session (nil for a screen outside any flow).
    public var sessionID: String?
    /// The client's network address, when known (for per-address limits).
    public var clientAddress: String?

    public init(subject: FlowSubject, flow: String, sessionID: String?, clientAddress: String? = nil) {
        self.subject = subject
        self.flow = flow
        self.sessionID = sessionID
        self.clientAddress = clientAddress
    }
}

/// What an effect reports: which outcome happened, and data for later templates
/// (`{{result.…}}`).
public struct EffectResult: Sendable {
    public var outcome: String
    public var data: JSONValue

    public init(_ outcome: String, _ data: JSONValue = .null) {
        self.outcome = outcome
        self.data = data
    }
}

/// Runs the named Swift functions a flow calls. The engine itself does no I/O: the runtime
/// implements this with the command's database transaction, tests with plain closures.
public protocol FlowHost {
    func runGuard(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> Bool
    func runEffect(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> EffectResult
    func runLoader(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> JSONValue
}

/// Errors an effect, guard or loader throws to stop the command with an HTTP error instead of
/// a flow answer (the transaction rolls back).
public struct FlowCallError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable { case forbidden, notFound, invalid, unauthenticated, rateLimited }

    public var kind: Kind
    public var message: String
    /// For ``Kind/rateLimited``: when to try again, and the limit that was reached.
    public var retryAfter: Int?
    public var limit: (name: String, quota: Int, window: Int)?

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// Too many calls: the command is refused with 429 and `Retry-After` (nothing is changed).
    public static func rateLimited(_ message: String, retryAfter: Int, limit: (name: String, quota: Int, window: Int)) -> FlowCallError {
        var error = FlowCallError(.rateLimited, message)
        error.retryAfter = retryAfter
        error.limit = limit
        return error
    }

    public static func forbidden(_ message: String) -> FlowCallError { FlowCallError(.forbidden, message) }
    public static func notFound(_ message: String) -> FlowCallError { FlowCallError(.notFound, message) }
    public static func invalid(_ message: String) -> FlowCallError { FlowCallError(.invalid, message) }
    /// The caller must sign in (for screens that show a user's own data).
    public static func unauthenticated(_ message: String) -> FlowCallError { FlowCallError(.unauthenticated, message) }

    public var description: String { message }
}
