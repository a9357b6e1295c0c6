import HTTPHeaders

/// Conditional requests (RFC 9110 section 13) and updating a stored
/// response from a 304 (RFC 9111 sections 3.2 and 4.3.4).
public enum Validation {
    /// Entity tags listed in an If-None-Match value; nil for "*".
    public static func entityTags(_ value: String) -> [String]? {
        var tags: [String] = []
        var rest = Substring(value)
        while true {
            while let f = rest.first, f == " " || f == "\t" || f == "," { rest = rest.dropFirst() }
            if rest.isEmpty { return tags }
            if rest.first == "*" { return nil }
            let weak = rest.hasPrefix("W/")
            if weak { rest = rest.dropFirst(2) }
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else {
                // Not a valid entity-tag: take the token as is so that a sloppy
                // origin's unquoted tag still compares equal to itself.
                let token = rest.prefix { $0 != "," }
                tags.append((weak ? "W/" : "") + token.trimmingWhitespace())
                rest = rest.dropFirst(token.count)
                continue
            }
            tags.append((weak ? "W/" : "") + String(rest[rest.startIndex...close]))
            rest = rest[rest.index(after: close)...]
        }
    }

    /// Weak comparison (RFC 9110 section 8.8.3.2): opaque tags equal, W/ ignored.
    public static func weakMatch(_ a: String, _ b: String) -> Bool {
        func opaque(_ t: String) -> Substring { t.hasPrefix("W/") ? t.dropFirst(2) : Substring(t) }
        return opaque(a) == opaque(b)
    }

    /// What a client's conditional GET/HEAD gets from a stored 200 (RFC 9110
    /// section 13.2.2): true when it is answered 304 Not Modified.
    /// If-None-Match takes precedence; If-Modified-Since applies only without it.
    public static func clientNotModified(ifNoneMatch: String?, ifModifiedSince: String?,
                                         etag: String?, lastModified: String?, dateValue: Int64?) -> Bool {
        if let ifNoneMatch {
            guard let tags = entityTags(ifNoneMatch) else { return true }  // "*": any current representation matches
            guard let etag else { return false }
            return tags.contains { weakMatch($0, etag) }
        }
        if let ifModifiedSince, let since = HTTPDate.parse(ifModifiedSince) {
            // Without Last-Modified the Date of the stored response is the best
            // bound the cache has (RFC 9111 section 4.3.2).
            guard let modified = lastModified.flatMap(HTTPDate.parse) ?? dateValue else { return false }
            return modified <= since
        }
        return false
    }

    /// Fields never taken from a 304 into the stored response (section 3.2):
    /// framing and hop-by-hop fields, and the ones Larder handles itself.
    static let notUpdated: Set<String> = [
        "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te", "trailer",
        "upgrade", "proxy-authenticate", "proxy-authorization", "content-encoding", "content-range",
    ]

    /// The stored fields updated with those of a 304 (or of a HEAD response,
    /// section 4.3.5): each field present in the update replaces every stored
    /// field of that name; the others are kept.
    public static func merge(stored: HeaderFields, update: HeaderFields) -> HeaderFields {
        let replacing = Set(update.map(\.name).filter { !notUpdated.contains($0) })
        var merged = stored.filter { !replacing.contains($0.name) }
        merged.append(contentsOf: update.filter { replacing.contains($0.name) })
        return merged
    }

    /// Which stored variant a 304 validates (section 4.3.4): the most recent
    /// one whose ETag matches the 304's; without an ETag, the one whose
    /// Last-Modified matches; if the 304 has neither, the only stored
    /// response, when it has no validator either.
    public static func selectValidated(etag: String?, lastModified: String?,
                                       candidates: [(etag: String?, lastModified: String?)]) -> Int? {
        if let etag {
            return candidates.lastIndex { $0.etag.map { weakMatch($0, etag) } ?? false }
        }
        if let lastModified {
            return candidates.lastIndex { $0.lastModified == lastModified }
        }
        // No validator in the update: only a lone stored response without one.
        if candidates.count == 1, candidates[0].etag == nil, candidates[0].lastModified == nil { return 0 }
        return nil
    }
}
