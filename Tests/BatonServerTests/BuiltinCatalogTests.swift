import BatonBuiltinFlows
import BatonFlows
import BatonJSON
@testable import BatonRuntime
import BatonScenarios
import BatonTestSupport
import Synchronization
import Testing

@Suite("The built-in registry's declarations")
struct BuiltinCatalogTests {
    @Test("every built-in effect and loader declares the fields of what it returns")
    func fieldsDeclared() {
        let entries = BuiltinFlowsTests.registry().catalog.entries
        #expect(entries.contains { $0.kind == .effect } && entries.contains { $0.kind == .loader })
        let undeclared = entries.filter { $0.kind != .guard && $0.signature.fields == nil }.map { "\($0.kind.name) \($0.signature.name)" }
        #expect(undeclared.isEmpty, "declare fields: when registering \(undeclared.joined(separator: ", "))")
    }

    @Test("what the built-in effects and loaders return while every scenario runs has only declared fields")
    func returnedFieldsAreDeclared() async throws {
        let seen = Reports()
        let registry = Self.checking(BuiltinFlowsTests.registry()) { problem in seen.lines.withLock { $0.append(problem) } }
        let (scenarios, _) = Scenario.loadAll(directory: BuiltinFlowsTests.flows.appendingPathComponent("tests"))
        #expect(scenarios.count >= 10)
        for scenario in scenarios {
            let environment = try await TestApplication.environment(flows: BuiltinFlowsTests.flows, registry: registry)
            _ = try await environment.pool.withConnection { try await DemoData.seed($0) }
            let runtime = try #require(environment.runtime)
            _ = await ScenarioRunner(runtime: runtime, pool: environment.pool).run(scenario)
            await environment.pool.close()
        }
        let problems = Set(seen.lines.withLock { $0 }).sorted()
        #expect(problems.isEmpty, "returned but not declared:\n\(problems.joined(separator: "\n"))")
    }

    final class Reports: Sendable {
        let lines = Mutex<[String]>([])
    }

    /// A registry that runs `original`'s entries and reports every returned field their
    /// declaration does not list.
    static func checking(_ original: FlowRegistry, report: @escaping @Sendable (String) -> Void) -> FlowRegistry {
        var registry = FlowRegistry()
        for (name, (signature, run)) in original.effects {
            registry.effect(name, arguments: signature.arguments, outcomes: signature.outcomes, fields: signature.fields) { call in
                let result = try await run(call)
                undeclared(result.data, signature.fields, at: "effect \(name) → \(result.outcome)").forEach(report)
                return result
            }
        }
        for (name, (signature, run)) in original.loaders {
            registry.loader(name, arguments: signature.arguments, returnsList: signature.returnsList, fields: signature.fields) { call in
                let value = try await run(call)
                let elements = signature.returnsList ? value.arrayValue ?? [] : [value]
                for element in elements { undeclared(element, signature.fields, at: "loader \(name)").forEach(report) }
                return value
            }
        }
        for (name, (signature, run)) in original.guards {
            registry.guardCheck(name, arguments: signature.arguments, run)
        }
        return registry
    }

    /// The members of `value` (recursively, through declared objects and lists) that `fields`
    /// does not declare.
    static func undeclared(_ value: JSONValue, _ fields: [FieldSpec]?, at place: String) -> [String] {
        guard let fields, case .object(let object) = value else { return [] }
        var found: [String] = []
        for (key, member) in object {
            guard let field = fields.first(where: { $0.name == key }) else {
                found.append("\(place): '\(key)'")
                continue
            }
            let inner = field.type == .list ? member.arrayValue ?? [] : [member]
            for element in inner { found += undeclared(element, field.fields, at: "\(place).\(key)") }
        }
        return found
    }
}
