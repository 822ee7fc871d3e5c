import BatonFlows
import BatonJSON
import Foundation

/// The component contract (`Flows/contract.yaml`): which component and action types exist,
/// the contract version each appeared in, the device capabilities each needs, their fields,
/// and what replaces them for a client that cannot render them.
public struct ContractRegistry: Sendable {
    public var oldest: Int
    public var newest: Int
    public var components: [String: ComponentSpec]
    public var actions: [String: ActionSpec]

    public init(oldest: Int, newest: Int, components: [String: ComponentSpec], actions: [String: ActionSpec]) {
        self.oldest = oldest
        self.newest = newest
        self.components = components
        self.actions = actions
    }

    /// The contract version a request is served as: versions above the newest are served as
    /// the newest; below the oldest are unsupported (nil).
    public func effectiveVersion(_ requested: Int) -> Int? {
        requested < oldest ? nil : min(requested, newest)
    }
}

/// The type of a field, as the linter checks it.
public enum FieldType: String, Sendable, CaseIterable {
    case string, int, bool, url, action, component, components, object, list
}

/// One field of a component or action.
public struct FieldSpec: Sendable, Hashable {
    public var type: FieldType
    public var required: Bool
    /// Allowed values for a string field (empty: any).
    public var values: [String]

    public init(_ type: FieldType, required: Bool = false, values: [String] = []) {
        self.type = type
        self.required = required
        self.values = values
    }
}

/// What a component becomes for a client that cannot render it.
public enum Fallback: Sendable, Hashable {
    /// Drop it.
    case omit
    /// Replace it by a component of `type`: `map` copies fields (new name → old name), `set`
    /// adds constant fields. The result is fitted again, so fallbacks chain.
    case component(type: String, map: [String: String], set: JSONObject)
}

/// A component type.
public struct ComponentSpec: Sendable {
    public var name: String
    public var since: Int
    public var capabilities: [String]
    public var fields: [String: FieldSpec]
    /// For containers: the field holding the children (`components`, `items`).
    public var childrenField: String?
    public var fallback: Fallback
    public var description: String?

    public var isContainer: Bool { childrenField != nil }
}

/// An action type.
public struct ActionSpec: Sendable {
    public var name: String
    public var since: Int
    public var capabilities: [String]
    public var fields: [String: FieldSpec]
    /// An action a client that cannot perform this one performs instead (same fields), or nil
    /// to drop the component carrying it.
    public var fallback: String?
    public var description: String?
}
