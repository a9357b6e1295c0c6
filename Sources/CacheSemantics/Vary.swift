/// Secondary cache keys (RFC 9111 section 4.1).
public enum Vary {
    /// The lowercased field names a Vary value lists, or nil for "*"
    /// (which never matches).
    public static func fieldNames(_ vary: String?) -> [String]? {
        guard let vary else { return [] }
        var names: [String] = []
        for raw in vary.split(separator: ",") {
            let name = raw.trimmingWhitespace().lowercased()
            if name == "*" { return nil }
            if !name.isEmpty && !names.contains(name) { names.append(name) }
        }
        return names.sorted()
    }

    /// The normalized values of those fields in a request: whitespace around
    /// commas collapsed, so that "a,b" and "a, b" select the same variant.
    public static func normalize(_ value: String?) -> String? {
        guard let value else { return nil }
        return value.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingWhitespace() }
            .joined(separator: ",")
    }
}

extension Substring {
    func trimmingWhitespace() -> String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
