extension String {
    /// Whether this lowercased field name is `name` (also lowercased).
    /// Names of different lengths are told apart by their counts alone;
    /// String's `==` on unequal strings takes the general comparison path,
    /// and field names are compared dozens of times on every miss.
    @inlinable @inline(__always)
    public func isField(_ name: String) -> Bool {
        utf8.count == name.utf8.count && self == name
    }
}
