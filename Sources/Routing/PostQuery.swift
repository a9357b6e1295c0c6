import CacheSemantics
import TLS

/// A POST cached as a query (a route's `cache_post`): its body, held until
/// complete, becomes part of the key as a SHA-256 digest (of the body as
/// received, or of its canonical JSON with `normalize_json`). The key is
/// the URL's key with "\n" and the digest before any host part
/// ("/graphql\n<digest> api.example.com"): no target holds a line feed.
/// Every cached query of a URL carries one tag (`tag(urlKey:)`), so that a
/// purge of the URL, or an unsafe request to it that is not a query,
/// removes them all without a scan.
public struct PostQuery {
    /// The body so far; nil once it outgrew the route's limit (the POST
    /// then goes through uncached, the bytes held so far first).
    public private(set) var body: [UInt8]? = []
    public let caching: PostCaching

    public init(caching: PostCaching) { self.caching = caching }

    /// Adds a piece. When the body would outgrow `max_post_body`, nothing
    /// is added and the bytes held so far are handed back (the POST then
    /// goes through uncached); nil otherwise.
    public mutating func add(_ bytes: UnsafeRawBufferPointer) -> [UInt8]? {
        guard var held = body else { return nil }
        body = nil  // (held alone: appended in place)
        guard held.count + bytes.count <= caching.maxBody else { return held }
        held.append(contentsOf: bytes)
        body = held
        return nil
    }

    /// What the complete body makes of the request: cached under a key
    /// digest (with whether its JSON was normalized), or why not.
    public enum Verdict: Equatable {
        case query(digest: String, normalized: Bool)
        case notCached(String)
    }

    public func verdict() -> Verdict {
        guard let body else { return .notCached("body over max_post_body") }
        guard let type = caching.queryMethodType else {
            if let why = JSONQuery.refusal(body, uncachedMethods: caching.uncachedMethods,
                                             persistedQueries: caching.persistedQueries) { return .notCached(why) }
            let canonical = caching.normalizeJSON ? JSONQuery.canonical(body) : nil
            guard let digest = Self.sha256(canonical ?? body) else { return .notCached("no SHA-256 (OpenSSL did not load)") }
            return .query(digest: digest, normalized: canonical != nil)
        }
        // A QUERY: its media type joins the digest (the same bytes as another
        // type are another query), and so does the method (a cached POST of
        // the same body is not its answer). JSON that does not parse is keyed
        // by its bytes.
        let canonical = caching.normalizeJSON ? JSONQuery.canonical(body) : nil
        // ("Q", not "QUERY ": a short query and its type fit one SHA-256 block.)
        var keyed = [UInt8]()
        keyed.reserveCapacity(type.utf8.count + 2 + (canonical ?? body).count)
        keyed.append(UInt8(ascii: "Q"))
        keyed.append(contentsOf: type.utf8)
        keyed.append(0x0A)
        keyed.append(contentsOf: canonical ?? body)
        guard let digest = Self.sha256(keyed) else {
            return .notCached("no SHA-256 (OpenSSL did not load)")
        }
        return .query(digest: digest, normalized: canonical != nil)
    }

    public static func sha256(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBytes { try? Digest.sha256Hex($0) }
    }

    /// The tag every cached query of a URL (its key without a body
    /// digest) carries.
    public static func tag(urlKey: String) -> String? {
        sha256(Array(urlKey.utf8)).map { "larder-post:" + $0.prefix(32) }
    }

    /// The key of a query of `urlKey` whose body has `digest`.
    public static func key(urlKey: String, digest: String, keysHost: Bool) -> String {
        guard keysHost, let space = urlKey.utf8.lastIndex(of: VirtualHosts.separator) else { return urlKey + "\n" + digest }
        return String(urlKey[..<space]) + "\n" + digest + String(urlKey[space...])
    }

    /// The URL's key of a query's key (the digest taken out).
    public static func urlKey(of key: String) -> String {
        guard let newline = key.utf8.firstIndex(of: 0x0A) else { return key }
        let rest = key[newline...]
        let host = rest.utf8.lastIndex(of: VirtualHosts.separator).map { rest[$0...] } ?? ""
        return String(key[..<newline]) + host
    }
}
