extension Substring {
    /// Without the spaces and tabs HTTP allows around a field value and its list items
    /// (RFC 9110 §5.6.3, "OWS"). Foundation's `trimmingCharacters(in: .whitespaces)` trims every
    /// Unicode blank and bridges through `NSString` on Linux: 2 % of a screen's CPU went to it.
    var trimmingOptionalWhitespace: Substring {
        func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
        guard let first = utf8.firstIndex(where: { !isBlank($0) }), let last = utf8.lastIndex(where: { !isBlank($0) }) else {
            return self[endIndex...]
        }
        return self[first...last]
    }
}

extension String {
    /// See `Substring.trimmingOptionalWhitespace`.
    var trimmingOptionalWhitespace: Substring { self[...].trimmingOptionalWhitespace }
}
