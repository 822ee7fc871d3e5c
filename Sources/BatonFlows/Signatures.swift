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

/// The type of a declared result field, as the catalog shows it.
public enum FieldType: String, Sendable {
    case string, int, bool, object, list, any
}

/// A field of what an effect or loader returns, as templates reach it: `{{result.name}}` after
/// an effect, `{{data.<load>.name}}` for a loader, `{{item.name}}` over a list loader.
public struct FieldSpec: Sendable, Hashable {
    public var name: String
    public var type: FieldType
    /// For an object, or a list of objects: the fields of that object (nil: not declared, so
    /// references below this field are not checked).
    public var fields: [FieldSpec]?

    public init(_ name: String, _ type: FieldType = .string, fields: [FieldSpec]? = nil) {
        self.name = name
        self.type = type
        self.fields = fields
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
    /// Effects: the fields of `{{result}}` (the union over outcomes). Loaders: the fields of the
    /// object returned, or of each element of the list. Nil when undeclared: the linter then
    /// does not check references into it.
    public var fields: [FieldSpec]?

    public init(
        name: String, arguments: [ArgumentSpec] = [], outcomes: [String] = [], returnsList: Bool = false, fields: [FieldSpec]? = nil
    ) {
        self.name = name
        self.arguments = arguments
        self.outcomes = outcomes
        self.returnsList = returnsList
        self.fields = fields
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
