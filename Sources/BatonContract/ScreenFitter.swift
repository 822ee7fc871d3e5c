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
    /// `openUrl` targets that were blocked, for logging.
    public var blockedURLs: [String] = []
    /// Replacements per distinct (component, fallback), in the order first seen. Counted in
    /// short lists while a pass runs (a handful of distinct entries, so a scan beats hashing
    /// two strings per count).
    public private(set) var hitCounts: [(hit: Hit, count: Int)] = []
    /// Omissions per distinct (component, reason), in the order first seen.
    public private(set) var omissionCounts: [(omission: Omission, count: Int)] = []

    public init() {}

    /// Replacements by fallback, per (component, fallback) — each step of a chain counts.
    public var fallbacks: [Hit: Int] {
        Dictionary(uniqueKeysWithValues: hitCounts.map { ($0.hit, $0.count) })
    }

    /// Dropped components (and sections, menu items), per (component, reason).
    public var omissions: [Omission: Int] {
        Dictionary(uniqueKeysWithValues: omissionCounts.map { ($0.omission, $0.count) })
    }

    public var totalFallbacks: Int { hitCounts.reduce(0) { $0 + $1.count } }
    public var totalOmissions: Int { omissionCounts.reduce(0) { $0 + $1.count } }

    mutating func hit(_ component: String, _ fallback: String) {
        for index in hitCounts.indices
        where same(hitCounts[index].hit.component, component) && same(hitCounts[index].hit.fallback, fallback) {
            hitCounts[index].count += 1
            return
        }
        hitCounts.append((Hit(component: component, fallback: fallback), 1))
    }

    mutating func omit(_ component: String, _ reason: OmissionReason) {
        for index in omissionCounts.indices
        where omissionCounts[index].omission.reason == reason && same(omissionCounts[index].omission.component, component) {
            omissionCounts[index].count += 1
            return
        }
        omissionCounts.append((Omission(component: component, reason: reason), 1))
    }

    public static func == (a: FitReport, b: FitReport) -> Bool {
        a.rendered == b.rendered && a.blockedURLs == b.blockedURLs && a.fallbacks == b.fallbacks && a.omissions == b.omissions
    }
}

/// String equality that settles most unequal pairs on their length, without calling into
/// the general comparison (the pass compares member names of every component).
@inline(__always)
func same(_ a: String, _ b: String) -> Bool {
    a.utf8.count == b.utf8.count && a == b
}

/// A member of a small object by name, scanning with `same` (the objects of a screen have a
/// handful of members; the ordered dictionary's own lookup compares more expensively).
@inline(__always)
func member(_ object: JSONObject, _ key: String) -> JSONValue? {
    guard object.count < 16 else { return object[key] }
    var found: JSONValue?
    object.forEachMember { name, value in
        if found == nil, same(name, key) { found = value }
    }
    return found
}

/// The downgrade pass: fits a screen (or a whole command reply) to what one client can render.
///
/// For contract version N and capabilities C, each component the client cannot render is
/// replaced by its fallback (an inline `fallback` on the component first, else the contract's,
/// recursively until renderable) or omitted; a container left without children is omitted; a
/// component whose action the client cannot perform (after action fallbacks) is omitted. An
/// unknown type never reaches a client.
///
/// It runs on every render, so it fits and encodes in one walk: the wire bytes are written as
/// the tree is read, and a member that turns out to be dropped (an empty container, say) is
/// taken back by truncating the output. No fitted tree is ever built. The contract is
/// compiled once, at init, into lookup tables.
public struct ScreenFitter: Sendable {
    public let registry: ContractRegistry
    /// Decides `openUrl` targets (the deep-link allowlist's outbound rules); nil allows all.
    public let isAllowedURL: (@Sendable (String) -> Bool)?
    fileprivate let components: NameTable<CompiledComponent>
    fileprivate let actions: NameTable<CompiledAction>

    public init(registry: ContractRegistry, isAllowedURL: (@Sendable (String) -> Bool)? = nil) {
        self.registry = registry
        self.isAllowedURL = isAllowedURL
        self.components = NameTable(registry.components.mapValues(CompiledComponent.init))
        self.actions = NameTable(registry.actions.mapValues(CompiledAction.init))
    }

