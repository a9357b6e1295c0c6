/// One header field. Every module that handles fields (HTTP1, Upstream,
/// CacheSemantics, CacheStorage, Proxy, Admin) uses this type.
///
/// `name` is lowercased: parsers lowercase it once as they build the field
/// (`init(lowercasedName:value:)`), so every later lookup compares bytes,
/// not case-folded strings.
public struct HeaderField: Equatable, Hashable, Sendable {
    public var name: String
    public var value: String

    /// For a name that is lowercase already (parsers, constants): no scan.
    @inlinable
    public init(lowercasedName name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// For a name from anywhere else: lowercased here.
    @inlinable
    public init(name: String, value: String) {
        self.init(lowercasedName: name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A } ? name.lowercased() : name,
                  value: value)
    }
}
