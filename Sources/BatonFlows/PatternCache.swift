import Synchronization

/// Compiled regular expressions by source text; flows use a handful, compiled once.
public enum PatternCache {
    private static let cache = Mutex<[String: Regex<AnyRegexOutput>]>([:])

    /// Whether `text` matches `pattern` as a whole. An invalid pattern (which the loader
    /// already rejects) never matches.
    public static func wholeMatch(_ pattern: String, _ text: String) -> Bool {
        let regex: Regex<AnyRegexOutput>? = cache.withLock { cache in
            if let regex = cache[pattern] { return regex }
            guard let regex = try? Regex(pattern) else { return nil }
            cache[pattern] = regex
            return regex
        }
        guard let regex else { return false }
        return (try? regex.wholeMatch(in: text)) != nil
    }
}
