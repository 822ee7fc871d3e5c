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
    public var registry: ContractRegistry { storage.registry }
    /// Decides `openUrl` targets (the deep-link allowlist's outbound rules); nil allows all.
    public var isAllowedURL: (@Sendable (String) -> Bool)? { storage.isAllowedURL }
    /// The contract's types as the pass reads them.
    fileprivate var compiled: CompiledContract { storage.compiled }
    /// The contract's capability names, one bit each (see `CapabilityMask`).
    fileprivate var capabilityBits: CapabilityBits { storage.capabilityBits }

    /// All of the above in one object: every fit copies the fitter into its pass, and a copy of
    /// one reference is one retain, where a copy of the fields it holds was nine.
    private final class Storage: Sendable {
        let registry: ContractRegistry
        let isAllowedURL: (@Sendable (String) -> Bool)?
        let compiled: CompiledContract
        let capabilityBits: CapabilityBits

        init(registry: ContractRegistry, isAllowedURL: (@Sendable (String) -> Bool)?) {
            self.registry = registry
            self.isAllowedURL = isAllowedURL
            let bits = CapabilityBits(registry.components.values.flatMap(\.capabilities) + registry.actions.values.flatMap(\.capabilities))
            self.capabilityBits = bits
            self.compiled = CompiledContract(registry, bits: bits)
        }
    }
    private let storage: Storage

    public init(registry: ContractRegistry, isAllowedURL: (@Sendable (String) -> Bool)? = nil) {
        storage = Storage(registry: registry, isAllowedURL: isAllowedURL)
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
        func has(_ capabilities: UnsafeBufferPointer<String>) -> Bool {
            capabilities.allSatisfy(self.capabilities.contains)
        }
    }

    // MARK: - Entry points

    /// The wire bytes of a `componentScreen` fitted to `client`, and what fitting did.
    public func encodeScreen(_ screen: JSONValue, for client: Client) -> (bytes: [UInt8], report: FitReport) {
        var pass = FitPass(fitter: self, client: client)
        withUnsafePointer(to: screen) { pass.writeScreen(at: $0) }
        return (pass.output.bytes(), pass.report)
    }

    /// The wire bytes of a command reply fitted to `client`: its screen, and its top-level
    /// actions (`submit`, `cancel`, `retry`).
    public func encodeReply(_ reply: JSONValue, for client: Client) -> (bytes: [UInt8], report: FitReport) {
        var pass = FitPass(fitter: self, client: client)
        withUnsafePointer(to: reply) { pass.writeReply(at: $0) }
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

/// A component type, a fallback plan and an action type of the compiled contract, where
/// they lie in its arena.
private typealias Component = UnsafePointer<CompiledComponent>
private typealias Plan = UnsafePointer<CompiledComponent.FallbackPlan>
private typealias Action = UnsafePointer<CompiledAction>

/// What a component resolves to for one client.
private enum Resolution {
    /// The object as it is.
    case asIs(Component)
    /// The object's contract fallback, written from the object through the fallback's plan
    /// (the usual replacement: one hop to something renderable, never built).
    case planned(Plan, Component)
    /// Another object — an inline fallback, or a replacement built the long way — as it is
    /// or through a plan.
    case replaced(JSONObject, Plan?, Component)
    /// Dropped (already counted).
    case omitted
}

/// What fitting an action did to it.
private enum ActionOutcome {
    /// The client performs it as it is.
    case kept
    /// The client performs its fallback instead: the same members under another type.
    case retyped(JSONObjectView, type: String)
    /// The client cannot perform it (nor a fallback), or it was never signable for this
    /// client (`unavailable`).
    case unsupported
    /// It opens a URL off the allowlist.
    case blocked
}

/// One walk of the downgrade pass: reads the tree, decides, and writes the fitted bytes.
///
/// The tree is read where it lies: arrays and objects through views of their storage
/// (`JSONObjectView`), which the encoder writes from directly; only what a fallback builds
/// is copied. (Copying a container out of the tree costs a retain and a release of each
/// storage it holds, which was most of what the pass used to spend.)
private struct FitPass: ~Copyable {
    let fitter: ScreenFitter
    let components: NameTable<CompiledComponent>
    let actions: NameTable<CompiledAction>
    /// `,"id":` as encoded (in the contract's arena, which `fitter` keeps).
    let idKey: UnsafeBufferPointer<UInt8>
    let client: ScreenFitter.Client
    /// The client's capabilities as bits (see `CapabilityBits`).
    let capabilities: UInt64
    var output = JSONWriter()
    var report = FitReport()
    /// Reads the tree's containers in place.
    let reader = TreeReader()
    /// Whether short names are compared as words (`SmallUTF8.layoutHolds`).
    let comparesWords = SmallUTF8.layoutHolds

    init(fitter: ScreenFitter, client: ScreenFitter.Client) {
        self.fitter = fitter
        self.components = fitter.compiled.components
        self.actions = fitter.compiled.actions
        self.idKey = fitter.compiled.idKey
        self.client = client
        self.capabilities = fitter.capabilityBits.mask(of: client.capabilities)
    }

    // MARK: Replies and screens

    mutating func writeReply(at reply: UnsafePointer<JSONValue>) {
        guard let object = reader.object(at: reply) else { return output.write(at: reply) }
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        for index in 0..<object.count {
            let key = object.names + index
            let member = object.values + index
            switch key.pointee {
            case "screen":
                output.writeKey(at: key, first: &first)
                writeScreen(at: member)
            case "submit", "cancel", "retry":
                switch fitAction(at: member) {
                case .kept:
                    output.writeKey(at: key, first: &first)
                    output.write(at: member)
                case .retyped(let action, let type):
                    output.writeKey(at: key, first: &first)
                    output.write(action, type: type)
                case .unsupported, .blocked:
                    continue
                }
            default:
                output.writeKey(at: key, first: &first)
                output.write(at: member)
            }
        }
        output.write(byte: UInt8(ascii: "}"))
    }

    mutating func writeScreen(at screen: UnsafePointer<JSONValue>) {
        guard let object = reader.object(at: screen) else { return output.write(at: screen) }
        output.write(byte: UInt8(ascii: "{"))
        var first = true
        for index in 0..<object.count {
            let key = object.names + index
            let member = object.values + index
            let mark = output.position
            let wasFirst = first
            output.writeKey(at: key, first: &first)
            if sameName(key, "header", comparesWords: comparesWords) {
                if !writeComponent(at: member) {
                    output.truncate(to: mark)
                    first = wasFirst
                }
            } else if sameName(key, "sections", comparesWords: comparesWords), let sections = reader.elements(at: member) {
                writeSections(sections)
            } else if sameName(key, "secondaryButtons", comparesWords: comparesWords), let buttons = reader.elements(at: member) {
                writeButtons(buttons)
            } else {
                output.write(at: member)
            }
        }
        output.write(byte: UInt8(ascii: "}"))
    }

    /// Sections; one left without components is dropped. Anything that is not an object
    /// goes without a count (it was never content).
    mutating func writeSections(_ sections: UnsafeBufferPointer<JSONValue>) {
        output.write(byte: UInt8(ascii: "["))
        var firstSection = true
        for section in sections.indices {
            guard let object = reader.object(at: sections.baseAddress.unsafelyUnwrapped + section) else { continue }
            let mark = output.position
            if !firstSection { output.write(byte: UInt8(ascii: ",")) }
            output.write(byte: UInt8(ascii: "{"))
            var first = true
            var written = 0
            for index in 0..<object.count {
                output.writeKey(at: object.names + index, first: &first)
                if sameName(object.names + index, "components", comparesWords: comparesWords), let components = reader.elements(at: object.values + index) {
                    written = writeList(components)
                } else {
                    output.write(at: object.values + index)
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
    mutating func writeButtons(_ buttons: UnsafeBufferPointer<JSONValue>) {
        output.write(byte: UInt8(ascii: "["))
        var firstButton = true
        for button in buttons.indices {
            guard let object = reader.object(at: buttons.baseAddress.unsafelyUnwrapped + button) else { continue }
            var fitted: (action: JSONObjectView, type: String)?
            if let action = object.value("action") {
                switch fitAction(at: action) {
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
            for index in 0..<object.count {
                output.writeKey(at: object.names + index, first: &first)
                if let fitted, sameName(object.names + index, "action", comparesWords: comparesWords) {
                    output.write(fitted.action, type: fitted.type)
                } else {
                    output.write(at: object.values + index)
                }
            }
            output.write(byte: UInt8(ascii: "}"))
        }
        output.write(byte: UInt8(ascii: "]"))
    }

    // MARK: Components

    /// Writes the components the client can render; returns how many.
    mutating func writeList(_ components: UnsafeBufferPointer<JSONValue>) -> Int {
        output.write(byte: UInt8(ascii: "["))
        var written = 0
        for index in components.indices {
            let mark = output.position
            if written > 0 { output.write(byte: UInt8(ascii: ",")) }
            if writeComponent(at: components.baseAddress.unsafelyUnwrapped + index) {
                written += 1
            } else {
                output.truncate(to: mark)
            }
        }
        output.write(byte: UInt8(ascii: "]"))
        return written
    }

    /// Writes the component at `value` as the client can render it; false when it is
    /// dropped (counted here; the caller takes back whatever was written).
    mutating func writeComponent(at value: UnsafePointer<JSONValue>) -> Bool {
        guard let object = reader.object(at: value) else {
            report.omit("unknown", .unknownType)
            return false
        }
        switch resolve(object) {
        case .asIs(let component): return writeComponent(object, plan: nil, as: component)
        case .planned(let plan, let component): return writeComponent(object, plan: plan, as: component)
        case .replaced(let replacement, let plan, let component):
            return replacement.withView { writeComponent($0, plan: plan, as: component) }
        case .omitted: return false
        }
    }

    /// Writes `object` — through `plan` when it is being replaced by its contract fallback —
    /// as a `component`; false when it is dropped.
    mutating func writeComponent(_ object: JSONObjectView, plan: Plan?, as component: Component) -> Bool {
        // Actions first: a component whose action the client cannot perform goes, with
        // everything inside it.
        // Actions performed as their fallback (components have one action field, rarely more).
        var retyped: (field: String, action: JSONObjectView, type: String)?
        var moreRetyped: [(field: String, action: JSONObjectView, type: String)] = []
        for name in component.pointee.actionFields {
            guard let member = ComponentSource.member(name, of: object, plan: plan) else { continue }
            let reason: OmissionReason
            switch fitAction(at: member) {
            case .kept: continue
            case .retyped(let action, let type):
                if retyped == nil { retyped = (name, action, type) } else { moreRetyped.append((name, action, type)) }
                continue
            case .unsupported: reason = .action
            case .blocked: reason = .urlBlocked
            }
            report.omit(component.pointee.name, reason)
            omitDescendants(of: object, plan: plan, component: component)
            return false
        }
        if retyped == nil, component.pointee.nestedFields.isEmpty, plan == nil, object.index(of: "fallback") == nil,
            !component.pointee.hasMistypedText(object)
        {
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
            output.write(encoded: plan.pointee.opening)
            members.first = false
            if let id = object.value("id") {
                output.write(encoded: idKey)
                output.write(at: id)
            }
            for field in plan.pointee.map {
                guard let value = object.value(field.source) else { continue }
                if let key = field.key, !component.pointee.isText(field.target) || holdsText(value)
                    || (value.pointee.isNull && !component.pointee.isRequiredText(field.target))
                {
                    output.write(encoded: key)
                    output.write(at: value)
                } else {
                    writeMember(field.target, value, &members)
                }
            }
            if let constants = plan.pointee.constants {
                output.write(encoded: constants)
            } else {
                for index in plan.pointee.constantNames.indices {
                    writeMember(plan.pointee.constantNames[index], plan.pointee.constant(index), &members)
                }
            }
        } else {
            for index in 0..<object.count { writeMember(object.names[index], object.values + index, &members) }
        }
        output.write(byte: UInt8(ascii: "}"))
        if component.pointee.childrenField != nil, !members.hasChildren || members.children == 0 {
            report.omit(component.pointee.name, .empty)
            return false
        }
        report.rendered += 1
        return true
    }

    /// A component being written member by member.
    struct MemberWriting {
        let component: Component
        /// Actions performed as their fallback, by field.
        let retyped: (field: String, action: JSONObjectView, type: String)?
        let moreRetyped: [(field: String, action: JSONObjectView, type: String)]
        var first = true
        /// Whether the children field was written, and how many children it kept.
        var hasChildren = false
        var children = 0

        /// The fallback of the action in `field`, if it is performed as one.
        func retypedAction(_ field: String) -> (action: JSONObjectView, type: String)? {
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
    mutating func writeMember(_ key: String, _ value: UnsafePointer<JSONValue>, _ members: inout MemberWriting) {
        if same(key, "fallback") { return }
        guard let nested = members.component.pointee.nested(key) else {
            output.writeKey(key, first: &members.first)
            if let action = members.retypedAction(key) {
                output.write(action.action, type: action.type)
            } else if !holdsTextOrNull(value), members.component.pointee.isText(key) {
                output.write(value.pointee.interpolationText)
            } else if value.pointee.isNull, members.component.pointee.isRequiredText(key) {
                output.write("")
            } else {
                output.write(at: value)
            }
            return
        }
        let mark = output.position
        let wasFirst = members.first
        output.writeKey(key, first: &members.first)
        if nested.isList {
            let written: Int
            if let components = reader.elements(at: value) {
                written = writeList(components)
            } else {
                output.write(raw: "[]")
                written = 0
            }
            if let childrenField = members.component.pointee.childrenField, same(key, childrenField) {
                members.hasChildren = true
                members.children = written
            }
        } else if !writeComponent(at: value) {
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
        guard let names = capabilities.names else { return capabilities.bits & ~self.capabilities == 0 }
        return client.has(names)
    }

    @inline(__always)
    func renders(_ component: Component) -> Bool {
        renders(since: component.pointee.since, capabilities: component.pointee.capabilities)
    }

    @inline(__always)
    func renders(_ action: Action) -> Bool {
        renders(since: action.pointee.since, capabilities: action.pointee.capabilities)
    }

    /// Follows the fallbacks of a component until it is renderable or dropped; counts each
    /// replacement and the omission, with the components it takes down.
    mutating func resolve(_ object: JSONObjectView) -> Resolution {
        // The usual cases, decided on the object in place: renderable as it is, or through
        // its contract fallback in one planned hop (and no inline fallback to try first).
        guard let type = object.string("type") else {
            report.omit("unknown", .unknownType)
            return .omitted
        }
        if let component = components[type] {
            if renders(component) { return .asIs(component) }
            if let plan = component.pointee.fallbackPlan, let target = component.pointee.fallbackTarget, renders(target),
                !hasInlineFallback(object)
            {
                report.hit(type, target.pointee.name)
                // Children the fallback does not carry over are gone: count them.
                if !component.pointee.fallbackKeepsChildren { omitDescendants(of: object, component: component) }
                return .planned(plan, target)
            }
        }
        return resolveSlowly(object, built: nil, type: type, hops: 0)
    }

    /// Whether `object` carries an inline fallback (an object; anything else is ignored).
    @inline(__always)
    func hasInlineFallback(_ object: JSONObjectView) -> Bool {
        guard let fallback = object.value("fallback"), case .object = fallback.pointee else { return false }
        return true
    }

    /// `resolve` the long way, one hop at a time: inline fallbacks, chains of fallbacks,
    /// replacements built as objects, omissions. `object` is the tree's component, or —
    /// after a hop — `built`, the replacement a hop made.
    mutating func resolveSlowly(_ object: JSONObjectView, built: JSONObject?, type: String, hops: Int) -> Resolution {
        guard let component = components[type] else {
            report.omit("unknown", .unknownType)
            omitDescendants(of: object, component: nil)
            return .omitted
        }
        if renders(component) {
            return built.map { .replaced($0, nil, component) } ?? .asIs(component)
        }
        let reason: OmissionReason = component.pointee.since > client.contract ? .version : .capability
        // A chain is bounded by the number of types.
        if hops >= 16 {
            report.omit(type, reason)
            return .omitted
        }
        if let fallback = object.value("fallback"), case .object(var inline) = fallback.pointee {
            // The author's own fallback for this instance; it inherits the id.
            let next = inline["type"]?.stringValue ?? "unknown"
            report.hit(type, next)
            omitDescendants(of: object, component: component)
            if inline["id"] == nil, let id = object.value("id") { inline["id"] = id.pointee }
            let replacement = inline
            return replacement.withView { resolveSlowly($0, built: replacement, type: next, hops: hops + 1) }
        }
        switch component.pointee.fallback {
        case .omit:
            report.omit(type, reason)
            omitDescendants(of: object, component: component)
            return .omitted
        case .component(let next, _, let set):
            report.hit(type, next)
            // Children the fallback does not carry over are gone: count them.
            if !component.pointee.fallbackKeepsChildren { omitDescendants(of: object, component: component) }
            if let plan = component.pointee.fallbackPlan, let target = component.pointee.fallbackTarget, renders(target) {
                // One hop to something renderable: written straight from the object
                // through the mapping, never built.
                return built.map { .replaced($0, plan, target) } ?? .planned(plan, target)
            }
            var replacement = JSONObject(minimumCapacity: component.pointee.fallbackMap.count + set.count + 2)
            replacement["type"] = .string(next)
            if let id = object.value("id") { replacement["id"] = id.pointee }
            for (target, source) in component.pointee.fallbackMap { if let value = object.value(source) { replacement[target] = value.pointee } }
            for (target, constant) in set { replacement[target] = constant }
            let made = replacement
            return made.withView { resolveSlowly($0, built: made, type: next, hops: hops + 1) }
        }
    }

    /// Counts every component inside one that is being dropped or replaced without them:
    /// `object` read as `component` (through `plan` when it is being replaced by its
    /// contract fallback), or as an unknown type.
    mutating func omitDescendants(of object: JSONObjectView, plan: Plan? = nil, component: Component?) {
        if let component {
            for field in component.pointee.nestedFields {
                if let value = ComponentSource.member(field.name, of: object, plan: plan) { omitComponents(at: value) }
            }
        } else {
            for field in Self.childFieldsOfUnknown {
                if let value = object.value(field) { omitComponents(at: value) }
            }
        }
    }

    /// Where an unknown type may keep components.
    private static let childFieldsOfUnknown = ["components", "items"]

    /// Counts the component, or the list of them, at `value`.
    private mutating func omitComponents(at value: UnsafePointer<JSONValue>) {
        if let children = reader.elements(at: value) {
            for index in children.indices { countSubtree(at: children.baseAddress.unsafelyUnwrapped + index) }
        } else {
            countSubtree(at: value)
        }
    }

    private mutating func countSubtree(at value: UnsafePointer<JSONValue>) {
        guard let object = reader.object(at: value) else { return }
        let type = object.string("type") ?? "unknown"
        let component = components[type]
        report.omit(component == nil ? "unknown" : type, .parentOmitted)
        omitDescendants(of: object, component: component)
    }

    /// What the client does with the action at `value`.
    mutating func fitAction(at value: UnsafePointer<JSONValue>) -> ActionOutcome {
        guard let object = reader.object(at: value), let name = object.string("type"), var action = actions[name] else { return .unsupported }
        var type = name
        var hops = 0
        while true {
            if renders(action) {
                if action.pointee.opensURL, let isAllowedURL = fitter.isAllowedURL {
                    let url = object.string("url") ?? ""
                    guard isAllowedURL(url) else {
                        report.blockedURLs.append(url)
                        return .blocked
                    }
                }
                return hops == 0 ? .kept : .retyped(object, type: type)
            }
            hops += 1
            guard let fallback = action.pointee.fallback, hops <= 8 else { return .unsupported }
            report.hit(type, fallback)
            guard let next = action.pointee.fallbackAction else { return .unsupported }
            action = next
            type = fallback
        }
    }
}

/// The capabilities a contract type needs, as the pass checks them: bits over the contract's
/// capability names (`CapabilityBits`), so a check is one mask rather than hashing each name
/// into the client's set — or the names, for a contract with more than 64 of them (`names`
/// not nil).
private struct CapabilityMask {
    let bits: UInt64
    let names: UnsafeBufferPointer<String>?
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
    func mask(for capabilities: [String], in arena: Arena) -> CapabilityMask {
        guard let bits else { return CapabilityMask(bits: 0, names: arena.store(capabilities)) }
        return CapabilityMask(bits: capabilities.reduce(0) { $0 | bits[$1, default: 0] }, names: nil)
    }

    /// The bits of the contract's capabilities that `capabilities` (a client's) include.
    func mask(of capabilities: Set<String>) -> UInt64 {
        guard let bits else { return 0 }
        return bits.reduce(0) { capabilities.contains($1.key) ? $0 | $1.value : $0 }
    }
}

/// Memory that lives as long as the compiled contract: the tables the pass reads on every
/// render, as plain pointers. Reading a class's property, or an array held by one, across a
/// call costs a retain and a release, each an atomic operation; reading through a pointer
/// costs neither. Filled once, in the fitter's `init`, and only read after.
private final class Arena: @unchecked Sendable {
    private var frees: [() -> Void] = []

    /// `elements`, kept until the arena goes.
    func store<Element>(_ elements: [Element]) -> UnsafeBufferPointer<Element> {
        let buffer = UnsafeMutableBufferPointer<Element>.allocate(capacity: max(elements.count, 1))
        let count = buffer.initialize(fromContentsOf: elements)
        frees.append {
            buffer.baseAddress.unsafelyUnwrapped.deinitialize(count: count)
            buffer.deallocate()
        }
        return UnsafeBufferPointer(start: buffer.baseAddress, count: count)
    }

    /// Room for `count` values, initialized by the caller before the arena goes (for values
    /// that point at each other: the pointers are known before the values are made).
    func reserve<Element>(_ count: Int) -> UnsafeMutableBufferPointer<Element> {
        let buffer = UnsafeMutableBufferPointer<Element>.allocate(capacity: max(count, 1))
        frees.append {
            buffer.baseAddress.unsafelyUnwrapped.deinitialize(count: count)
            buffer.deallocate()
        }
        return UnsafeMutableBufferPointer(start: buffer.baseAddress, count: count)
    }

    deinit { for free in frees { free() } }
}

/// The contract compiled for the pass: its component and action types by name, each a
/// value in the arena (see `Arena`), and the few encoded names the pass writes. Unchecked:
/// what its pointers point at is written once, in `init`, and only read after.
private struct CompiledContract: @unchecked Sendable {
    let components: NameTable<CompiledComponent>
    let actions: NameTable<CompiledAction>
    /// `,"id":`
    let idKey: UnsafeBufferPointer<UInt8>
    /// Owns everything above.
    let arena: Arena

    init(_ registry: ContractRegistry, bits: CapabilityBits) {
        let arena = Arena()
        let componentNames = registry.components.keys.sorted()
        let components: UnsafeMutableBufferPointer<CompiledComponent> = arena.reserve(componentNames.count)
        let componentAt = Dictionary(uniqueKeysWithValues: componentNames.enumerated().map { ($1, UnsafePointer(components.baseAddress! + $0)) })
        for (index, name) in componentNames.enumerated() {
            (components.baseAddress! + index).initialize(to: CompiledComponent(registry.components[name]!, bits: bits, registry: registry, at: componentAt, in: arena))
        }
        let actionNames = registry.actions.keys.sorted()
        let actions: UnsafeMutableBufferPointer<CompiledAction> = arena.reserve(actionNames.count)
        let actionAt = Dictionary(uniqueKeysWithValues: actionNames.enumerated().map { ($1, UnsafePointer(actions.baseAddress! + $0)) })
        for (index, name) in actionNames.enumerated() {
            (actions.baseAddress! + index).initialize(to: CompiledAction(registry.actions[name]!, bits: bits, at: actionAt, in: arena))
        }
        self.components = NameTable(componentAt)
        self.actions = NameTable(actionAt)
        self.idKey = arena.store(Array(#","id":"#.utf8))
        self.arena = arena
    }
}

/// A nested-component field of a component type.
private struct NestedField {
    let name: String
    let isList: Bool
}

/// A component type as the downgrade pass reads it: what it needs, and which of its fields
/// hold actions and nested components (sorted, so every run checks them in the same order).
/// Lives in the compiled contract's arena; the pass holds pointers to it.
private struct CompiledComponent {
    let name: String
    let since: Int
    let capabilities: CapabilityMask
    let actionFields: UnsafeBufferPointer<String>
    let nestedFields: UnsafeBufferPointer<NestedField>
    /// The fields the contract types `string` or `url`: a value of another type there (a
    /// single-reference template keeps what it refers to: a number, an object from a service)
    /// is written as its text.
    let textFields: UnsafeBufferPointer<String>
    /// The text fields the contract marks required (`string!`, `url!`): null there (a service
    /// that answered without the member a template refers to) is written as "", which the
    /// client decodes as the string it must be.
    let requiredTextFields: UnsafeBufferPointer<String>
    let childrenField: String?
    let fallback: Fallback
    /// The fallback's field mapping (new name, old name) in a fixed order, so a replacement
    /// encodes to the same bytes — and ETag — in every process.
    let fallbackMap: [(target: String, source: String)]
    /// Whether the contract fallback carries the children over (else they count as omitted).
    let fallbackKeepsChildren: Bool
    /// The contract fallback's type, when it is one of the contract.
    let fallbackTarget: UnsafePointer<CompiledComponent>?
    /// The contract fallback as a recipe for writing it from the original, when its members
    /// cannot collide (type, id, mapped and constant fields all distinct; nil otherwise,
    /// and the replacement is built the long way).
    let fallbackPlan: UnsafePointer<FallbackPlan>?

    /// The contract fallback as a recipe for writing it from the original. Its member names
    /// and constants are encoded once, here: the type, each mapped field's name with its
    /// comma — unless the target reads that field as a component or an action, which the
    /// pass fits member by member — and the constants, when none of them is one the pass
    /// must fit. (`type` and `id` are never fields: the loader refuses them.)
    struct FallbackPlan {
        /// A mapped field, with its encoded `,"target":` when it is written as it is.
        struct Mapped {
            let target: String
            let source: String
            let key: UnsafeBufferPointer<UInt8>?
        }

        /// Mapped fields in a fixed order.
        let map: UnsafeBufferPointer<Mapped>
        /// The constants' names, in order.
        let constantNames: UnsafeBufferPointer<String>
        /// The type and the constants as values, where the pass reads them in place like
        /// the tree's (`ComponentSource.member`): the type, then each constant in order.
        let values: UnsafeBufferPointer<JSONValue>
        /// `"type":"<target>"`, the first member.
        let opening: UnsafeBufferPointer<UInt8>
        /// `,"name":value` for every constant, in order; nil when one must be fitted.
        let constants: UnsafeBufferPointer<UInt8>?

        /// `target`: the fields of the type the plan writes (none when it is not in the
        /// contract, which the loader refuses).
        init(type: String, map: [(target: String, source: String)], set: [(name: String, value: JSONValue)], target: [String: FieldSpec], in arena: Arena) {
            /// Fields the pass fits rather than writes: nested components and actions (and
            /// `fallback`, which it drops, should a mapping name it).
            func isFitted(_ name: String) -> Bool {
                guard let field = target[name] else { return name == "fallback" }
                return field.type == .component || field.type == .components || field.type == .action
            }
            func key(_ name: String) -> [UInt8] { Array(",".utf8) + JSONEncoding.encode(.string(name)) + Array(":".utf8) }
            self.map = arena.store(map.map { Mapped(target: $0.target, source: $0.source, key: isFitted($0.target) ? nil : arena.store(key($0.target))) })
            constantNames = arena.store(set.map(\.name))
            values = arena.store([.string(type)] + set.map(\.value))
            opening = arena.store(JSONEncoding.encode(.string("type")) + Array(":".utf8) + JSONEncoding.encode(.string(type)))
            constants = set.contains { isFitted($0.name) } ? nil : arena.store(set.flatMap { key($0.name) + JSONEncoding.encode($0.value) })
        }

        /// The type the plan writes, as a value.
        var typeValue: UnsafePointer<JSONValue> { values.baseAddress.unsafelyUnwrapped }

        /// The value of constant `index`.
        func constant(_ index: Int) -> UnsafePointer<JSONValue> { values.baseAddress.unsafelyUnwrapped + 1 + index }
    }

    /// Whether the contract types `key` as text (`string` or `url`).
    @inline(__always)
    func isText(_ key: String) -> Bool {
        for field in textFields where same(field, key) { return true }
        return false
    }

    /// Whether the contract marks `key` as required text.
    @inline(__always)
    func isRequiredText(_ key: String) -> Bool {
        for field in requiredTextFields where same(field, key) { return true }
        return false
    }

    /// Whether a member of `object` holds something other than text (or null) where the
    /// contract types it as text, or null where it requires text: the component is then written
    /// member by member.
    @inline(__always)
    func hasMistypedText(_ object: JSONObjectView) -> Bool {
        for index in 0..<object.count {
            // Read in place: a copy of each member's value (its string's retain) cost every
            // leaf component more than the check itself.
            let value = object.values + index
            if holdsText(value) { continue }
            if holdsNull(value) ? isRequiredText(object.names[index]) : isText(object.names[index]) { return true }
        }
        return false
    }

    /// The nested-component field `key`, if it is one.
    @inline(__always)
    func nested(_ key: String) -> NestedField? {
        for field in nestedFields where same(field.name, key) { return field }
        return nil
    }

    /// `componentAt`: where every type of the contract is (or will be) compiled.
    init(_ spec: ComponentSpec, bits: CapabilityBits, registry: ContractRegistry, at componentAt: [String: UnsafePointer<CompiledComponent>], in arena: Arena) {
        name = spec.name
        since = spec.since
        capabilities = bits.mask(for: spec.capabilities, in: arena)
        let fields = spec.fields.sorted { $0.key < $1.key }
        actionFields = arena.store(fields.filter { $0.value.type == .action }.map(\.key))
        textFields = arena.store(fields.filter { $0.value.type == .string || $0.value.type == .url }.map(\.key))
        requiredTextFields = arena.store(fields.filter { ($0.value.type == .string || $0.value.type == .url) && $0.value.required }.map(\.key))
        nestedFields = arena.store(
            fields.compactMap { name, field in
                switch field.type {
                case .component: NestedField(name: name, isList: false)
                case .components: NestedField(name: name, isList: true)
                default: nil
                }
            })
        childrenField = spec.childrenField
        fallback = spec.fallback
        if case .component(let type, let map, let set) = spec.fallback {
            fallbackMap = map.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            fallbackTarget = componentAt[type]
            let names = ["type", "id"] + fallbackMap.map(\.target) + set.keys
            if Set(names).count == names.count {
                let plan = FallbackPlan(
                    type: type, map: fallbackMap, set: set.map { ($0.key, $0.value) }, target: registry.components[type]?.fields ?? [:], in: arena)
                fallbackPlan = UnsafePointer(arena.store([plan]).baseAddress!)
            } else {
                fallbackPlan = nil
            }
        } else {
            fallbackMap = []
            fallbackTarget = nil
            fallbackPlan = nil
        }
        if case .component(_, let map, _) = spec.fallback, let children = spec.childrenField {
            fallbackKeepsChildren = map.values.contains(children)
        } else {
            fallbackKeepsChildren = spec.childrenField == nil
        }
    }
}

/// An action type as the downgrade pass reads it (in the compiled contract's arena).
private struct CompiledAction {
    let since: Int
    let capabilities: CapabilityMask
    /// The action performed instead, by name and where it is compiled (nil when the
    /// contract does not have it).
    let fallback: String?
    let fallbackAction: UnsafePointer<CompiledAction>?
    let opensURL: Bool

    init(_ spec: ActionSpec, bits: CapabilityBits, at actionAt: [String: UnsafePointer<CompiledAction>], in arena: Arena) {
        since = spec.since
        capabilities = bits.mask(for: spec.capabilities, in: arena)
        fallback = spec.fallback
        fallbackAction = spec.fallback.flatMap { actionAt[$0] }
        opensURL = spec.name == "openUrl"
    }
}

/// A fixed set of names, looked up without hashing the string: the contract's type names,
/// read for every component and action of every render. Open addressing on the name's
/// length and first byte, which tell the contract's names apart (a clash costs a probe).
private struct NameTable<Value>: @unchecked Sendable {
    /// Slot by slot; an empty slot has no value (and the empty name).
    private let names: [String]
    private let values: [UnsafePointer<Value>?]
    private let mask: Int

    init(_ entries: [String: UnsafePointer<Value>]) {
        var size = 16
        while size < entries.count * 4 { size *= 2 }
        mask = size - 1
        var names = Array(repeating: "", count: size)
        var values = [UnsafePointer<Value>?](repeating: nil, count: size)
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

    subscript(name: String) -> UnsafePointer<Value>? {
        var index = Self.slot(name) & mask
        while let value = values[index] {
            if same(names[index], name) { return value }
            index = (index + 1) & mask
        }
        return nil
    }
}

/// Whether `value` is a string.
@inline(__always)
private func holdsText(_ value: UnsafePointer<JSONValue>) -> Bool {
    if case .string = value.pointee { return true }
    return false
}

/// Whether `value` is null.
@inline(__always)
private func holdsNull(_ value: UnsafePointer<JSONValue>) -> Bool {
    if case .null = value.pointee { return true }
    return false
}

/// Whether `value` is a string or null: what a field the contract types as text may hold.
@inline(__always)
private func holdsTextOrNull(_ value: UnsafePointer<JSONValue>) -> Bool {
    switch value.pointee {
    case .string, .null: true
    default: false
    }
}

/// What a component is written from: an object of the tree, or — for the contract fallback
/// of one — the object read through the fallback's plan, as building the replacement would
/// give it (type, id, mapped fields, constants).
private enum ComponentSource {
    /// Where the source's member `name` is: in the object, or a constant of the plan.
    static func member(_ name: String, of object: JSONObjectView, plan: Plan?) -> UnsafePointer<JSONValue>? {
        guard let plan else { return object.value(name) }
        if same(name, "type") { return plan.pointee.typeValue }
        if same(name, "id") { return object.value("id") }
        for field in plan.pointee.map where same(field.target, name) { return object.value(field.source) }
        for index in plan.pointee.constantNames.indices where same(plan.pointee.constantNames[index], name) { return plan.pointee.constant(index) }
        return nil
    }
}
