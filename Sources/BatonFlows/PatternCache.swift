import Synchronization

/// Compiled regular expressions by source text; flows use a handful, compiled once.
public enum PatternCache {
    private static let cache = Mutex<[String: CompiledPattern]>([:])

    /// Whether `text` matches `pattern` as a whole. An invalid pattern (which the loader
    /// already rejects) never matches.
    public static func wholeMatch(_ pattern: String, _ text: String) -> Bool {
        let compiled: CompiledPattern? = cache.withLock { cache in
            if let compiled = cache[pattern] { return compiled }
            // `\d` is 0–9, as in the fast subset and as the services behind a pattern expect,
            // not any script's digits (Regex's default); `\w` stays any script's letters.
            guard let regex = try? Regex(pattern).asciiOnlyDigits() else { return nil }
            let compiled = CompiledPattern(regex: regex, simple: SimplePattern(pattern))
            cache[pattern] = compiled
            return compiled
        }
        guard let compiled else { return false }
        if let simple = compiled.simple, let matched = simple.wholeMatch(text) { return matched }
        return (try? compiled.regex.wholeMatch(in: text)) != nil
    }
}

private struct CompiledPattern: @unchecked Sendable {  // Regex is immutable once built
    var regex: Regex<AnyRegexOutput>
    var simple: SimplePattern?
}

/// The patterns flows put on parameters — `^[0-9a-f-]{36}$`, `^3S[A-Z0-9]{8,11}$`,
/// `^[A-Za-z0-9._+-]+@example\.com$` — matched on ASCII bytes, which costs a small fraction of
/// what Swift's `Regex` costs (several microseconds a match, on every command and screen).
///
/// Only a subset is taken, one where matching bytes and matching `Character`s agree: a
/// sequence of atoms — a printable ASCII literal, an escaped punctuation mark, `\d`, or a
/// bracket class of such literals and ranges — each with an optional quantifier (`?`, `*`,
/// `+`, `{n}`, `{n,}`, `{n,m}`), between an optional `^` and `$`. A pattern with anything else
/// (groups, alternation, `.`, negated classes, lazy or possessive quantifiers, set operations)
/// is not simple and goes to `Regex`; so does a text with a byte outside printable ASCII.
/// Written by hand: no library in the mirror matches regular expressions but `Regex` itself.
struct SimplePattern: Sendable {
    /// A byte class with how many times it repeats.
    struct Atom: Sendable, Equatable {
        var low: UInt64 = 0  // bytes 0–63
        var high: UInt64 = 0  // bytes 64–127
        var min: Int
        var max: Int

        func contains(_ byte: UInt8) -> Bool {
            byte < 64 ? low & (1 << UInt64(byte)) != 0 : byte < 128 && high & (1 << UInt64(byte - 64)) != 0
        }

        mutating func insert(_ byte: UInt8) {
            if byte < 64 { low |= 1 << UInt64(byte) } else { high |= 1 << UInt64(byte - 64) }
        }

        mutating func insertDigits() {
            for digit in UInt8(ascii: "0")...UInt8(ascii: "9") { insert(digit) }
        }
    }

    let atoms: [Atom]

    /// The pattern's atoms, or nil when it is not in the subset.
    init?(_ pattern: String) {
        var bytes = Array(pattern.utf8)
        if bytes.first == UInt8(ascii: "^") { bytes.removeFirst() }
        if bytes.last == UInt8(ascii: "$"), !Self.endsEscaped(bytes) { bytes.removeLast() }
        var atoms: [Atom] = []
        var index = 0
        while index < bytes.count {
            guard var atom = Self.atom(bytes, &index) else { return nil }
            guard Self.quantifier(bytes, &index, into: &atom) else { return nil }
            atoms.append(atom)
        }
        self.atoms = atoms
    }

    /// Whether all of `text` matches; nil when its bytes are outside the subset (the caller asks
    /// `Regex`).
    func wholeMatch(_ text: String) -> Bool? {
        text.utf8.withContiguousStorageIfAvailable { match($0) } ?? nil
    }

    private func match(_ text: UnsafeBufferPointer<UInt8>) -> Bool? {
        for byte in text where !(0x20...0x7E).contains(byte) { return nil }
        if atoms.count == 1 {
            let atom = atoms[0]
            return (atom.min...atom.max).contains(text.count) && text.allSatisfy(atom.contains)
        }
        // Which positions the atoms so far can end at, atom by atom (no backtracking, so no
        // pattern can take time exponential in the text).
        var reachable = [Bool](repeating: false, count: text.count + 1)
        reachable[0] = true
        var next = reachable
        for atom in atoms {
            for position in next.indices { next[position] = false }
            var any = false
            for start in reachable.indices where reachable[start] {
                var count = 0
                while true {
                    if count >= atom.min {
                        next[start + count] = true
                        any = true
                    }
                    guard count < atom.max, start + count < text.count, atom.contains(text[start + count]) else { break }
                    count += 1
                }
            }
            guard any else { return false }
            swap(&reachable, &next)
        }
        return reachable[text.count]
    }