    /// What one client can do.
    public struct Client: Sendable {
        public var contract: Int
        public var capabilities: Set<String>

        public init(contract: Int, capabilities: Set<String>) {
            self.contract = contract
            self.capabilities = capabilities
        }

        @inline(__always)
        func has(_ capabilities: [String]) -> Bool {
            capabilities.isEmpty || capabilities.allSatisfy(self.capabilities.contains)
        }
    }

    // MARK: - Entry points

    /// The wire bytes of a `componentScreen` fitted to `client`, and what fitting did.
    public func encodeScreen(_ screen: JSONValue, for client: Client) -> (bytes: [UInt8], report: FitReport) {
        var pass = FitPass(fitter: self, client: client)
        pass.writeScreen(screen)
        return (pass.output.bytes(), pass.report)
    }

    /// The wire bytes of a command reply fitted to `client`: its screen, and its top-level
    /// actions (`submit`, `cancel`, `retry`).
    public func encodeReply(_ reply: JSONValue, for client: Client) -> (bytes: [UInt8], report: FitReport) {
        var pass = FitPass(fitter: self, client: client)
        pass.writeReply(reply)
        return (pass.output.bytes(), pass.report)
    }

    /// `encodeScreen` read back as a value, for the linter and tests (members in key order).
    public func fitScreen(_ screen: JSONValue, for client: Client) -> (JSONValue, FitReport) {
        let (bytes, report) = encodeScreen(screen, for: client)
        return (Self.decode(bytes), report)
    }

    /// `encodeReply` read back as a value, for tests (members in key order).
    public func fitReply(_ reply: JSONValue, for client: Client) -> (JSONValue, FitReport) {
        let (bytes, report) = encodeReply(reply, for: client)
        return (Self.decode(bytes), report)
    }

    private static func decode(_ bytes: [UInt8]) -> JSONValue {
        do {
            return try JSONValue.parse(bytes, maxDepth: .max)
        } catch {
            preconditionFailure("the downgrade pass wrote JSON it cannot read back: \(error)")
        }
    }

    // MARK: - Deciding

    /// What a component resolves to for this client.
    fileprivate enum Resolution {
        /// Renderable: this source as this type.
        case render(ComponentSource, CompiledComponent)
        /// Dropped (already counted).
        case omitted
    }

    /// Follows the fallbacks of a component until it is renderable or dropped; counts each
    /// replacement and the omission, with the components it takes down.
    fileprivate func resolve(_ value: JSONValue, client: Client, report: inout FitReport) -> Resolution {
        guard case .object(var object) = value, let type = member(object, "type")?.stringValue else {
            report.omit("unknown", .unknownType)
            return .omitted
        }
        var hops = 0
        var currentType = type
        // Replace until renderable (a chain is bounded by the number of types).
        while true {
            guard let component = components[currentType] else {
                report.omit("unknown", .unknownType)
                omitDescendants(of: object, component: nil, report: &report)
                return .omitted
            }
            if component.since <= client.contract, client.has(component.capabilities) {
                return .render(ComponentSource(object: object), component)
            }
            let reason: OmissionReason = component.since > client.contract ? .version : .capability
            hops += 1
            if hops > 16 {
                report.omit(currentType, reason)
                return .omitted
            }
            if case .object(var inline)? = member(object, "fallback") {
                // The author's own fallback for this instance; it inherits the id.
                let next = inline["type"]?.stringValue ?? "unknown"
                report.hit(currentType, next)
                omitDescendants(of: object, component: component, report: &report)
                if inline["id"] == nil, let id = object["id"] { inline["id"] = id }
                object = inline
                currentType = next
                continue
            }
            switch component.fallback {
            case .omit:
                report.omit(currentType, reason)
                omitDescendants(of: object, component: component, report: &report)
                return .omitted
            case .component(let next, _, let set):
                report.hit(currentType, next)
                // Children the fallback does not carry over are gone: count them.
                if !component.fallbackKeepsChildren {
                    omitDescendants(of: object, component: component, report: &report)
                }
                if component.fallbackPlan != nil, let target = components[next], target.since <= client.contract,
                    client.has(target.capabilities)
                {
                    // The usual case, one hop to something renderable: written straight from
                    // the original through the mapping, never built.
                    return .render(ComponentSource(object: object, replacedBy: component), target)
                }
                var replacement = JSONObject(minimumCapacity: component.fallbackMap.count + set.count + 2)
                replacement["type"] = .string(next)
                if let id = member(object, "id") { replacement["id"] = id }
                for (target, source) in component.fallbackMap { if let value = member(object, source) { replacement[target] = value } }
                for (target, constant) in set { replacement[target] = constant }
                object = replacement
                currentType = next
            }
        }
    }

