import BatonJSON

/// Why a component did not reach the client; a metric label, so the set is fixed.
public enum OmissionReason: String, Sendable, CaseIterable {
    /// Newer than the client's contract version, with no fallback.
    case version
    /// Needs a device capability the client lacks, with no fallback.
    case capability
    /// Not a type the contract knows.
    case unknownType = "unknown_type"
    /// Its action cannot be performed by this client.
    case action
    /// A container left with no children.
    case empty
    /// Its `openUrl` target is not on the allowlist.
    case urlBlocked = "url_blocked"
    /// Inside a component that was omitted (or whose fallback had no place for it).
    case parentOmitted = "parent_omitted"
}

/// What fitting a reply did, for metrics and tests.
public struct FitReport: Sendable, Equatable {
    public struct Hit: Hashable, Sendable {
        public var component: String
        public var fallback: String
        public init(component: String, fallback: String) {
            self.component = component
            self.fallback = fallback
        }
    }

    public struct Omission: Hashable, Sendable {
        public var component: String
        public var reason: OmissionReason
        public init(component: String, reason: OmissionReason) {
            self.component = component
            self.reason = reason
        }
    }

    /// Components in the output.
    public var rendered = 0
    /// Replacements by fallback, per (component, fallback) — each step of a chain counts.
    public var fallbacks: [Hit: Int] = [:]
    /// Dropped components (and sections, menu items), per (component, reason).
    public var omissions: [Omission: Int] = [:]
    /// `openUrl` targets that were blocked, for logging.
    public var blockedURLs: [String] = []

    public init() {}

    public var totalFallbacks: Int { fallbacks.values.reduce(0, +) }
    public var totalOmissions: Int { omissions.values.reduce(0, +) }

    mutating func hit(_ component: String, _ fallback: String) { fallbacks[Hit(component: component, fallback: fallback), default: 0] += 1 }
    mutating func omit(_ component: String, _ reason: OmissionReason) {
        omissions[Omission(component: component, reason: reason), default: 0] += 1
    }
}

/// The downgrade pass: fits a screen (or a whole command reply) to what one client can render.
///
/// For contract version N and capabilities C, each component the client cannot render is
/// replaced by its fallback (an inline `fallback` on the component first, else the contract's,
/// recursively until renderable) or omitted; a container left without children is omitted; a
/// component whose action the client cannot perform (after action fallbacks) is omitted. An
/// unknown type never reaches a client. Pure and allocation-light: it runs on every render.
public struct ScreenFitter: Sendable {
    public let registry: ContractRegistry
    /// Decides `openUrl` targets (the deep-link allowlist's outbound rules); nil allows all.
    public let isAllowedURL: (@Sendable (String) -> Bool)?

    public init(registry: ContractRegistry, isAllowedURL: (@Sendable (String) -> Bool)? = nil) {
        self.registry = registry
        self.isAllowedURL = isAllowedURL
    }

    /// What one client can do.
    public struct Client: Sendable {
        public var contract: Int
        public var capabilities: Set<String>

        public init(contract: Int, capabilities: Set<String>) {
            self.contract = contract
            self.capabilities = capabilities
        }
    }

    // MARK: - Entry points

    /// Fits a command reply: its screen, and its top-level actions (`submit`, `cancel`, `retry`).
    public func fitReply(_ reply: JSONValue, for client: Client) -> (JSONValue, FitReport) {
        guard case .object(var object) = reply else { return (reply, FitReport()) }
        var report = FitReport()
        if let screen = object["screen"] {
            object["screen"] = fitScreen(screen, client: client, report: &report)
        }
        for key in ["submit", "cancel", "retry"] {
            guard let action = object[key] else { continue }
            if let fitted = fitAction(action, client: client, report: &report) {
                object[key] = fitted
            } else {
                object[key] = nil
            }
        }
        return (.object(object), report)
    }

