import HTTPTypes

extension HTTPFields {
    /// The value of the fields named `name`, as `self[name]` gives it: `nil` without one, the
    /// value of one, the values of several joined (`", "`, `"; "` for cookies).
    ///
    /// Baton reads a dozen headers per request, nearly always absent or sent once. HTTPTypes'
    /// subscript joins even a single value through a generic `joined(separator:)` that its module
    /// does not specialize, and the type lookups that costs made it 1.4 % of a command's CPU
    /// profile (docs/benchmarks.md, "Header lookups, JSON strings and request targets").
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
