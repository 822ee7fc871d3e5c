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

/// Where the member `key` of an object is. A small object is scanned with `same` (the
/// objects of a screen have a handful of members; the ordered dictionary's own lookup
/// hashes the key).
@inline(__always)
func memberIndex(_ object: JSONObject, _ key: String) -> Int? {
    guard object.count < 16 else { return object.index(forKey: key) }
    // The keys' own storage: `keys.elements` would make an array of them (a retain and a release).
    return object.keys.withContiguousStorageIfAvailable { keys in
        for index in keys.indices where same(keys[index], key) { return index }
        return nil
    } ?? object.index(forKey: key)
}

/// The member `key` of an object.
@inline(__always)
func member(_ object: JSONObject, _ key: String) -> JSONValue? {
    guard let index = memberIndex(object, key) else { return nil }
    return object.values[index]
}

/// The member `key` of an object, if it is a string.
@inline(__always)
func stringMember(_ object: JSONObject, _ key: String) -> String? {
    guard let index = memberIndex(object, key), case .string(let text) = object.values[index] else { return nil }
    return text
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
    /// The contract's capability names, one bit each (see `CapabilityMask`).
    fileprivate let capabilityBits: CapabilityBits

    public init(registry: ContractRegistry, isAllowedURL: (@Sendable (String) -> Bool)? = nil) {
        self.registry = registry
        self.isAllowedURL = isAllowedURL
        let bits = CapabilityBits(registry.components.values.flatMap(\.capabilities) + registry.actions.values.flatMap(\.capabilities))
        self.capabilityBits = bits
        self.components = NameTable(registry.components.mapValues { CompiledComponent($0, bits: bits, registry: registry) })
        self.actions = NameTable(registry.actions.mapValues { CompiledAction($0, bits: bits) })
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
}

/// What a component resolves to for one client.
private enum Resolution {
    /// The object as it is.
    case asIs(CompiledComponent)
    /// The object's contract fallback, written from the object through the fallback's plan
    /// (the usual replacement: one hop to something renderable, never built).
    case planned(CompiledComponent.FallbackPlan, CompiledComponent)
    /// Another object — an inline fallback, or a replacement built the long way — as it is
    /// or through a plan.
    case replaced(JSONObject, CompiledComponent.FallbackPlan?, CompiledComponent)
    /// Dropped (already counted).
    case omitted
}

/// What fitting an action did to it.
private enum ActionOutcome {
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

/// One walk of the downgrade pass: reads the tree, decides, and writes the fitted bytes.
///
/// The tree is read in place wherever it can be: a component is looked at through borrowed
/// objects and written by the encoder straight from the tree; only what a fallback builds is
/// copied. (Copying a member out of the tree costs a retain and a release per reference it
/// holds, which is most of what the pass used to spend.)
private struct FitPass: ~Copyable {
    let fitter: ScreenFitter
    let client: ScreenFitter.Client
    /// The client's capabilities as bits (see `CapabilityBits`).
    let capabilities: UInt64
    var output = JSONWriter()
    var report = FitReport()

    init(fitter: ScreenFitter, client: ScreenFitter.Client) {
        self.fitter = fitter
        self.client = client
        self.capabilities = fitter.capabilityBits.mask(of: client.capabilities)
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
                switch fitAction(member) {
                case .kept:
                    output.writeKey(key, first: &first)
                    output.write(member)
                case .retyped(let action, let type):
                    output.writeKey(key, first: &first)
                    output.write(action, type: type)
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
                switch fitAction(action) {
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
                if let fitted, same(key, "action") { output.write(fitted.action, type: fitted.type) } else { output.write(member) }
            }
            output.write(byte: UInt8(ascii: "}"))
        }
        output.write(byte: UInt8(ascii: "]"))
    }

    // MARK: Components

    /// Writes the components the client can render; returns how many.
    mutating func writeList(_ components: [JSONValue]) -> Int {
        output.write(byte: UInt8(ascii: "["))
        var written = 0
        for index in components.indices {
            let mark = output.position
            if written > 0 { output.write(byte: UInt8(ascii: ",")) }
            // By index, so the component is copied out of the list once, not twice.
            let isWritten: Bool
            if case .object(let object) = components[index] {
                isWritten = writeComponent(object: object)
            } else {
                report.omit("unknown", .unknownType)
                isWritten = false
            }
            if isWritten {
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
        guard case .object(let object) = value else {
            report.omit("unknown", .unknownType)
            return false
        }
        return writeComponent(object: object)
    }

    /// `writeComponent(_:)` for a component that is an object.
    mutating func writeComponent(object: JSONObject) -> Bool {
        switch resolve(object) {
        case .asIs(let component): return writeComponent(object, plan: nil, as: component)
        case .planned(let plan, let component): return writeComponent(object, plan: plan, as: component)
        case .replaced(let replacement, let plan, let component): return writeComponent(replacement, plan: plan, as: component)
        case .omitted: return false
        }
    }

    /// Writes `object` — through `plan` when it is being replaced by its contract fallback —
    /// as a `component`; false when it is dropped.
    mutating func writeComponent(_ object: JSONObject, plan: CompiledComponent.FallbackPlan?, as component: CompiledComponent) -> Bool {
        // Actions first: a component whose action the client cannot perform goes, with
        // everything inside it.
        // Actions performed as their fallback (components have one action field, rarely more).
        var retyped: (field: String, action: JSONObject, type: String)?
        var moreRetyped: [(field: String, action: JSONObject, type: String)] = []
        for name in component.actionFields {
            guard let member = ComponentSource.member(name, of: object, plan: plan) else { continue }
            let outcome: ActionOutcome
            switch member {
            case .member(let index): outcome = fitAction(object, at: index)
            case .constant(let value): outcome = fitAction(value)
            }
            let reason: OmissionReason
            switch outcome {
            case .kept: continue
            case .retyped(let action, let type):
                if retyped == nil { retyped = (name, action, type) } else { moreRetyped.append((name, action, type)) }
                continue
            case .unsupported: reason = .action
            case .blocked: reason = .urlBlocked
            }
            report.omit(component.name, reason)
            if !component.nestedFields.isEmpty {
                omitDescendants(of: ComponentSource.materialized(object, plan: plan), component: component)
            }
            return false
        }
        if retyped == nil, component.nestedFields.isEmpty, plan == nil, memberIndex(object, "fallback") == nil {
            // A leaf the client renders as it is (the usual case): plain encoding.
            output.write(object)
            report.rendered += 1
            return true
        }
        output.write(byte: UInt8(ascii: "{"))
        var members = MemberWriting(component: component, retyped: retyped, moreRetyped: moreRetyped)
        if let plan {
            // The replacement's members in the order building it would give (type, id,
            // mapped fields, constants), their names and the constants written as encoded
            // when the plan was made.
            output.write(encoded: plan.opening)
            members.first = false
            if let index = memberIndex(object, "id") {
                output.write(encoded: CompiledComponent.FallbackPlan.idKey)
                output.write(valueAt: index, of: object)
            }
            for field in plan.map {
                guard let index = memberIndex(object, field.source) else { continue }
                if let key = field.key {
                    output.write(encoded: key)
                    output.write(valueAt: index, of: object)
                } else {
                    writeMember(field.target, .member(index), of: object, &members)
                }
            }
            if let constants = plan.constants {
                output.write(encoded: constants)
            } else {
                for field in plan.set { writeMember(field.name, .constant(field.value), of: object, &members) }
            }
        } else {
            for index in 0..<object.count { writeMember(object.keys[index], .member(index), of: object, &members) }
        }
        output.write(byte: UInt8(ascii: "}"))
        if component.childrenField != nil, !members.hasChildren || members.children == 0 {
            report.omit(component.name, .empty)
            return false
        }
        report.rendered += 1
        return true
    }

    /// Where a member written member by member comes from.
    enum MemberSource {
        /// The member at this index of the object being written, read in place.
        case member(Int)
        /// A constant of the contract fallback.
        case constant(JSONValue)
    }

    /// A component being written member by member.
    struct MemberWriting {
        let component: CompiledComponent
        /// Actions performed as their fallback, by field.
        let retyped: (field: String, action: JSONObject, type: String)?
        let moreRetyped: [(field: String, action: JSONObject, type: String)]
        var first = true
        /// Whether the children field was written, and how many children it kept.
        var hasChildren = false
        var children = 0

        /// The fallback of the action in `field`, if it is performed as one.
        func retypedAction(_ field: String) -> (action: JSONObject, type: String)? {
            guard let first = retyped?.field else { return nil }
            if same(first, field) { return retyped.map { ($0.action, $0.type) } }
            for index in moreRetyped.indices where same(moreRetyped[index].field, field) {
                return (moreRetyped[index].action, moreRetyped[index].type)
            }
            return nil
        }
    }

    /// One member of a component written member by member: nested components are fitted,
    /// actions performed as their fallback are retyped, the rest is written as it is.
    mutating func writeMember(_ key: String, _ source: MemberSource, of object: JSONObject, _ members: inout MemberWriting) {
        if same(key, "fallback") { return }
        guard let nested = members.component.nested(key) else {
            output.writeKey(key, first: &members.first)
            if let action = members.retypedAction(key) {
                output.write(action.action, type: action.type)
            } else {
                switch source {
                case .member(let index): output.write(valueAt: index, of: object)
                case .constant(let value): output.write(value)
                }
            }
            return
        }
        let member: JSONValue
        switch source {
        case .member(let index): member = object.values[index]
        case .constant(let value): member = value
        }
        let mark = output.position
        let wasFirst = members.first
        output.writeKey(key, first: &members.first)
        if nested.isList {
            let written: Int
            if case .array(let components) = member {
                written = writeList(components)
            } else {
                output.write(raw: "[]")
                written = 0
            }
            if let childrenField = members.component.childrenField, same(key, childrenField) {
                members.hasChildren = true
                members.children = written
            }
        } else if !writeComponent(member) {
            output.truncate(to: mark)
            members.first = wasFirst
        }
    }

    // MARK: Deciding

    /// Whether the client renders (or performs) a type of this version needing these
    /// capabilities.
    @inline(__always)
    func renders(since: Int, capabilities: CapabilityMask) -> Bool {
        guard since <= client.contract else { return false }
        switch capabilities {
        case .bits(let bits): return bits & ~self.capabilities == 0
        case .names(let names): return client.has(names)
        }
    }

    /// Follows the fallbacks of a component until it is renderable or dropped; counts each
    /// replacement and the omission, with the components it takes down.
    mutating func resolve(_ object: JSONObject) -> Resolution {
        // The usual cases, decided on the object in place: renderable as it is, or through
        // its contract fallback in one planned hop (and no inline fallback to try first).
        if let type = stringMember(object, "type"), let component = fitter.components[type] {
            if renders(since: component.since, capabilities: component.capabilities) { return .asIs(component) }
            if case .component(let next, _, _) = component.fallback, let plan = component.fallbackPlan,
                let target = fitter.components[next], renders(since: target.since, capabilities: target.capabilities),
                !hasInlineFallback(object)
            {
                report.hit(type, next)
                // Children the fallback does not carry over are gone: count them.
                if !component.fallbackKeepsChildren { omitDescendants(of: object, component: component) }
                return .planned(plan, target)
            }
        }
        return resolveSlowly(object)
    }

    /// Whether `object` carries an inline fallback (an object; anything else is ignored).
    @inline(__always)
    func hasInlineFallback(_ object: JSONObject) -> Bool {
        guard let index = memberIndex(object, "fallback"), case .object = object.values[index] else { return false }
        return true
    }

    /// `resolve` the long way: inline fallbacks, chains of fallbacks, replacements built as
    /// objects, omissions.
    mutating func resolveSlowly(_ original: JSONObject) -> Resolution {
        var object = original
        guard let type = stringMember(object, "type") else {
            report.omit("unknown", .unknownType)
            return .omitted
        }
        var hops = 0
        var currentType = type
        // Replace until renderable (a chain is bounded by the number of types).
        while true {
            guard let component = fitter.components[currentType] else {
                report.omit("unknown", .unknownType)
                omitDescendants(of: object, component: nil)
                return .omitted
            }
            if renders(since: component.since, capabilities: component.capabilities) {
                return .replaced(object, nil, component)
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
                omitDescendants(of: object, component: component)
                if inline["id"] == nil, let id = object["id"] { inline["id"] = id }
                object = inline
                currentType = next
                continue
            }
            switch component.fallback {
            case .omit:
                report.omit(currentType, reason)
                omitDescendants(of: object, component: component)
                return .omitted
            case .component(let next, _, let set):
                report.hit(currentType, next)
                // Children the fallback does not carry over are gone: count them.
                if !component.fallbackKeepsChildren {
                    omitDescendants(of: object, component: component)
                }
                if let plan = component.fallbackPlan, let target = fitter.components[next],
                    renders(since: target.since, capabilities: target.capabilities)
                {
                    // One hop to something renderable: written straight from the object
                    // through the mapping, never built.
                    return .replaced(object, plan, target)
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
    mutating func omitDescendants(of object: JSONObject, component: CompiledComponent?) {
        if let component {
            for field in component.nestedFields { omitMember(field.name, of: object) }
        } else {
            for field in Self.childFieldsOfUnknown { omitMember(field, of: object) }
        }
    }

    /// Where an unknown type may keep components.
    private static let childFieldsOfUnknown = ["components", "items"]

    private mutating func omitMember(_ field: String, of object: JSONObject) {
        switch member(object, field) {
        case .array(let children)?:
            for child in children { countSubtree(child) }
        case .object(let child)?:
            countSubtree(.object(child))
        default:
            break
        }
    }

    private mutating func countSubtree(_ value: JSONValue) {
        guard case .object(let object) = value else { return }
        let type = object["type"]?.stringValue ?? "unknown"
        let component = fitter.components[type]
        report.omit(component == nil ? "unknown" : type, .parentOmitted)
        omitDescendants(of: object, component: component)
    }

    mutating func fitAction(_ value: JSONValue) -> ActionOutcome {
        guard case .object(let object) = value else { return .unsupported }
        return fitAction(object: object)
    }

    /// `fitAction(_:)` for the member at `index` of `object`, read from there.
    mutating func fitAction(_ object: JSONObject, at index: Int) -> ActionOutcome {
        guard case .object(let action) = object.values[index] else { return .unsupported }
        return fitAction(object: action)
    }

    mutating func fitAction(object: JSONObject) -> ActionOutcome {
        guard var type = stringMember(object, "type") else { return .unsupported }
        var hops = 0
        while true {
            guard let action = fitter.actions[type] else { return .unsupported }
            if renders(since: action.since, capabilities: action.capabilities) {
                if action.opensURL, let isAllowedURL = fitter.isAllowedURL {
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

/// The capabilities a contract type needs, as the pass checks them: bits over the contract's
/// capability names (`CapabilityBits`), so a check is one mask rather than hashing each name
/// into the client's set — or the names, for a contract with more than 64 of them.
private enum CapabilityMask: Sendable {
    case bits(UInt64)
    case names([String])
}

/// The contract's capability names, one bit each, in name order.
private struct CapabilityBits: Sendable {
    /// Nil when the contract names more than 64 capabilities: checks then go by name.
    private let bits: [String: UInt64]?

    init(_ names: [String]) {
        let distinct = Set(names).sorted()
        bits = distinct.count <= 64 ? Dictionary(uniqueKeysWithValues: distinct.enumerated().map { ($1, UInt64(1) << UInt64($0)) }) : nil
    }

    /// What a type needing `capabilities` checks.
    func mask(for capabilities: [String]) -> CapabilityMask {
        guard let bits else { return .names(capabilities) }
        return .bits(capabilities.reduce(0) { $0 | bits[$1, default: 0] })
    }

    /// The bits of the contract's capabilities that `capabilities` (a client's) include.
    func mask(of capabilities: Set<String>) -> UInt64 {
        guard let bits else { return 0 }
        return bits.reduce(0) { capabilities.contains($1.key) ? $0 | $1.value : $0 }
    }
}

/// A component type as the downgrade pass reads it: what it needs, and which of its fields
/// hold actions and nested components (sorted, so every run checks them in the same order).
private final class CompiledComponent: Sendable {
    let name: String
    let since: Int
    let capabilities: CapabilityMask
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

    /// The contract fallback as a recipe for writing it from the original. Its member names
    /// and constants are encoded once, here: the type, each mapped field's name with its
    /// comma — unless the target reads that field as a component or an action, which the
    /// pass fits member by member — and the constants, when none of them is one the pass
    /// must fit. (`type` and `id` are never fields: the loader refuses them.)
    final class FallbackPlan: Sendable {
        let type: JSONValue
        /// Mapped fields in a fixed order, each with its encoded `,"target":` when it is
        /// written as it is.
        let map: [(target: String, source: String, key: [UInt8]?)]
        let set: [(name: String, value: JSONValue)]
        /// `"type":"<target>"`, the first member.
        let opening: [UInt8]
        /// `,"name":value` for every constant, in order; nil when one must be fitted.
        let constants: [UInt8]?

        static let idKey = Array(#","id":"#.utf8)

        /// `target`: the fields of the type the plan writes (none when it is not in the
        /// contract, which the loader refuses).
        init(type: String, map: [(target: String, source: String)], set: [(name: String, value: JSONValue)], target: [String: FieldSpec]) {
            /// Fields the pass fits rather than writes: nested components and actions (and
            /// `fallback`, which it drops, should a mapping name it).
            func isFitted(_ name: String) -> Bool {
                guard let field = target[name] else { return name == "fallback" }
                return field.type == .component || field.type == .components || field.type == .action
            }
            func key(_ name: String) -> [UInt8] { Array(",".utf8) + JSONEncoding.encode(.string(name)) + Array(":".utf8) }
            self.type = .string(type)
            self.map = map.map { ($0.target, $0.source, isFitted($0.target) ? nil : key($0.target)) }
            self.set = set
            opening = JSONEncoding.encode(.string("type")) + Array(":".utf8) + JSONEncoding.encode(self.type)
            constants = set.contains { isFitted($0.name) } ? nil : set.flatMap { key($0.name) + JSONEncoding.encode($0.value) }
        }
    }

    init(_ spec: ComponentSpec, bits: CapabilityBits, registry: ContractRegistry) {
        name = spec.name
        since = spec.since
        capabilities = bits.mask(for: spec.capabilities)
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
                ? FallbackPlan(type: type, map: fallbackMap, set: set.map { ($0.key, $0.value) }, target: registry.components[type]?.fields ?? [:]) : nil
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
    let capabilities: CapabilityMask
    let fallback: String?
    let opensURL: Bool

    init(_ spec: ActionSpec, bits: CapabilityBits) {
        since = spec.since
        capabilities = bits.mask(for: spec.capabilities)
        fallback = spec.fallback
        opensURL = spec.name == "openUrl"
    }
}

/// A fixed set of names, looked up without hashing the string: the contract's type names,
/// read for every component and action of every render. Open addressing on the name's
/// length and first byte, which tell the contract's names apart (a clash costs a probe).
private struct NameTable<Value: Sendable>: Sendable {
    /// Slot by slot; an empty slot has no value (and the empty name).
    private let names: [String]
    private let values: [Value?]
    private let mask: Int

    init(_ entries: [String: Value]) {
        var size = 16
        while size < entries.count * 4 { size *= 2 }
        mask = size - 1
        var names = Array(repeating: "", count: size)
        var values = [Value?](repeating: nil, count: size)
        for (name, value) in entries.sorted(by: { $0.key < $1.key }) {
            var index = Self.slot(name) & mask
            while values[index] != nil { index = (index + 1) & mask }
            names[index] = name
            values[index] = value
        }
        self.names = names
        self.values = values
    }

    @inline(__always)
    private static func slot(_ name: String) -> Int {
        let utf8 = name.utf8
        guard !utf8.isEmpty else { return 0 }
        return utf8.count &* 31 &+ Int(utf8[utf8.startIndex]) &* 7
    }

    subscript(name: String) -> Value? {
        var index = Self.slot(name) & mask
        while values[index] != nil {
            if same(names[index], name) { return values[index] }
            index = (index + 1) & mask
        }
        return nil
    }
}

/// What a component is written from: an object of the tree, or — for the contract fallback
/// of one — the object read through the fallback's plan, in the member order building the
/// replacement would give (type, id, mapped fields, constants).
private enum ComponentSource {
    /// Where the source's member `name` is: a member of the object, or a constant of the plan.
    static func member(_ name: String, of object: JSONObject, plan: CompiledComponent.FallbackPlan?) -> FitPass.MemberSource? {
        guard let plan else { return memberIndex(object, name).map { .member($0) } }
        if same(name, "type") { return .constant(plan.type) }
        if same(name, "id") { return memberIndex(object, "id").map { .member($0) } }
        for field in plan.map where same(field.target, name) { return memberIndex(object, field.source).map { .member($0) } }
        for field in plan.set where same(field.name, name) { return .constant(field.value) }
        return nil
    }

    /// The source's members in order (for a plan, the order `FitPass.writeComponent` writes
    /// a planned component in).
    static func forEachMember(of object: JSONObject, plan: CompiledComponent.FallbackPlan?, _ body: (String, JSONValue) -> Void) {
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
    static func materialized(_ object: JSONObject, plan: CompiledComponent.FallbackPlan?) -> JSONObject {
        guard plan != nil else { return object }
        var built = JSONObject()
        forEachMember(of: object, plan: plan) { name, value in built[name] = value }
        return built
    }
}