    /// Counts every component inside one that is being dropped or replaced without them.
    fileprivate func omitDescendants(of object: JSONObject, component: CompiledComponent?, report: inout FitReport) {
        if let component {
            for field in component.nestedFields { omitMember(field.name, of: object, report: &report) }
        } else {
            for field in Self.childFieldsOfUnknown { omitMember(field, of: object, report: &report) }
        }
    }

    /// Where an unknown type may keep components.
    private static let childFieldsOfUnknown = ["components", "items"]

    private func omitMember(_ field: String, of object: JSONObject, report: inout FitReport) {
        switch member(object, field) {
        case .array(let children)?:
            for child in children { countSubtree(child, report: &report) }
        case .object(let child)?:
            countSubtree(.object(child), report: &report)
        default:
            break
        }
    }

    private func countSubtree(_ value: JSONValue, report: inout FitReport) {
        guard case .object(let object) = value else { return }
        let type = object["type"]?.stringValue ?? "unknown"
        let component = components[type]
        report.omit(component == nil ? "unknown" : type, .parentOmitted)
        omitDescendants(of: object, component: component, report: &report)
    }

    /// What fitting an action did to it.
    fileprivate enum ActionOutcome {
        /// The client performs it as it is.
        case kept
        /// The client performs its fallback instead: the same members under another type.
        case retyped(JSONObject, type: String)
        /// The client cannot perform it (nor a fallback), or it was never signable for this
        /// client (`unavailable`).
        case unsupported
        /// It opens a URL off the allowlist.
        case blocked
    }

    fileprivate func fitAction(_ value: JSONValue, client: Client, report: inout FitReport) -> ActionOutcome {
        guard case .object(let object) = value, var type = member(object, "type")?.stringValue else { return .unsupported }
        var hops = 0
        while true {
            guard let action = actions[type] else { return .unsupported }
            if action.since <= client.contract, client.has(action.capabilities) {
                if action.opensURL, let isAllowedURL {
                    let url = object["url"]?.stringValue ?? ""
                    guard isAllowedURL(url) else {
                        report.blockedURLs.append(url)
                        return .blocked
                    }
                }
                return hops == 0 ? .kept : .retyped(object, type: type)
            }
            hops += 1
            guard let fallback = action.fallback, hops <= 8 else { return .unsupported }
            report.hit(type, fallback)
            type = fallback
        }
    }
}

/// One walk of the downgrade pass: reads the tree, decides, and writes the fitted bytes.
private struct FitPass: ~Copyable {
    let fitter: ScreenFitter
    let client: ScreenFitter.Client
    var output = JSONWriter()
    var report = FitReport()

    init(fitter: ScreenFitter, client: ScreenFitter.Client) {
        self.fitter = fitter
        self.client = client
    }

    // MARK: Replies and screens

    mutating func writeReply(_ reply: JSONValue) {
        guard case .object(let object) = reply else { return output.write(reply) }
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        object.forEachMember { key, member in
            switch key {
            case "screen":
                output.writeKey(key, first: &first)
                writeScreen(member)
            case "submit", "cancel", "retry":
                switch fitter.fitAction(member, client: client, report: &report) {
                case .kept:
                    output.writeKey(key, first: &first)
                    output.write(member)
                case .retyped(let action, let type):
                    output.writeKey(key, first: &first)
                    writeAction(action, type: type)
                case .unsupported, .blocked:
                    return
                }
            default:
                output.writeKey(key, first: &first)
                output.write(member)
            }
        }
        output.write(byte: UInt8(ascii: "}"))
    }

