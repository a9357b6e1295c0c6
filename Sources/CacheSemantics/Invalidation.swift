/// RFC 9111 section 4.4: which stored URLs an unsafe request invalidates.
public enum Invalidation {
    /// Whether a response invalidates its target: a non-error status
    /// (2xx, 3xx) to a method that is not safe (a GET with a body counts
    /// as safe: it changes nothing either).
    public static func invalidates(method: String, status: Int) -> Bool {
        guard status >= 200 && status < 400 else { return false }
        switch method {
        case "GET", "HEAD", "OPTIONS", "TRACE", "QUERY": return false
        default: return true
        }
    }

    /// The cache key (path and query as clients send it) a Location or
    /// Content-Location value names, when it is on the same origin; nil for
    /// another origin (section 4.4 forbids invalidating those).
    ///
    /// - requestKey: the unsafe request's own key (the base for relative references).
    /// - upstreamAuthority: "host:port" of the upstream URL; `upstreamPathPrefix`
    ///   its path ("" or "/api"), which the keys do not include.
    /// - clientAuthority: the Host the client used, also the same origin.
    public static func key(for reference: String, requestKey: String, upstreamAuthority: String,
                           upstreamPathPrefix: String, clientAuthority: String?) -> String? {
        let value = Substring(Substring(reference).trimmingWhitespace())
        guard !value.isEmpty else { return nil }
        var path: String
        if let schemeEnd = value.range(ofPrefix: "http://") ?? value.range(ofPrefix: "https://") ?? value.range(ofPrefix: "//") {
            let rest = value[schemeEnd...]
            let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
            let lower = authority.lowercased()
            if lower == upstreamAuthority.lowercased() {
                path = String(rest.dropFirst(authority.count))
                if !upstreamPathPrefix.isEmpty {
                    guard path.hasPrefix(upstreamPathPrefix) else { return nil }
                    path = String(path.dropFirst(upstreamPathPrefix.count))
                }
            } else if let clientAuthority, lower == clientAuthority.lowercased() {
                path = String(rest.dropFirst(authority.count))
            } else {
                return nil
            }
            if path.isEmpty || path.first == "?" { path = "/" + path }
        } else if value.first == "/" {
            path = String(value)
        } else {
            // A relative reference: resolved against the request's directory.
            let basePath = requestKey.prefix { $0 != "?" }
            let directory = basePath.lastIndex(of: "/").map { basePath[...$0] } ?? "/"
            path = String(directory) + value
        }
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        return removeDotSegments(path)
    }

    /// RFC 3986 section 5.2.4 for the path part (the query is kept as is).
    static func removeDotSegments(_ target: String) -> String {
        let query = target.firstIndex(of: "?").map { String(target[$0...]) } ?? ""
        let path = target.prefix { $0 != "?" }
        guard path.contains(".") else { return target }
        var output: [Substring] = []
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        for (i, segment) in segments.enumerated() {
            let last = i == segments.count - 1
            if segment == "." { if last { output.append("") }; continue }
            if segment == ".." {
                if !output.isEmpty { output.removeLast() }
                if last { output.append("") }
                continue
            }
            output.append(segment)
        }
        return "/" + output.joined(separator: "/") + query
    }
}

extension Substring {
    func range(ofPrefix prefix: String) -> Substring.Index? {
        lowercased().hasPrefix(prefix) ? index(startIndex, offsetBy: prefix.count) : nil
    }
}
