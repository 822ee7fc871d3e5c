@testable import BatonFlows
import Foundation
import Testing

@Suite("Parameter patterns")
struct PatternTests {
    /// Every pattern the repository's flows and deep links use.
    static let repositoryPatterns: [String] = {
        let flows = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Flows").standardized
        var patterns = Set<String>()
        let files = FileManager.default.enumerator(at: flows, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where file.pathExtension == "yaml" {
            guard let text = try? String(contentsOf: file, encoding: .utf8) else { continue }
            for line in text.split(separator: "\n") {
                guard let range = line.range(of: "pattern: \"") else { continue }
                let rest = line[range.upperBound...]
                guard let end = rest.lastIndex(of: "\"") else { continue }
                patterns.insert(String(rest[..<end]).replacingOccurrences(of: "\\\\", with: "\\"))
            }
        }
        return patterns.sorted()
    }()

    @Test("the flows' own patterns are all in the fast subset")
    func repositoryPatternsAreSimple() {
        #expect(Self.repositoryPatterns.count >= 6)
        for pattern in Self.repositoryPatterns {
            #expect(SimplePattern(pattern) != nil, "\(pattern) goes to Regex")
        }
    }

    // Swift's Regex takes any script's digits for \d: "UT-١٢٣٤" (Arabic-Indic) and fullwidth
    // digits matched ^UT-\d{4}$, and reached the services that expect 0–9.
    @Test("\\d is 0–9 whatever the text; \\w stays any script's letters")
    func digitsAreASCII() {
        #expect(PatternCache.wholeMatch("^UT-\\d{4}$", "UT-1234"))
        #expect(!PatternCache.wholeMatch("^UT-\\d{4}$", "UT-\u{661}\u{662}\u{663}\u{664}"))
        #expect(!PatternCache.wholeMatch("^UT-\\d{4}$", "UT-\u{FF11}\u{FF12}\u{FF13}\u{FF14}"))
        #expect(!PatternCache.wholeMatch("^(\\d+)$", "\u{661}\u{662}"))
        #expect(PatternCache.wholeMatch("^\\w+$", "Zoë"))
    }

    @Test("outside the subset, the pattern goes to Regex")
    func unsupportedPatterns() {
        for pattern in ["(a|b)", "a|b", "[^a]", "\\w+", "a+?", "a++", "a{2}{3}", ".", "[a--b]", "[a&&b]", "[[:alpha:]]", "a{,3}", "\\s", "a^", "$a"] {
            #expect(SimplePattern(pattern) == nil, "\(pattern) was taken as simple")
        }
    }

    @Test("the subset matches exactly what Regex matches: the flows' patterns and 3 000 random ones, on random texts")
    func agreesWithRegex() throws {
        var generator = SystemRandomNumberGenerator()
        var patterns = Self.repositoryPatterns
        let literals = Array("ab3S-@_ Z09x")
        let classes = ["[0-9a-f-]", "[A-Z0-9]", "[A-Za-z0-9._+-]", "[-ab]", "[a-c\\.]", "[\\d_]", "\\d", "\\.", "\\+", "\\-", "[ab]", "[x-z]"]
        let quantifiers = ["", "", "?", "*", "+", "{2}", "{1,3}", "{0,}", "{2,2}", "{0,1}"]
        for _ in 0..<3000 {
            var pattern = Bool.random(using: &generator) ? "^" : ""
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                pattern += Bool.random(using: &generator) ? String(literals.randomElement(using: &generator)!) : classes.randomElement(using: &generator)!
                pattern += quantifiers.randomElement(using: &generator)!
            }
            if Bool.random(using: &generator) { pattern += "$" }
            patterns.append(pattern)
        }
        let alphabet = Array("ab3S-.+@_ Z09xcyfFé\t\n")
        var checked = 0
        for pattern in patterns {
            guard let simple = SimplePattern(pattern) else { continue }
            let regex = try Regex(pattern)
            // Texts from the alphabet, plus texts built to match: the atoms' own members.
            var texts = (0..<40).map { _ in String((0..<Int.random(in: 0...8, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }) }
            texts.append(String(simple.atoms.flatMap { atom in
                let members = (0..<128).map(UInt8.init).filter(atom.contains)
                return (0..<min(atom.min + Int.random(in: 0...2, using: &generator), atom.max)).map { _ in Character(UnicodeScalar(members.randomElement(using: &generator)!)) }
            }))
            for text in texts {
                let expected = (try? regex.wholeMatch(in: text)) != nil
                if let matched = simple.wholeMatch(text) {
                    #expect(matched == expected, "\(pattern.debugDescription) on \(text.debugDescription)")
                    checked += 1
                }
                #expect(PatternCache.wholeMatch(pattern, text) == expected, "\(pattern.debugDescription) on \(text.debugDescription)")
            }
        }
        #expect(checked > 50_000)
    }
}