    mutating func writeScreen(_ screen: JSONValue) {
        guard case .object(let object) = screen else { return output.write(screen) }
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        object.forEachMember { key, member in
            let mark = output.position
            let wasFirst = first
            output.writeKey(key, first: &first)
            switch (key, member) {
            case ("header", _):
                if !writeComponent(member) {
                    output.truncate(to: mark)
                    first = wasFirst
                }
            case ("sections", .array(let sections)):
                writeSections(sections)
            case ("secondaryButtons", .array(let buttons)):
                writeButtons(buttons)
            default:
                output.write(member)
            }
        }
        output.write(byte: UInt8(ascii: "}"))
    }

    /// Sections; one left without components is dropped. Anything that is not an object
    /// goes without a count (it was never content).
    mutating func writeSections(_ sections: [JSONValue]) {
        output.write(byte: UInt8(ascii: "["))
        var firstSection = true
        for section in sections {
            guard case .object(let object) = section else { continue }
            let mark = output.position
            if !firstSection { output.write(byte: UInt8(ascii: ",")) }
            output.write(byte: UInt8(ascii: "{"))
            var first = true
            var written = 0
            object.forEachMember { key, member in
                output.writeKey(key, first: &first)
                if same(key, "components"), case .array(let components) = member {
                    written = writeList(components)
                } else {
                    output.write(member)
                }
            }
            output.write(byte: UInt8(ascii: "}"))
            if written == 0 {
                report.omit("section", .empty)
                output.truncate(to: mark)
            } else {
                firstSection = false
            }
        }
        output.write(byte: UInt8(ascii: "]"))
    }

    /// The screen's menu: an item whose action the client cannot perform is dropped.
    mutating func writeButtons(_ buttons: [JSONValue]) {
        output.write(byte: UInt8(ascii: "["))
        var firstButton = true
        for button in buttons {
            guard case .object(let object) = button else { continue }
            var fitted: (action: JSONObject, type: String)?
            if let action = member(object, "action") {
                switch fitter.fitAction(action, client: client, report: &report) {
                case .kept: break
                case .retyped(let action, let type): fitted = (action, type)
                case .unsupported, .blocked:
                    report.omit("menuItem", .action)
                    continue
                }
            }
            if !firstButton { output.write(byte: UInt8(ascii: ",")) }
            firstButton = false
            output.write(byte: UInt8(ascii: "{"))
            var first = true
            object.forEachMember { key, member in
                output.writeKey(key, first: &first)
                if let fitted, same(key, "action") { writeAction(fitted.action, type: fitted.type) } else { output.write(member) }
            }
            output.write(byte: UInt8(ascii: "}"))
        }
        output.write(byte: UInt8(ascii: "]"))
    }

    /// An action performed as its fallback: its members, under the fallback's type.
    mutating func writeAction(_ action: JSONObject, type: String) {
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        action.forEachMember { key, member in
            output.writeKey(key, first: &first)
            if same(key, "type") { output.write(type) } else { output.write(member) }
        }
        output.write(byte: UInt8(ascii: "}"))
    }

    // MARK: Components

    /// Writes the components the client can render; returns how many.
    mutating func writeList(_ components: [JSONValue]) -> Int {
        output.write(byte: UInt8(ascii: "["))
        var written = 0
        for component in components {
            let mark = output.position
            if written > 0 { output.write(byte: UInt8(ascii: ",")) }
            if writeComponent(component) {
                written += 1
            } else {
                output.truncate(to: mark)
            }
        }
        output.write(byte: UInt8(ascii: "]"))
        return written
    }