    /// Fits a `componentScreen`.
    public func fitScreen(_ screen: JSONValue, for client: Client) -> (JSONValue, FitReport) {
        var report = FitReport()
        let fitted = fitScreen(screen, client: client, report: &report)
        return (fitted, report)
    }

    // MARK: - Screens

    func fitScreen(_ screen: JSONValue, client: Client, report: inout FitReport) -> JSONValue {
        guard case .object(var object) = screen else { return screen }
        if let header = object["header"] {
            object["header"] = fitComponent(header, client: client, report: &report)
        }
        if case .array(let sections)? = object["sections"] {
            var kept: [JSONValue] = []
            kept.reserveCapacity(sections.count)
            for section in sections {
                guard case .object(var sectionObject) = section else { continue }
                let components = sectionObject["components"]?.arrayValue ?? []
                let fitted = fitList(components, client: client, report: &report)
                if fitted.isEmpty {
                    report.omit("section", .empty)
                    continue
                }
                sectionObject["components"] = .array(fitted)
                kept.append(.object(sectionObject))
            }
            object["sections"] = .array(kept)
        }
        if case .array(let buttons)? = object["secondaryButtons"] {
            var kept: [JSONValue] = []
            for button in buttons {
                guard case .object(var buttonObject) = button else { continue }
                if let action = buttonObject["action"] {
                    guard let fitted = fitAction(action, client: client, report: &report) else {
                        report.omit("menuItem", .action)
                        continue
                    }
                    buttonObject["action"] = fitted
                }
                kept.append(.object(buttonObject))
            }
            object["secondaryButtons"] = .array(kept)
        }
        return .object(object)
    }

    func fitList(_ components: [JSONValue], client: Client, report: inout FitReport) -> [JSONValue] {
        var output: [JSONValue] = []
        output.reserveCapacity(components.count)
        for component in components {
            if let fitted = fitComponent(component, client: client, report: &report) { output.append(fitted) }
        }
        return output
    }

    /// Fits one component; nil when it is omitted (already counted).
    func fitComponent(_ value: JSONValue, client: Client, report: inout FitReport) -> JSONValue? {
        guard case .object(var object) = value, let type = object["type"]?.stringValue else {
            report.omit("unknown", .unknownType)
            return nil
        }
        var hops = 0
        var currentType = type
        // Replace until renderable (a chain is bounded by the number of types).
        while true {
            guard let spec = registry.components[currentType] else {
                report.omit("unknown", .unknownType)
                omitDescendants(of: object, spec: nil, report: &report)
                return nil
            }
            if spec.since <= client.contract, spec.capabilities.allSatisfy(client.capabilities.contains) {
                return finish(object, spec: spec, client: client, report: &report)
            }
            let reason: OmissionReason = spec.since > client.contract ? .version : .capability
            hops += 1
            if hops > 16 {
                report.omit(currentType, reason)
                return nil
            }
            if case .object(var inline)? = object["fallback"] {
                // The author's own fallback for this instance; it inherits the id.
                let next = inline["type"]?.stringValue ?? "unknown"
                report.hit(currentType, next)
                omitDescendants(of: object, spec: spec, report: &report)
                if inline["id"] == nil, let id = object["id"] { inline["id"] = id }
                object = inline
                currentType = next
                continue
            }
            switch spec.fallback {
            case .omit:
                report.omit(currentType, reason)
                omitDescendants(of: object, spec: spec, report: &report)
                return nil
            case .component(let next, let map, let set):
                report.hit(currentType, next)
                var replacement: JSONObject = ["type": .string(next)]
                if let id = object["id"] { replacement["id"] = id }
                for (target, source) in map { if let member = object[source] { replacement[target] = member } }
                for (target, constant) in set { replacement[target] = constant }
                // Children the fallback does not carry over are gone: count them.
                if let children = spec.childrenField, !map.values.contains(children) {
                    omitDescendants(of: object, spec: spec, report: &report)
                }
                object = replacement
                currentType = next
            }
        }
    }

