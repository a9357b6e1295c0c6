/// Secondary cache keys (RFC 9111 section 4.1).
public enum Vary {
    /// The lowercased field names a Vary value lists, or nil for "*"
    /// (which never matches).
    /// Host is case-insensitive (RFC 9110 section 4.2.3) and a single value;
    /// this runs on every hit, so the usual lowercase value is returned as is.
    static func lowercasedIfNeeded(_ value: String) -> String {
        value.utf8.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) ? value.lowercased() : value
    }

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

    /// Fields whose values are lists of case-insensitive tokens (RFC 9110
    /// sections 12.5): their members are lowercased.
    static let caseInsensitiveLists: Set<String> = ["accept", "accept-encoding", "accept-language", "accept-charset"]
    /// Fields whose members' order carries no meaning (preference is given by
    /// q-values, RFC 9110 section 12.4.2, which stay attached): sorted too.
    static let unorderedLists: Set<String> = caseInsensitiveLists

    /// The normalized value of a request field for variant selection
    /// (RFC 9111 section 4.1 allows normalizing to equal semantics):
    /// whitespace around list members removed, then for the rest of the Accept family
    /// tokens lowercased and members sorted.
    /// Accept-Encoding becomes its variant key (`AcceptEncoding.variantKey`).
    public static func normalize(_ value: String?, field: String = "") -> String? {
        if field == "accept-encoding" { return AcceptEncoding(value).variantKey }
        guard let value else { return nil }
        if field == "host" { return lowercasedIfNeeded(value) }
        var members = value.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingWhitespace() }
        if caseInsensitiveLists.contains(field) {
            members = members.map { $0.lowercased().split(separator: ";").map { $0.trimmingWhitespace() }.joined(separator: ";") }
        }
        if unorderedLists.contains(field) { members.sort() }
        return members.joined(separator: ",")
    }
}

extension Vary {
    /// RFC 9110 section 12.5.4 (and RFC 4647 basic filtering): whether a
    /// response in `contentLanguage` (one tag) is what `acceptLanguage`
    /// asks for most: the tag equals, or starts with, one of the ranges
    /// with the highest q-value (above 0). A `*` range selects nothing: the
    /// origin might have a better match. So `fr;q=0.5, de` is answered by a
    /// stored `de` response whatever request stored it.
    public static func languageSelects(_ acceptLanguage: String?, contentLanguage: String?) -> Bool {
        guard let acceptLanguage, let contentLanguage else { return false }
        let tag = Substring(contentLanguage).trimmingWhitespace().lowercased()
        guard !tag.isEmpty, !tag.contains(",") else { return false }
        var best = 0.0, top: [String] = []
        for member in acceptLanguage.split(separator: ",") {
            let parts = member.split(separator: ";")
            guard let first = parts.first else { continue }
            let range = first.trimmingWhitespace().lowercased()
            guard !range.isEmpty else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() {
                let p = parameter.trimmingWhitespace().lowercased()
                if p.hasPrefix("q=") { q = qValue(p.dropFirst(2)) ?? 0 }
            }
            if q > best { (best, top) = (q, [range]) } else if q == best, q > 0 { top.append(range) }
        }
        return top.contains { $0 != "*" && (tag == $0 || tag.hasPrefix($0 + "-")) }
    }

    /// A qvalue (RFC 9110 section 12.4.2): 0 to 1 with up to three decimals.
    static func qValue(_ text: Substring) -> Double? {
        guard text.utf8.count <= 5, let value = Double(text), value >= 0, value <= 1 else { return nil }
        return value
    }
}

extension Substring {
    /// Without spaces and tabs around it (a field value's OWS).
    public func trimmingWhitespace() -> String {
        var s = self
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}
