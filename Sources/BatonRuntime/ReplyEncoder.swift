import BatonFlows
import BatonJSON
import Foundation

/// Turns engine replies into wire JSON (PROTOCOL §3), signing a payload for every action.
struct ReplyEncoder {
    let signer: PayloadSigner
    let identity: ClientIdentity
    let profile: ClientProfile
    /// The session the actions belong to (nil outside a flow, e.g. a standalone screen).
    let session: Session?
    /// The audience of each flow, for minting start actions.
    let audiences: [String: FlowDefinition.Audience]
    let now: Date
    /// Records the start payloads minted, for the screen cache (screens only).
    var mintLog: MintLog? = nil

    /// What command actions of a running session are bound to.
    struct Session {
        var subject: String
        var flow: String
        var id: UUID
        var step: Int
        var expires: Int
        /// The flow's parameters: "Start again" restarts with them.
        var parameters: JSONObject?
    }

    /// Start payloads expire 24–25 hours after minting, rounded up to the hour: a screen's ETag
    /// (computed with payloads masked, see ``ScreenReply``) changes at most once an hour.
    var startExpiry: Int {
        let hour = 3600
        return (Int(now.timeIntervalSince1970) / hour + 1) * hour + 24 * hour
    }

    func encode(_ reply: FlowReply) throws -> JSONValue {
        switch reply {
        case .done(let message, let refresh):
            var object: JSONObject = ["type": "done"]
            if let message { object["message"] = .string(message) }
            switch refresh {
            case .none: object["refresh"] = false
            case .all: object["refresh"] = true
            case .sections(let ids): object["refresh"] = .array(ids.map(JSONValue.string))
            }
            return .object(object)
        case .refresh:
            return ["type": "refresh"]
        case .input(let input):
            var object: JSONObject = ["type": "input", "title": .string(input.title)]
            if let message = input.message { object["message"] = .string(message) }
            if let error = input.error { object["error"] = .string(error) }
            var field: JSONObject = ["kind": .string(input.kind.rawValue)]
            switch input.kind {
            case .text:
                if let placeholder = input.placeholder { field["placeholder"] = .string(placeholder) }
                field["value"] = .string(input.value ?? "")
                if let minLength = input.minLength { field["minLength"] = .int(minLength) }
                if let maxLength = input.maxLength { field["maxLength"] = .int(maxLength) }
            case .choice:
                field["multiple"] = .bool(input.multiple)
                field["options"] = .array(
                    input.options.map { option in
                        var entry: JSONObject = ["id": .string(option.id), "title": .string(option.title)]
                        if let subtitle = option.subtitle, !subtitle.isEmpty { entry["subtitle"] = .string(subtitle) }
                        return .object(entry)
                    })
            }
            object["input"] = .object(field)
            object["submit"] = try command(event: "submit", title: input.submitTitle)
            if let cancel = input.cancelTitle { object["cancel"] = try command(event: "cancel", title: cancel) }
            return .object(object)
        case .screen(let presentation, let screen):
            return ["type": "screen", "presentation": .string(presentation.rawValue), "screen": try mintActions(in: screen)]
        case .error(let message, let retry):
            var object: JSONObject = ["type": "error", "message": .string(message)]
            switch retry {
            case .event(let event)?: object["retry"] = try command(event: event, title: "Try again")
            case .restart?:
                if let session {
                    object["retry"] = try start(flow: session.flow, parameters: session.parameters, title: "Start again") ?? .null
                }
            case nil: break
            }
            return .object(object)
        }
    }

    /// A command action for `event` of the current session.
    func command(event: String, title: String?) throws -> JSONValue {
        guard let session else { return ["type": "unavailable"] }
        let payload = signer.sign(
            PayloadClaims(
                subject: session.subject, flow: session.flow, sessionID: session.id, step: session.step, event: event,
                expires: session.expires))
        var object: JSONObject = ["type": "command", "url": .string(profile.commandURL), "payload": .string(payload)]
        if let title { object["title"] = .string(title) }
        return .object(object)
    }

    /// A start action for `flow`, or nil when this client cannot run it (wrong audience).
    func start(flow: String, parameters: JSONObject?, title: String?) throws -> JSONValue? {
        guard let audience = audiences[flow], let subject = identity.subject(for: audience) else { return nil }
        let claims = PayloadClaims(
            subject: subject.description, flow: flow, sessionID: nil, step: 0, event: "start", expires: startExpiry,
            parameters: parameters ?? [:], nonce: PayloadSigner.makeNonce())
        let payload = signer.sign(claims)
        mintLog?.record(payload, claims: claims, audience: audience)
        var object: JSONObject = ["type": "startFlow", "url": .string(profile.commandURL), "payload": .string(payload)]
        if let title { object["title"] = .string(title) }
        return .object(object)
    }

    /// Signs every action in a screen: `{type: command, event}` becomes a command of this
    /// session, `{type: startFlow, flow, params}` a start payload. An action that cannot be
    /// signed for this client becomes `{type: unavailable}`, which the contract pass drops
    /// along with its component. Parts with nothing to sign are kept as they are, not copied.
    func mintActions(in value: JSONValue) throws -> JSONValue {
        try minted(value) ?? value
    }

    /// The members of a `command` and a `startFlow` action that minting replaces; the others
    /// (`id`, `style`, …) are kept. Sets built once, not an array literal per member.
    private static let commandKeys: Set = ["type", "event", "title"]
    private static let startKeys: Set = ["type", "flow", "params", "title"]

    /// `value` with its actions signed, or nil when there was nothing to sign in it.
    private func minted(_ value: JSONValue) throws -> JSONValue? {
        switch value {
        case .array(let items):
            var output: [JSONValue]?  // a copy, made on the first change
            for (index, item) in items.enumerated() {
                guard let changed = try minted(item) else {
                    output?.append(item)
                    continue
                }
                if output == nil {
                    output = Array(items[..<index])
                    output!.reserveCapacity(items.count)
                }
                output!.append(changed)
            }
            return output.map(JSONValue.array)
        case .object(let object):
            switch object["type"]?.stringValue {
            case "command" where object["event"] != nil && object["payload"] == nil:
                let event = object["event"]?.interpolationText ?? ""
                var minted = try command(event: event, title: object["title"]?.stringValue).objectValue ?? [:]
                for (key, member) in object where !Self.commandKeys.contains(key) { minted[key] = member }
                return .object(minted)
            case "startFlow" where object["payload"] == nil:
                let flow = object["flow"]?.interpolationText ?? ""
                guard var minted = try start(flow: flow, parameters: object["params"]?.objectValue, title: object["title"]?.stringValue)?.objectValue
                else { return ["type": "unavailable"] }
                for (key, member) in object where !Self.startKeys.contains(key) { minted[key] = member }
                return .object(minted)
            default:
                var output: JSONObject?  // a copy, made on the first change
                for (key, member) in object {
                    guard let changed = try minted(member) else { continue }
                    if output == nil { output = object }
                    output![key] = changed
                }
                return output.map(JSONValue.object)
            }
        default:
            return nil
        }
    }
}