    /// A renderable component: fit its actions first (a component whose action cannot be
    /// performed goes, with everything inside it), then its children and nested components.
    private func finish(_ original: JSONObject, spec: ComponentSpec, client: Client, report: inout FitReport) -> JSONValue? {
        var object = original
        object["fallback"] = nil
        for (name, field) in spec.fields where field.type == .action {
            guard let member = object[name] else { continue }
            switch fitActionOutcome(member, client: client, report: &report) {
            case .fitted(let fitted):
                object[name] = fitted
            case .unsupported:
                report.omit(spec.name, .action)
                omitDescendants(of: object, spec: spec, report: &report)
                return nil
            case .blocked:
                report.omit(spec.name, .urlBlocked)
                omitDescendants(of: object, spec: spec, report: &report)
                return nil
            }
        }
        var childrenEmpty = false
        for (name, field) in spec.fields {
            guard let member = object[name] else { continue }
            switch field.type {
            case .component:
                object[name] = fitComponent(member, client: client, report: &report)
            case .components:
                let fitted = fitList(member.arrayValue ?? [], client: client, report: &report)
                if name == spec.childrenField, fitted.isEmpty { childrenEmpty = true }
                object[name] = .array(fitted)
            default:
                break
            }
        }
        if let children = spec.childrenField, childrenEmpty || object[children] == nil {
            report.omit(spec.name, .empty)
            return nil
        }
        report.rendered += 1
        return .object(object)
    }

    /// Counts every component inside one that is being dropped or replaced without them.
    private func omitDescendants(of object: JSONObject, spec: ComponentSpec?, report: inout FitReport) {
        let fields: [String]
        if let spec {
            fields = spec.fields.filter { $0.value.type == .components || $0.value.type == .component }.map(\.key)
        } else {
            fields = ["components", "items"]
        }
        for field in fields {
            switch object[field] {
            case .array(let children)?:
                for child in children { countSubtree(child, report: &report) }
            case .object?:
                countSubtree(object[field]!, report: &report)
            default:
                break
            }
        }
    }

    private func countSubtree(_ value: JSONValue, report: inout FitReport) {
        guard case .object(let object) = value else { return }
        let type = object["type"]?.stringValue ?? "unknown"
        report.omit(registry.components[type] == nil ? "unknown" : type, .parentOmitted)
        omitDescendants(of: object, spec: registry.components[type], report: &report)
    }

    // MARK: - Actions

    enum ActionOutcome {
        case fitted(JSONValue)
        case unsupported
        case blocked
    }

    /// Fits an action; nil when the client cannot perform it (or it is blocked).
    func fitAction(_ value: JSONValue, client: Client, report: inout FitReport) -> JSONValue? {
        if case .fitted(let fitted) = fitActionOutcome(value, client: client, report: &report) { return fitted }
        return nil
    }

    /// Fits an action: itself if the client can perform it, else its fallback action;
    /// unsupported when neither (or when it was never signable for this client: `unavailable`),
    /// blocked when it opens a URL off the allowlist.
    func fitActionOutcome(_ value: JSONValue, client: Client, report: inout FitReport) -> ActionOutcome {
        guard case .object(var object) = value, var type = object["type"]?.stringValue else { return .unsupported }
        var hops = 0
        while true {
            guard let spec = registry.actions[type] else { return .unsupported }
            if spec.since <= client.contract, spec.capabilities.allSatisfy(client.capabilities.contains) {
                if type == "openUrl", let isAllowedURL {
                    let url = object["url"]?.stringValue ?? ""
                    guard isAllowedURL(url) else {
                        report.blockedURLs.append(url)
                        return .blocked
                    }
                }
                return .fitted(.object(object))
            }
            hops += 1
            guard let fallback = spec.fallback, hops <= 8 else { return .unsupported }
            report.hit(type, fallback)
            object["type"] = .string(fallback)
            type = fallback
        }
    }
}
