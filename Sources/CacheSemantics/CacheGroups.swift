/// Cache-Groups and Cache-Group-Invalidation (RFC 9875): the groups a
/// stored response belongs to, and those an unsafe request's response
/// invalidates. Both fields are Lists of Strings (section 2, 3).
public enum CacheGroups {
    /// A field's groups: its String members, parameters ignored, others
    /// (tokens, numbers, inner lists) skipped, empty strings too; none
    /// when the value does not parse as a List (the field is then ignored).
    public static func parse(_ value: String?) -> [String] {
        guard let value, let members = StructuredDictionary.list(value) else { return [] }
        var groups: [String] = []
        for case .string(let group) in members where !group.isEmpty && !groups.contains(group) { groups.append(group) }
        return groups
    }
}
