import BatonJSON

/// The type of a declared argument, as the linter checks it.
public enum ArgumentType: String, Sendable {
    case string, int, bool, any
}

/// A declared argument of an effect, guard or loader.
public struct ArgumentSpec: Sendable, Hashable {
    public var name: String
    public var type: ArgumentType
    public var required: Bool

    public init(_ name: String, _ type: ArgumentType = .string, required: Bool = true) {
        self.name = name
        self.type = type
        self.required = required
    }
}

/// What the linter knows about a named Swift function: its arguments and, for effects, the
/// outcomes it can return.
public struct CallSignature: Sendable {
    public var name: String
    public var arguments: [ArgumentSpec]
    /// Effects only: every outcome the effect can return.
    public var outcomes: [String]
    /// Loaders only: whether the result is a list (for `optionsFrom` and `each`).
    public var returnsList: Bool

    public init(name: String, arguments: [ArgumentSpec] = [], outcomes: [String] = [], returnsList: Bool = false) {
        self.name = name
        self.arguments = arguments
        self.outcomes = outcomes
        self.returnsList = returnsList
    }
}

/// The names an application registered, for linting flows without running them.
public struct FlowCatalog: Sendable {
    public var effects: [String: CallSignature]
    public var guards: [String: CallSignature]
    public var loaders: [String: CallSignature]

    public init(effects: [CallSignature] = [], guards: [CallSignature] = [], loaders: [CallSignature] = []) {
        self.effects = Dictionary(effects.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        self.guards = Dictionary(guards.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        self.loaders = Dictionary(loaders.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
    }
}
