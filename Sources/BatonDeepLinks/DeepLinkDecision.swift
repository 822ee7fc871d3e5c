/// The answer for an incoming link: where it leads, or why it leads nowhere.
public enum DeepLinkDecision: Sendable, Hashable {
    /// Open `target` with `parameters` (the target's parameter names, link values decoded);
    /// `entry` names the allowlist entry that matched.
    case allowed(DeepLinkTarget, parameters: [String: String], entry: String)
    /// Refused. `detail` is for logs and authors and may quote the link; only `reason` is a
    /// metric label.
    case rejected(DeepLinkReason, detail: String)

    public var isAllowed: Bool {
        if case .allowed = self { return true }
        return false
    }

    /// Why it was refused; `nil` when allowed.
    public var reason: DeepLinkReason? {
        if case .rejected(let reason, _) = self { return reason }
        return nil
    }

    /// Dimensions for `baton_deeplinks_total`: `result` is `allowed` or `rejected`, `reason`
    /// is `none` or a ``DeepLinkReason`` label.
    public var metricDimensions: [(String, String)] {
        [("result", isAllowed ? "allowed" : "rejected"), ("reason", reason?.label ?? "none")]
    }
}

/// The answer for an `openUrl` target in a screen or response.
public enum OutboundDecision: Sendable, Hashable {
    case allowed
    /// Drop the component that carries it. `detail` may quote the URL; only `reason` is a
    /// metric label.
    case blocked(DeepLinkReason, detail: String)

    public var isAllowed: Bool { self == .allowed }

    public var reason: DeepLinkReason? {
        if case .blocked(let reason, _) = self { return reason }
        return nil
    }

    /// Dimensions for `baton_deeplinks_total` when a target is blocked: `result` is
    /// `blocked` (or `outbound_allowed`), `reason` a ``DeepLinkReason`` label (or `none`).
    public var metricDimensions: [(String, String)] {
        [("result", isAllowed ? "outbound_allowed" : "blocked"), ("reason", reason?.label ?? "none")]
    }
}

/// What ``DeepLinkAllowlist/explain(_:platform:)`` found, as lines for an author, with the
/// decisions the server would take.
public struct DeepLinkExplanation: Sendable, CustomStringConvertible {
    public let decision: DeepLinkDecision
    public let outbound: OutboundDecision
    public let lines: [String]

    public var description: String { lines.joined(separator: "\n") }
}
