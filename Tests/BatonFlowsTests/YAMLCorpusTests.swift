import BatonFlows
import BatonJSON
import Foundation
import Testing

/// The YAML reader against public corpora (from ../shared/corpora/yaml): nothing crashes or
/// hangs, everything YAML calls invalid is refused, alias bombs and deep nesting are refused.
@Suite("YAML corpora")
struct YAMLCorpusTests {
    static let corpora = Fixtures.root.deletingLastPathComponent().appendingPathComponent("shared/corpora/yaml")

    struct Case: Decodable {
        var id: String
        var name: String
        var fail: Bool
        var yaml: String
        var json_text: String?
    }

    func cases() throws -> [Case] {
        let data = try Data(contentsOf: Self.corpora.appendingPathComponent("yaml-test-suite-subset/yts-subset.json"))
        return try JSONDecoder().decode([Case].self, from: data)
    }

    @Test("yaml-test-suite: every case that must fail is refused; none crashes")
    func testSuite() throws {
        let all = try cases()
        #expect(all.count > 100)
        var accepted = 0
        for entry in all {
            let result = YAMLSource.parse(entry.yaml, file: "\(entry.id).yaml")
            switch result {
            case .success:
                accepted += 1
                #expect(!entry.fail, "\(entry.id) \(entry.name): invalid YAML was accepted")
            case .failure(let diagnostic):
                #expect(diagnostic.severity == .error)
                #expect(diagnostic.location.line >= 1)
            }
        }
        #expect(accepted > 0)
    }

    @Test("yaml-test-suite: what is accepted means what YAML says (compared with the suite's JSON)")
    func sameMeaning() throws {
        var compared = 0
        for entry in try cases() where !entry.fail {
            guard let expected = entry.json_text, case .success(let node) = YAMLSource.parse(entry.yaml, file: "x.yaml"),
                let json = try? JSONValue.parse(Array(expected.utf8))
            else { continue }
            // Compare as text: Baton keeps plain scalars' text and only reads numbers/booleans
            // where a field asks for one, so normalise both sides to strings.
            #expect(Self.textual(node.jsonValue) == Self.textual(json), "\(entry.id) \(entry.name)")
            compared += 1
        }
        #expect(compared > 10)
    }

    static func textual(_ value: JSONValue) -> JSONValue {
        switch value {
        case .null: return .string("")
        case .bool, .int, .double: return .string(value.interpolationText)
        case .string: return value
        case .array(let items): return .array(items.map(textual))
        case .object(let object):
            var copy = JSONObject()
            for key in object.keys.sorted() { copy[key] = textual(object[key]!) }
            return .object(copy)
        }
    }

    @Test("resource limits: the billion-laughs file and duplicate keys are refused")
    func billionLaughsAndDuplicates() throws {
        let laughs = try String(contentsOf: Self.corpora.appendingPathComponent("resource-limits/billion-laughs.yaml"), encoding: .utf8)
        guard case .failure = YAMLSource.parse(laughs, file: "laughs.yaml") else {
            Issue.record("billion laughs accepted")
            return
        }
        let duplicates = try String(contentsOf: Self.corpora.appendingPathComponent("resource-limits/duplicate-keys.yaml.txt"), encoding: .utf8)
        let parts = duplicates.components(separatedBy: "---8<---\n").map { $0.split(separator: "\n").filter { !$0.hasPrefix("#") }.joined(separator: "\n") }
            .filter { !$0.isEmpty }
        #expect(parts.count == 5, "the corpus's five cases, split apart")
        for part in parts {
            guard case .failure(let diagnostic) = YAMLSource.parse(part, file: "dup.yaml") else {
                Issue.record("accepted: \(part)")
                continue
            }
            // The last case overrides a key through a merge (`<<: *b`), refused for its anchor.
            let reason = part.contains("<<") ? "anchors" : "duplicate key"
            #expect(diagnostic.message.contains(reason), "\(part): \(diagnostic)")
        }
    }

    @Test("resource limits: go-yaml's alias and nesting bombs are refused quickly, without a crash")
    func bombs() throws {
        // The recipes from go-yaml's limit tests, built here (the corpus holds the recipes).
        let kb = 1024
        let bombs: [(String, String)] = [
            ("aliases", "{a: &a [{a}" + String(repeating: ",{a}", count: 1000 * kb / 4 - 100) + "], b: &b [*a" + String(repeating: ",*a", count: 99) + "]}"),
            ("nested slices", String(repeating: "[", count: 1000 * kb)),
            ("nested maps", "x: " + String(repeating: "{", count: 1000 * kb)),
            // Under the size cap (2 bytes a level), so that the nesting check is what refuses it.
            ("nested indents", String(repeating: "- ", count: 300 * kb)),
            ("nested indents, then a line", String(repeating: "- ", count: 300 * kb) + "\nx: 1\n"),
            ("slice at max depth", String(repeating: "[", count: 10000) + "1" + String(repeating: ",1", count: 1000) + String(repeating: "]", count: 10000)),
            ("10000-nested lines", String(repeating: "- " + String(repeating: "[", count: 10000) + String(repeating: "]", count: 10000) + "\n", count: 51)),
        ]
        for (name, text) in bombs {
            let started = ContinuousClock.now
            let result = YAMLSource.parse(text, file: "\(name).yaml")
            #expect(ContinuousClock.now - started < .seconds(5), "\(name) took too long")
            if case .success = result { Issue.record("\(name) was accepted") }
            if name.hasPrefix("nested"), case .failure(let diagnostic) = result {
                #expect(diagnostic.message == "nesting deeper than \(YAMLSource.maxDepth) levels", "\(name): \(diagnostic)")
            }
        }
        // Harmless large documents still load.
        let wide = String(repeating: "- " + String(repeating: "a", count: 20) + "\n", count: 20_000)
        guard case .success = YAMLSource.parse(wide, file: "wide.yaml") else {
            Issue.record("a wide, shallow document was refused")
            return
        }
        // A rule of dashes in a block of text is no nesting.
        guard case .success = YAMLSource.parse("description: |\n  " + String(repeating: "-", count: 200) + "\nx: 1\n", file: "rule.yaml") else {
            Issue.record("a rule of dashes in a block scalar was refused")
            return
        }
        // A blank line of many spaces is no nesting.
        guard case .success = YAMLSource.parse("x: 1\n" + String(repeating: " ", count: 600) + "\ny: 2\n", file: "blank.yaml") else {
            Issue.record("a blank line of spaces was refused")
            return
        }
    }
}
