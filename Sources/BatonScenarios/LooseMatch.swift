import BatonJSON
import Foundation

/// Compares an answer with what a scenario expects, loosely:
///
/// - an expected object needs each of its keys in the answer, matching (extra keys are fine;
///   `key: null` means the key must be absent or null);
/// - an expected list needs each of its elements to match a distinct answer element, in order
///   (others may come between);
/// - a string starting with `~` is a regular expression the whole answer text must match;
///   `"*"` matches anything present;
/// - anything else must be equal.
public enum LooseMatch {
    /// nil when `actual` matches, else where and why not.
    public static func mismatch(expected: JSONValue, actual: JSONValue?, path: String = "") -> String? {
        let here = path.isEmpty ? "the answer" : path
        switch expected {
        case .null:
            if let actual, !actual.isNull { return "\(here) should be absent, is \(short(actual))" }
            return nil
        case .string(let text) where text == "*":
            return actual == nil || actual!.isNull ? "\(here) is missing" : nil
        case .string(let text) where text.hasPrefix("~"):
            guard let actual else { return "\(here) is missing (expected /\(text.dropFirst())/)" }
            let value = actual.interpolationText
            guard let regex = try? Regex(String(text.dropFirst())), (try? regex.wholeMatch(in: value)) != nil else {
                return "\(here) is \(short(actual)), which does not match /\(text.dropFirst())/"
            }
            return nil
        case .object(let object):
            guard case .object(let members)? = actual else { return "\(here) should be an object, is \(actual.map(short) ?? "missing")" }
            for (key, value) in object {
                if let problem = mismatch(expected: value, actual: members[key], path: path.isEmpty ? key : "\(path).\(key)") {
                    return problem
                }
            }
            return nil
        case .array(let items):
            guard case .array(let elements)? = actual else { return "\(here) should be a list, is \(actual.map(short) ?? "missing")" }
            var start = 0
            for (index, item) in items.enumerated() {
                guard let found = (start..<elements.count).first(where: { mismatch(expected: item, actual: elements[$0]) == nil }) else {
                    let closest = elements.count > start ? mismatch(expected: item, actual: elements[start], path: "\(here)[\(start)]") : nil
                    return "\(here) has no element matching expected #\(index + 1) \(short(item))" + (closest.map { " (\($0))" } ?? "")
                }
                start = found + 1
            }
            return nil
        case .int, .double:
            guard let actual else { return "\(here) is missing, expected \(short(expected))" }
            if actual == expected { return nil }
            if case .string(let text) = actual, text == expected.interpolationText { return nil }
            return "\(here) is \(short(actual)), expected \(short(expected))"
        default:
            guard let actual, actual == expected else {
                return "\(here) is \(actual.map(short) ?? "missing"), expected \(short(expected))"
            }
            return nil
        }
    }

    static func short(_ value: JSONValue) -> String {
        let text = value.description
        return text.count > 160 ? String(text.prefix(157)) + "…" : text
    }
}
