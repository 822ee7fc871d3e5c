import BatonFlows
import BatonJSON
import BatonRuntime

/// Who is looking: screens show user entries only to signed-in users.
enum Account {
    static func register(into registry: inout FlowRegistry) {
        registry.loader("account.me", fields: [FieldSpec("signedIn", .bool), FieldSpec("kind")]) { call in
            ["signedIn": .bool(call.subject.kind == .user), "kind": .string(call.subject.kind.rawValue)]
        }
    }
}