    /// Writes one component as the client can render it; false when it is dropped (counted
    /// here; the caller takes back whatever was written).
    mutating func writeComponent(_ value: JSONValue) -> Bool {
        guard case .render(let source, let component) = fitter.resolve(value, client: client, report: &report) else {
            return false
        }
        // Actions first: a component whose action the client cannot perform goes, with
        // everything inside it.
        // Actions performed as their fallback (components have one action field, rarely more).
        var retyped: (field: String, action: JSONObject, type: String)?
        var moreRetyped: [(field: String, action: JSONObject, type: String)] = []
        for name in component.actionFields {
            guard let member = source.member(name) else { continue }
            let reason: OmissionReason
            switch fitter.fitAction(member, client: client, report: &report) {
            case .kept: continue
            case .retyped(let action, let type):
                if retyped == nil { retyped = (name, action, type) } else { moreRetyped.append((name, action, type)) }
                continue
            case .unsupported: reason = .action
            case .blocked: reason = .urlBlocked
            }
            report.omit(component.name, reason)
            if !component.nestedFields.isEmpty {
                fitter.omitDescendants(of: source.materialized, component: component, report: &report)
            }
            return false
        }
        if retyped == nil, component.nestedFields.isEmpty, source.plan == nil, member(source.object, "fallback") == nil {
            // A leaf the client renders as it is (the usual case): plain encoding.
            output.write(JSONValue.object(source.object))
            report.rendered += 1
            return true
        }
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        var children = 0
        var hasChildren = false
        source.forEachMember { key, member in
            if same(key, "fallback") { return }
            guard let nested = component.nested(key) else {
                output.writeKey(key, first: &first)
                if let action = retyped.flatMap({ same($0.field, key) ? $0 : nil }) ?? moreRetyped.first(where: { same($0.field, key) }) {
                    writeAction(action.action, type: action.type)
                } else {
                    output.write(member)
                }
                return
            }
            let mark = output.position
            let wasFirst = first
            output.writeKey(key, first: &first)
            if nested.isList {
                let written = member.arrayValue.map { writeList($0) } ?? { output.write(raw: "[]"); return 0 }()
                if let childrenField = component.childrenField, same(key, childrenField) {
                    hasChildren = true
                    children = written
                }
            } else if !writeComponent(member) {
                output.truncate(to: mark)
                first = wasFirst
            }
        }
        output.write(byte: UInt8(ascii: "}"))
        if component.childrenField != nil, !hasChildren || children == 0 {
            report.omit(component.name, .empty)
            return false
        }
        report.rendered += 1
        return true
    }
}

/// A component type as the downgrade pass reads it: what it needs, and which of its fields
/// hold actions and nested components (sorted, so every run checks them in the same order).
private final class CompiledComponent: Sendable {
    let name: String
    let since: Int
    let capabilities: [String]
    let actionFields: [String]
    let nestedFields: [(name: String, isList: Bool)]

    /// The nested-component field `key`, if it is one.
    @inline(__always)
    func nested(_ key: String) -> (name: String, isList: Bool)? {
        for field in nestedFields where same(field.name, key) { return field }
        return nil
    }
    let childrenField: String?
    let fallback: Fallback
    /// The fallback's field mapping (new name, old name) in a fixed order, so a replacement
    /// encodes to the same bytes — and ETag — in every process.
    let fallbackMap: [(target: String, source: String)]
    /// Whether the contract fallback carries the children over (else they count as omitted).
    let fallbackKeepsChildren: Bool
    /// The contract fallback as a recipe for writing it from the original, when its members
    /// cannot collide (type, id, mapped and constant fields all distinct; nil otherwise,
    /// and the replacement is built the long way).
    let fallbackPlan: FallbackPlan?

    final class FallbackPlan: Sendable {
        let type: JSONValue
        let map: [(target: String, source: String)]
        let set: [(name: String, value: JSONValue)]

        init(type: JSONValue, map: [(target: String, source: String)], set: [(name: String, value: JSONValue)]) {
            self.type = type
            self.map = map
            self.set = set
        }
    }

