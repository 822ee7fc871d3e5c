import BatonFlows
import BatonJSON
import BatonPostgres
import Logging

/// What an effect, guard or loader receives: its arguments (already interpolated), who is
/// calling, and the command's database transaction.
public struct FlowInvocation: Sendable {
    public let arguments: JSONObject
    public let call: FlowCall
    /// The command's transaction: everything written here commits or rolls back with the
    /// session change.
    public let database: FlowDatabase
    public let logger: Logger

    public var subject: FlowSubject { call.subject }

    /// A text argument; a missing or non-text value is a definition bug the linter should have
    /// caught, reported as an invalid call.
    public func string(_ name: String) throws -> String {
        guard let value = arguments[name] else { throw FlowCallError.invalid("argument '\(name)' is missing") }
        switch value {
        case .string(let text): return text
        case .int, .double, .bool: return value.interpolationText
        default: throw FlowCallError.invalid("argument '\(name)' must be text")
        }
    }

    /// An optional text argument (nil when missing, null or empty).
    public func optionalString(_ name: String) -> String? {
        guard let value = arguments[name], !value.isNull else { return nil }
        let text = value.interpolationText
        return text.isEmpty ? nil : text
    }

    /// A whole-number argument (accepts numeric text).
    public func int(_ name: String) throws -> Int {
        if let number = arguments[name]?.intValue { return number }
        if let text = arguments[name]?.stringValue, let number = Int(text) { return number }
        throw FlowCallError.invalid("argument '\(name)' must be a whole number")
    }
}

/// The effects, guards and loaders an application provides, registered by name like routes:
///
/// ```swift
/// registry.effect(
///     "favourites.add", arguments: [ArgumentSpec("playlist")], outcomes: ["added"], fields: [FieldSpec("name")]
/// ) { call in
///     try await call.database.query("INSERT INTO favourites ... ON CONFLICT DO NOTHING", [...])
///     return EffectResult("added", ["name": .string(name)])
/// }
/// ```
public struct FlowRegistry: Sendable {
    public typealias Effect = @Sendable (FlowInvocation) async throws -> EffectResult
    public typealias Guard = @Sendable (FlowInvocation) async throws -> Bool
    public typealias Loader = @Sendable (FlowInvocation) async throws -> JSONValue

    private(set) var effects: [String: (CallSignature, Effect)] = [:]
    private(set) var guards: [String: (CallSignature, Guard)] = [:]
    private(set) var loaders: [String: (CallSignature, Loader)] = [:]

    public init() {}

    /// Registers an effect: it changes data and reports one of `outcomes`. `fields` are those of
    /// the data it returns (`{{result.<field>}}`, the union over its outcomes); the linter
    /// checks references against them, and leaves them unchecked when nil.
    public mutating func effect(
        _ name: String, arguments: [ArgumentSpec] = [], outcomes: [String], fields: [FieldSpec]? = nil, _ run: @escaping Effect
    ) {
        precondition(effects[name] == nil, "effect '\(name)' is registered twice")
        effects[name] = (CallSignature(name: name, arguments: arguments, outcomes: outcomes, fields: fields), run)
    }

    /// Registers a guard: a yes/no question a transition asks first.
    public mutating func guardCheck(_ name: String, arguments: [ArgumentSpec] = [], _ run: @escaping Guard) {
        precondition(guards[name] == nil, "guard '\(name)' is registered twice")
        guards[name] = (CallSignature(name: name, arguments: arguments), run)
    }

    /// Registers a loader: reads data for templates (`{{data.<name>}}`, `optionsFrom`, `each`).
    /// `fields` are those of the object it returns, or of each element when it returns a list;
    /// the linter checks references against them, and leaves them unchecked when nil.
    public mutating func loader(
        _ name: String, arguments: [ArgumentSpec] = [], returnsList: Bool = false, fields: [FieldSpec]? = nil, _ run: @escaping Loader
    ) {
        precondition(loaders[name] == nil, "loader '\(name)' is registered twice")
        loaders[name] = (CallSignature(name: name, arguments: arguments, returnsList: returnsList, fields: fields), run)
    }

    /// Adds everything another registry holds (a domain module registers into its own).
    public mutating func merge(_ other: FlowRegistry) {
        for (name, entry) in other.effects { precondition(effects[name] == nil, "effect '\(name)' is registered twice"); effects[name] = entry }
        for (name, entry) in other.guards { precondition(guards[name] == nil, "guard '\(name)' is registered twice"); guards[name] = entry }
        for (name, entry) in other.loaders { precondition(loaders[name] == nil, "loader '\(name)' is registered twice"); loaders[name] = entry }
    }

    /// The signatures, for the linter.
    public var catalog: FlowCatalog {
        FlowCatalog(effects: effects.values.map(\.0), guards: guards.values.map(\.0), loaders: loaders.values.map(\.0))
    }
}

/// Runs registry entries inside one command's transaction.
struct DatabaseFlowHost: FlowHost {
    let registry: FlowRegistry
    let database: FlowDatabase
    let logger: Logger

    init(registry: FlowRegistry, connection: PostgresConnection, logger: Logger) {
        self.registry = registry
        self.database = FlowDatabase(connection)
        self.logger = logger
    }

    func runGuard(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> Bool {
        guard let entry = registry.guards[name] else { throw FlowCallError.invalid("guard '\(name)' is not registered") }
        return try await entry.1(FlowInvocation(arguments: arguments, call: call, database: database, logger: logger))
    }

    func runEffect(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> EffectResult {
        guard let entry = registry.effects[name] else { throw FlowCallError.invalid("effect '\(name)' is not registered") }
        let result = try await entry.1(FlowInvocation(arguments: arguments, call: call, database: database, logger: logger))
        guard entry.0.outcomes.contains(result.outcome) else {
            throw FlowCallError.invalid("effect '\(name)' returned undeclared outcome '\(result.outcome)'")
        }
        return result
    }

    func runLoader(_ name: String, arguments: JSONObject, call: FlowCall) async throws -> JSONValue {
        guard let entry = registry.loaders[name] else { throw FlowCallError.invalid("loader '\(name)' is not registered") }
        return try await entry.1(FlowInvocation(arguments: arguments, call: call, database: database, logger: logger))
    }
}
