import HTTPTypes

extension HTTPFields {
    /// The value of the fields named `name`, as `self[name]` gives it: `nil` without one, the
    /// value of one, the values of several joined (`", "`, `"; "` for cookies).
    ///
    /// Baton reads a dozen headers per request, nearly always absent or sent once. HTTPTypes'
    /// subscript joins even a single value through the standard library's generic
    /// `joined(separator:)`, which runs unspecialized there; with the type lookups that costs,
    /// the subscript was 1.5 % of a command's CPU profile (docs/benchmarks.md, "Header lookups,
    /// JSON strings and request targets").
    /// One pass over the fields answers the common cases; several fields with the name go to the
    /// subscript, so the result is the same.
    func value(_ name: HTTPField.Name) -> String? {
        var found: String?
        for field in self where field.name == name {
            guard found == nil else { return self[name] }
            found = field.value
        }
        return found
    }
}