    init(_ spec: ComponentSpec) {
        name = spec.name
        since = spec.since
        capabilities = spec.capabilities
        let fields = spec.fields.sorted { $0.key < $1.key }
        actionFields = fields.filter { $0.value.type == .action }.map(\.key)
        nestedFields = fields.compactMap { name, field in
            switch field.type {
            case .component: (name, false)
            case .components: (name, true)
            default: nil
            }
        }
        childrenField = spec.childrenField
        fallback = spec.fallback
        if case .component(let type, let map, let set) = spec.fallback {
            fallbackMap = map.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            let names = ["type", "id"] + fallbackMap.map(\.target) + set.keys
            fallbackPlan = Set(names).count == names.count
                ? FallbackPlan(type: .string(type), map: fallbackMap, set: set.map { ($0.key, $0.value) }) : nil
        } else {
            fallbackMap = []
            fallbackPlan = nil
        }
        if case .component(_, let map, _) = spec.fallback, let children = spec.childrenField {
            fallbackKeepsChildren = map.values.contains(children)
        } else {
            fallbackKeepsChildren = spec.childrenField == nil
        }
    }
}

/// An action type as the downgrade pass reads it.
private final class CompiledAction: Sendable {
    let since: Int
    let capabilities: [String]
    let fallback: String?
    let opensURL: Bool

    init(_ spec: ActionSpec) {
        since = spec.since
        capabilities = spec.capabilities
        fallback = spec.fallback
        opensURL = spec.name == "openUrl"
    }
}

/// A fixed set of names, looked up without hashing the string: the contract's type names,
/// read for every component and action of every render. Open addressing on the name's
/// length and first byte, which tell the contract's names apart (a clash costs a probe).
private struct NameTable<Value: Sendable>: Sendable {
    private var slots: [(name: String, value: Value)?]
    private let mask: Int

    init(_ entries: [String: Value]) {
        var size = 16
        while size < entries.count * 4 { size *= 2 }
        mask = size - 1
        slots = Array(repeating: nil, count: size)
        for (name, value) in entries.sorted(by: { $0.key < $1.key }) {
            var index = Self.slot(name) & mask
            while slots[index] != nil { index = (index + 1) & mask }
            slots[index] = (name, value)
        }
    }

    @inline(__always)
    private static func slot(_ name: String) -> Int {
        let utf8 = name.utf8
        guard let first = utf8.first else { return 0 }
        return utf8.count &* 31 &+ Int(first) &* 7
    }

    subscript(name: String) -> Value? {
        var index = Self.slot(name) & mask
        while let slot = slots[index] {
            if same(slot.name, name) { return slot.value }
            index = (index + 1) & mask
        }
        return nil
    }
}

/// What a component is written from: an object of the tree, or — for the contract fallback
/// of one — the original read through the fallback's plan, in the member order building the
/// replacement would give (type, id, mapped fields, constants).
private struct ComponentSource {
    let object: JSONObject
    let plan: CompiledComponent.FallbackPlan?

    init(object: JSONObject) {
        self.object = object
        self.plan = nil
    }

    init(object: JSONObject, replacedBy component: CompiledComponent) {
        self.object = object
        self.plan = component.fallbackPlan
    }

    func member(_ name: String) -> JSONValue? {
        guard let plan else { return BatonContract.member(object, name) }
        if same(name, "type") { return plan.type }
        if same(name, "id") { return BatonContract.member(object, "id") }
        for field in plan.map where same(field.target, name) { return BatonContract.member(object, field.source) }
        for field in plan.set where same(field.name, name) { return field.value }
        return nil
    }

    func forEachMember(_ body: (String, JSONValue) -> Void) {
        guard let plan else { return object.forEachMember(body) }
        body("type", plan.type)
        if let id = BatonContract.member(object, "id") { body("id", id) }
        for field in plan.map {
            if let value = BatonContract.member(object, field.source) { body(field.target, value) }
        }
        for field in plan.set { body(field.name, field.value) }
    }

    /// The source as an object (built, for a replacement; only on the rare paths that count
    /// what a dropped component held).
    var materialized: JSONObject {
        guard plan != nil else { return object }
        var built = JSONObject()
        forEachMember { name, value in built[name] = value }
        return built
    }
}
