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
    @Test("a scope's encoding does not depend on the order of its names, and tells apart what renders differently")
    func encoded() throws {
        let scope = TemplateScope(["params": ["id": "7"], "data": ["n": 1, "t": "caf\u{E9}"]])
        #expect(scope.encoded == TemplateScope(["data": ["n": 1, "t": "caf\u{E9}"], "params": ["id": "7"]]).encoded)
        #expect(String(decoding: try #require(scope.encoded), as: UTF8.self) == #"{"data":{"n":1,"t":"café"},"params":{"id":"7"}}"#)
        // é decomposed: equal as Swift strings, rendered as other bytes.
        #expect(scope.encoded != TemplateScope(["params": ["id": "7"], "data": ["n": 1, "t": "cafe\u{301}"]]).encoded)
        #expect(scope.encoded != TemplateScope(["params": ["id": "7"], "data": ["t": "caf\u{E9}", "n": 1]]).encoded, "member order")
        #expect(scope.encoded != TemplateScope(["params": ["id": 7], "data": ["n": 1, "t": "caf\u{E9}"]]).encoded)
        #expect(scope.encoded != TemplateScope(["params": ["id": "7"]]).encoded)
        #expect(scope.encoded != TemplateScope(["params": ["id": "7"], "data": ["n": 1, "t": "caf\u{E9}"], "error": nil]).encoded)
        // 1 and 1.0 encode alike, and a template renders them alike.
        #expect(TemplateScope(["n": 1]).encoded == TemplateScope(["n": 1.0]).encoded)
        // NaN and the infinities encode as null but render otherwise ("nan", truthy): no encoding.
        for number in [Double.nan, .infinity, -.infinity] {
            #expect(TemplateScope(["data": ["list": [1, .double(number)]]]).encoded == nil)
        }
        #expect(TemplateScope(["data": ["list": [1, nil]]]).encoded != nil)
        let text = try TemplateString(parsing: "n = {{n}}")
        #expect(text.render(TemplateScope(["n": 1])) == text.render(TemplateScope(["n": 1.0])))
    }
}
