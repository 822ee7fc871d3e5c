import BatonJSON
@testable import BatonFlows
import Testing

@Suite("Template objects")
struct TemplateRenderTests {
    static func object(_ pairs: [(String, JSONTemplate)], when: [String]? = nil) -> JSONTemplate {
        .object(TemplateMembers(pairs), when: when.map { JSONTemplate.Condition(path: $0, negated: false) }, each: nil, location: nil)
    }

    @Test("a member that renders nothing is left out, the others keep their order; with all members, the keys are the template's")
    func membersInOrder() throws {
        let hidden = Self.object([("x", .int(1))], when: ["flag"])
        let template = Self.object([
            ("a", .int(1)), ("b", hidden), ("c", .text(try TemplateString(parsing: "{{name}}"))), ("d", .bool(true)),
        ])
        let without = try #require(template.render(TemplateScope(["flag": false, "name": "n"]))?.objectValue)
        #expect(Array(without.keys) == ["a", "c", "d"])
        #expect(without["c"] == "n")
        let with = try #require(template.render(TemplateScope(["flag": true, "name": "n"]))?.objectValue)
        #expect(Array(with.keys) == ["a", "b", "c", "d"])
        #expect(with["b"] == ["x": 1])
        // The first member left out, and the last.
        let first = try #require(Self.object([("b", hidden), ("a", .int(1))]).render(TemplateScope())?.objectValue)
        #expect(Array(first.keys) == ["a"])
        let last = try #require(Self.object([("a", .int(1)), ("b", hidden)]).render(TemplateScope())?.objectValue)
        #expect(Array(last.keys) == ["a"])
    }

    @Test("a repeated key keeps its first place and its last value")
    func repeatedKey() throws {
        let rendered = try #require(Self.object([("a", .int(1)), ("b", .int(2)), ("a", .int(3))]).render(TemplateScope())?.objectValue)
        #expect(Array(rendered.keys) == ["a", "b"])
        #expect(rendered["a"] == 3)
    }
}

@Suite("Template scopes")
struct TemplateScopeTests {
    @Test("two scopes are identical with the same names in any order and identical values")
    func identical() {
        let scope = TemplateScope(["params": ["id": "7"], "data": ["n": 1]])
        #expect(scope.isIdentical(to: TemplateScope(["data": ["n": 1], "params": ["id": "7"]])))
        #expect(!scope.isIdentical(to: TemplateScope(["params": ["id": "7"], "data": ["n": 1.0]])))
        #expect(!scope.isIdentical(to: TemplateScope(["params": ["id": "7"]])))
        #expect(!scope.isIdentical(to: TemplateScope(["params": ["id": "7"], "data": ["n": 1], "error": nil])))
        #expect(!scope.isIdentical(to: TemplateScope(["params": ["id": "7"], "info": ["n": 1]])))
    }
}