    private static func endsEscaped(_ bytes: [UInt8]) -> Bool {
        var backslashes = 0
        for byte in bytes.dropLast().reversed() {
            guard byte == UInt8(ascii: "\\") else { break }
            backslashes += 1
        }
        return backslashes % 2 == 1
    }

    private static let special = Set("^$.[]{}()*+?|\\".utf8)

    private static func isPunctuation(_ byte: UInt8) -> Bool {
        (0x21...0x7E).contains(byte) && !(0x30...0x39).contains(byte) && !(0x41...0x5A).contains(byte) && !(0x61...0x7A).contains(byte)
    }

    private static func atom(_ bytes: [UInt8], _ index: inout Int) -> Atom? {
        var atom = Atom(min: 1, max: 1)
        let byte = bytes[index]
        if byte == UInt8(ascii: "[") {
            index += 1
            return bracketClass(bytes, &index, into: atom)
        }
        if byte == UInt8(ascii: "\\") {
            switch escape(bytes, &index) {
            case .digits?: atom.insertDigits()
            case .literal(let escaped)?: atom.insert(escaped)
            case nil: return nil
            }
            return atom
        }
        guard (0x20...0x7E).contains(byte), !special.contains(byte) else { return nil }
        index += 1
        atom.insert(byte)
        return atom
    }

    private enum Escape {
        case digits
        case literal(UInt8)
    }

    /// The escape whose backslash is at `index`: `\d`, or an escaped punctuation mark (itself);
    /// nil for any other, which is Regex's business.
    private static func escape(_ bytes: [UInt8], _ index: inout Int) -> Escape? {
        guard index + 1 < bytes.count else { return nil }
        let escaped = bytes[index + 1]
        index += 2
        if escaped == UInt8(ascii: "d") { return .digits }
        return isPunctuation(escaped) ? .literal(escaped) : nil
    }

    /// A class after its `[`: literals, escaped punctuation, `\d` and ranges, up to `]`.
    private static func bracketClass(_ bytes: [UInt8], _ index: inout Int, into atom: Atom) -> Atom? {
        var atom = atom
        let dash = UInt8(ascii: "-")
        guard index < bytes.count, bytes[index] != UInt8(ascii: "^"), bytes[index] != UInt8(ascii: "]") else { return nil }
        var members: [UInt8] = []
        var closed = false
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "]") {
                index += 1
                closed = true
                break
            }
            // Set operations (&&, --, ~~) and nested classes are Regex's business.
            if byte == UInt8(ascii: "[") { return nil }
            if index + 1 < bytes.count, bytes[index + 1] == byte, [dash, UInt8(ascii: "&"), UInt8(ascii: "~")].contains(byte) { return nil }
            var member: UInt8
            if byte == UInt8(ascii: "\\") {
                switch escape(bytes, &index) {
                case .digits?:
                    atom.insertDigits()
                    continue
                case .literal(let escaped)?: member = escaped
                case nil: return nil
                }
            } else {
                guard (0x20...0x7E).contains(byte) else { return nil }
                member = byte
                index += 1
            }
            // A range: a member, a dash, and another member that is not the closing bracket.
            if index + 1 < bytes.count, bytes[index] == dash, bytes[index + 1] != UInt8(ascii: "]") {
                let upper = bytes[index + 1]
                guard upper != UInt8(ascii: "\\"), upper != UInt8(ascii: "["), (0x20...0x7E).contains(upper), member <= upper else { return nil }
                index += 2
                for value in member...upper { members.append(value) }
                continue
            }
            members.append(member)
        }
        guard closed else { return nil }
        for member in members { atom.insert(member) }
        return atom
    }

    /// An optional quantifier after an atom; false when what follows is not in the subset.
    private static func quantifier(_ bytes: [UInt8], _ index: inout Int, into atom: inout Atom) -> Bool {
        guard index < bytes.count else { return true }
        switch bytes[index] {
        case UInt8(ascii: "?"): (atom.min, atom.max) = (0, 1)
        case UInt8(ascii: "*"): (atom.min, atom.max) = (0, Int.max)
        case UInt8(ascii: "+"): (atom.min, atom.max) = (1, Int.max)
        case UInt8(ascii: "{"):
            guard let close = bytes[index...].firstIndex(of: UInt8(ascii: "}")) else { return false }
            let inside = bytes[(index + 1)..<close].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            func number(_ digits: ArraySlice<UInt8>) -> Int? {
                guard !digits.isEmpty, digits.count <= 6, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
                return Int(String(decoding: digits, as: UTF8.self))
            }
            switch inside.count {
            case 1:
                guard let count = number(inside[0]) else { return false }
                (atom.min, atom.max) = (count, count)
            case 2:
                guard let low = number(inside[0]) else { return false }
                let high = inside[1].isEmpty ? Int.max : number(inside[1])
                guard let high, low <= high else { return false }
                (atom.min, atom.max) = (low, high)
            default: return false
            }
            index = close
        default: return true
        }
        index += 1
        // Lazy (`+?`) or possessive (`++`) forms, or a quantifier on a quantifier: Regex's.
        if index < bytes.count, [UInt8(ascii: "?"), UInt8(ascii: "+"), UInt8(ascii: "*"), UInt8(ascii: "{")].contains(bytes[index]) {
            return false
        }
        return true
    }
}
