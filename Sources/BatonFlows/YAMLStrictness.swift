/// Rules YAML 1.2 sets that libyaml (under Yams) lets slide, checked on the text so that what
/// Baton accepts is what the YAML specification accepts:
///
/// - a comment needs whitespace before `#` (`"value"# x`, `[a]#x`, `a,#x`, `># x` are errors);
/// - lines continuing a flow collection or a quoted scalar must be indented more than the
///   line that opened it;
/// - leading blank lines of a block scalar may not be longer than its first content line.
enum YAMLStrictness {
    static func problem(in text: String) -> (message: String, line: Int, column: Int)? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { Array($0.utf8) }
        var flowDepth = 0
        var openIndent = 0  // indentation of the line that opened the current flow collection or quote
        var quote: UInt8?
        var escaped = false
        var index = 0
        while index < lines.count {
            let line = lines[index]
            let number = index + 1
            let indent = line.prefix { $0 == UInt8(ascii: " ") }.count
            let blank = line.allSatisfy { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }
            if (flowDepth > 0 || quote != nil), !blank, indent <= openIndent, !isDocumentMarker(line) {
                let what = quote != nil ? "a quoted text" : "a [ ] or { } collection"
                return ("this line continues \(what) and must be indented more than the line that opened it", number, indent + 1)
            }
            var previous: UInt8 = UInt8(ascii: " ")
            var column = 0
            var blockScalar = false
            while column < line.count {
                let byte = line[column]
                defer {
                    previous = byte
                    column += 1
                }
                if let open = quote {
                    if escaped {
                        escaped = false
                    } else if open == UInt8(ascii: "\"") && byte == UInt8(ascii: "\\") {
                        escaped = true
                    } else if byte == open {
                        if open == UInt8(ascii: "'"), column + 1 < line.count, line[column + 1] == UInt8(ascii: "'") {
                            column += 1  // '' is an escaped quote
                        } else {
                            quote = nil
                        }
                    }
                    continue
                }
                switch byte {
                case UInt8(ascii: "#"):
                    if previous != UInt8(ascii: " ") && previous != UInt8(ascii: "\t") && column > 0 {
                        if [UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "]"), UInt8(ascii: "}"), UInt8(ascii: ","),
                            UInt8(ascii: ">"), UInt8(ascii: "|")].contains(previous)
                        {
                            return ("a comment needs a space before '#'", number, column + 1)
                        }
                        continue  // part of a plain scalar, such as a#b
                    }
                    column = line.count  // the rest is a comment
                case UInt8(ascii: "\""), UInt8(ascii: "'"):
                    if [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ","), UInt8(ascii: "-")]
                        .contains(previous) || column == 0
                    {
                        if flowDepth == 0 { openIndent = indent }
                        quote = byte
                    }
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    if [UInt8(ascii: " "), UInt8(ascii: ":"), UInt8(ascii: "["), UInt8(ascii: "{"), UInt8(ascii: ","), UInt8(ascii: "-")]
                        .contains(previous) || column == 0
                    {
                        if flowDepth == 0 { openIndent = indent }
                        flowDepth += 1
                    }
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    if flowDepth > 0 { flowDepth -= 1 }
                case UInt8(ascii: "|"), UInt8(ascii: ">"):
                    if flowDepth == 0, previous == UInt8(ascii: " ") || column == 0, isBlockHeader(line[(column + 1)...]) {
                        blockScalar = true
                    }
                default:
                    break
                }
            }
            if blockScalar, let problem = blockScalarProblem(lines, header: index, parentIndent: indent) {
                return problem
            }
            index += 1
        }
        return nil
    }

    private static func isDocumentMarker(_ line: [UInt8]) -> Bool {
        line.starts(with: Array("---".utf8)) || line.starts(with: Array("...".utf8))
    }

    /// After `|` or `>`: optional indentation/chomping indicators, then only space or a comment.
    private static func isBlockHeader(_ rest: ArraySlice<UInt8>) -> Bool {
        var sawSpace = false
        for byte in rest {
            if sawSpace { return byte == UInt8(ascii: "#") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\r") }
            switch byte {
            case UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "1")...UInt8(ascii: "9"): continue
            case UInt8(ascii: " "), UInt8(ascii: "\t"): sawSpace = true
            case UInt8(ascii: "\r"): continue
            default: return false
            }
        }
        return true
    }

    private static func blockScalarProblem(_ lines: [[UInt8]], header: Int, parentIndent: Int) -> (String, Int, Int)? {
        var longestBlank = 0
        var longestBlankLine = 0
        var index = header + 1
        while index < lines.count {
            let line = lines[index]
            let spaces = line.prefix { $0 == UInt8(ascii: " ") }.count
            if spaces == line.count {
                if spaces > longestBlank {
                    longestBlank = spaces
                    longestBlankLine = index + 1
                }
                index += 1
                continue
            }
            if spaces > parentIndent, longestBlank > spaces {
                return ("a leading blank line of this block text has more spaces (\(longestBlank)) than its first line (\(spaces))", longestBlankLine, 1)
            }
            return nil
        }
        return nil
    }
}
