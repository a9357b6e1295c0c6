import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders

/// The header fields Larder sends upstream for a client's request.
enum UpstreamHeaders {
    /// The request's fields without hop-by-hop ones, Host (libcurl sends the
    /// upstream's), framing and Larder's own, plus X-Forwarded-For and -Proto
    /// (and -Host with forward_host, which keys stored responses by Host). For GET the
    /// client's If-None-Match / If-Modified-Since are dropped: the cache
    /// fetches a full response to store and answers them itself.
    /// Fields that frameworks read to rewrite the URL, method, host or
    /// scheme: they would change the origin's answer while the stored
    /// response is keyed without them (cache poisoning). Dropped unless
    /// `pass_request_headers` names them, and then they key responses.
    static func isOverride(_ name: String) -> Bool {
        switch name.utf8.count {
        case 6: return name == "x-host"
        case 9: return name == "forwarded"
        case 13: return name == "x-rewrite-url" || name == "x-http-method"
        case 14: return name == "x-original-url"
        case 15: return name == "x-original-host" || name == "x-forwarded-ssl"
        case 16: return name == "x-forwarded-port"
        case 17: return name == "x-method-override"
        case 18: return name == "x-forwarded-server" || name == "x-forwarded-scheme" || name == "x-forwarded-prefix"
        case 22: return name == "x-http-method-override"
        default: return false
        }
    }

    static let overrideNames = ["forwarded", "x-host", "x-original-url", "x-rewrite-url", "x-http-method",
                                "x-http-method-override", "x-method-override", "x-original-host", "x-forwarded-ssl",
                                "x-forwarded-port", "x-forwarded-server", "x-forwarded-scheme", "x-forwarded-prefix"]

    static func forward(_ request: RequestHead, peer: String, forwardHost: Bool = false, preserveHost: Bool = false,
                        passed: [String] = []) -> HeaderFields {
        var headers: HeaderFields = []
        headers.reserveCapacity(request.headers.count + 4)
        var forwardedFor: String?
        for field in HopByHop.strip(request.headers) {
            switch field.name {
            // Larder sets X-Forwarded-Host and -Proto itself: a client's own
            // would reach the upstream unkeyed (a cache-poisoning vector).
            case "host", "content-length", "expect", "larder-cache-policy", "x-forwarded-host", "x-forwarded-proto": continue
            // (A `where` binds to the last pattern only: both carry it, or a
            // PUT's If-None-Match: * would be dropped.)
            case "if-none-match" where request.method == "GET" && request.framing == .none,
                 "if-modified-since" where request.method == "GET" && request.framing == .none: continue
            case "x-forwarded-for": forwardedFor = forwardedFor.map { $0 + ", " + field.value } ?? field.value
            default:
                if isOverride(field.name) && !passed.contains(field.name) { continue }
                headers.append(field)
            }
        }
        headers.append("x-forwarded-for", forwardedFor.map { $0 + ", " + peer } ?? peer)
        if forwardHost, let host = request.header("host") { headers.append("x-forwarded-host", host) }
        // (libcurl sends a Host field given here instead of the URL's host.)
        if preserveHost, let host = request.header("host") { headers.append("host", host) }
        headers.append("x-forwarded-proto", "http")
        return headers
    }

    /// A cacheable request asks the upstream for its Accept-Encoding
    /// variant's codings (`AcceptEncoding.upstreamValue`), not the client's
    /// own list, so what is stored under the variant suits all its clients.
    static func normalizeAcceptEncoding(_ headers: inout HeaderFields, for request: RequestHead) {
        headers.remove("accept-encoding")
        headers.append("accept-encoding", AcceptEncoding(request.combinedHeader("accept-encoding")).upstreamValue)
    }

    /// RFC 9111 section 4.3.1: every stored ETag of the URL's variants, so a
    /// 304 can select any of them, and the Last-Modified of the one validated.
    static func addValidators(for entry: CachedResponse, among variants: Variants,
                              to headers: inout HeaderFields) {
        var tags: [String] = []
        for v in variants { if let t = v.etag, !tags.contains(t) { tags.append(t) } }
        if !tags.isEmpty { headers.append("if-none-match", tags.joined(separator: ", ")) }
        if let lm = entry.lastModified { headers.append("if-modified-since", lm) }
    }
}
