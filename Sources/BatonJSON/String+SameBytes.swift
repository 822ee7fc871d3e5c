extension String {
    /// Whether the two strings are the same bytes. Swift's `==` compares by canonical
    /// equivalence ("\u{212A}" == "K", "e\u{301}" == "é"), but identities (a token's subject,
    /// issuer and audience) are what PostgreSQL, identity providers and clients compare: bytes.
    @inlinable
    public func hasSameBytes(as other: String) -> Bool {
        utf8.count == other.utf8.count && utf8.elementsEqual(other.utf8)
    }
}
