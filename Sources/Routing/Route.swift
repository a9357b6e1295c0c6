import CacheSemantics
import CacheStorage
import EdgeControls
#if canImport(Glibc)
import Glibc
#endif

/// Per-path rules from `[[route]]` tables, matched by longest path prefix.
public struct Route: Sendable, Equatable {
    /// Path prefix this route applies to ("/" matches everything).
    public var prefix: String
    /// Methods it applies to (empty: all).
    public var methods: Set<String> = []
    /// A shell glob the path must also match (fnmatch), e.g. "*.jpg".
    public var glob: String?

    /// Host names it serves (virtual hosts): names, or "*.example.com"
    /// for every name under one (lowercased, from `VirtualHosts.pattern`).
    /// Empty: every host.
    public var hosts: [String] = []

    /// The named upstream (`[upstreams.NAME]`) its requests go to (nil: the default).
    public var upstream: String?
    /// The default policy of requests under it (nil: the global one).
    public var policy: RequestPolicy?
    /// Whether clients may choose a policy here (nil: the global setting).
    public var allowClientPolicy: Bool?
    /// Lifetime for responses without explicit freshness (seconds).
    public var defaultTTL: Int?
    /// Store and serve for `defaultTTL` whatever the upstream's
    /// Cache-Control says (no-cache, private, max-age=0), except no-store.
    public var ignoreUpstreamCacheControl = false
    /// With `ignoreUpstreamCacheControl`: ignore no-store too.
    public var ignoreNoStore = false
    /// Lifetime for 404, 410 and 5xx responses without explicit freshness.
    public var negativeTTL: Int?
    /// `stale_on_disconnect` for this route (seconds; nil: the global one).
    public var staleOnDisconnect: Int?
    /// `stale_timeout` for this route (milliseconds, 0 off; nil: the global one).
    public var staleTimeoutMilliseconds: Int?
    /// `grace` for this route (seconds; nil: the global one).
    public var grace: Int?
    /// `websocket` for this route (nil: the global one).
    public var websocket: Bool?
    /// `compress` for this route (nil: the global list; empty: off here).
    public var compress: MediaTypePatterns?
    /// Purge tags given to every response stored under this route.
    public var tags: [String] = []
    /// Whether responses under this route go to the disk tier.
    public var disk = true
    /// `cache_post`: POSTs under this route are cached as queries (GraphQL,
    /// JSON-RPC), keyed by their body's digest (`PostQuery`).
    public var cachePost = false
    /// `max_post_body`: the largest body a cached POST may have; a larger
    /// one goes through uncached.
    public var maxPostBody = Route.defaultMaxPostBody
    public static let defaultMaxPostBody = 64 << 10
    /// `normalize_json`: the key digests the body's JSON with object keys
    /// sorted and whitespace removed (the body as received otherwise).
    public var normalizeJSON = false
    /// `uncached_rpc_methods`: JSON-RPC methods never cached.
    public var uncachedRPCMethods: [String] = []
    /// `cache_persisted_queries`: a request naming its GraphQL query only
    /// by a hash (automatic persisted queries) may be cached; off, it goes
    /// upstream uncached, since nothing in it says it is not a write.
    public var cachePersistedQueries = false

    /// Whether the key options change keys (`cacheKey` is the target otherwise).
    public var changesKeys: Bool { ignoreQuery || sortQuery || !ignoredQueryParameters.isEmpty }

    /// Tier lifetimes for this route: nil inherits the global setting,
    /// .some(nil) keeps until evicted. `diskMirrorsMemory`: disk_ttl = mirror.
    public var memoryTTL: Int??
    public var diskTTL: Int??
    public var diskMirrorsMemory = false
    /// Cache key options: drop the whole query, drop named parameters, or
    /// sort the parameters, so equivalent URLs share one stored response.
    public var ignoreQuery = false
    public var ignoredQueryParameters: Set<String> = []
    public var sortQuery = false
    /// Request fields (lowercased) that are part of the cache key: each value
    /// gets its own stored response, as if the upstream had sent Vary.
    public var keyHeaders: [String] = []

    /// The cache key for a request target under this route (the upstream
    /// still receives the target as the client sent it).
    public func cacheKey(_ target: String) -> String {
        guard changesKeys, let mark = target.firstIndex(of: "?") else { return target }
        let path = String(target[..<mark])
        if ignoreQuery { return path }
        var parameters = target[target.index(after: mark)...].split(separator: "&", omittingEmptySubsequences: true)
        if !ignoredQueryParameters.isEmpty {
            // A parameter holding a ';' stays: an origin that also splits on
            // ';' would read another parameter in it (`utm=a;x=evil`), and a
            // key without those bytes would be a poisoned entry.
            parameters.removeAll { !$0.contains(";") && ignoredQueryParameters.contains(String($0.prefix { $0 != "=" })) }
        }
        if sortQuery {
            // By name only, keeping the order of a repeated name's values:
            // which one an origin reads (the first, the last) is its own.
            parameters = parameters.enumerated().sorted { a, b in
                let (nameA, nameB) = (a.element.prefix { $0 != "=" }, b.element.prefix { $0 != "=" })
                return nameA != nameB ? nameA < nameB : a.offset < b.offset
            }.map(\.element)
        }
        return parameters.isEmpty ? path : path + "?" + parameters.joined(separator: "&")
    }

    /// Edge controls this route sets itself (`EdgeSettings`), and the
    /// rules its requests are under: those over the global ones, made
    /// when the configuration is assembled (nil: none at all).
    public var edge = EdgeSettings()
    public var rules: EdgeRules?

    public init(prefix: String) {
        self.prefix = prefix
    }
}

/// What one request reads of its route, made once per table (a
/// `Route` copied whole would retain each of its strings and sets, shared
/// by every worker, on every request). Sendable as the table that makes
/// them is: they are not changed once made, and the rules they point at
/// live as long as the table.
public struct RouteFacts: @unchecked Sendable {
    /// The named upstream (nil: the default); a short name is held inline.
    public var upstream: String?
    public var policy: RequestPolicy?
    public var allowClientPolicy: Bool?
    /// (Kept as 32 bits: an exchange holds these, and its allocation must
    /// stay within malloc's per-thread cache's sizes.)
    private var staleOnDisconnect32: Int32?, staleTimeout32: Int32?, grace32: Int32?
    public var staleOnDisconnect: Int? {
        get { staleOnDisconnect32.map(Int.init) }
        set { staleOnDisconnect32 = newValue.map { Int32(clamping: $0) } }
    }
    public var staleTimeoutMilliseconds: Int? {
        get { staleTimeout32.map(Int.init) }
        set { staleTimeout32 = newValue.map { Int32(clamping: $0) } }
    }
    public var grace: Int? {
        get { grace32.map(Int.init) }
        set { grace32 = newValue.map { Int32(clamping: $0) } }
    }
    public var disk: Bool
    /// Its edge controls (nil: none apply). Unsafe, and safe: the table
    /// holds them while a request reads this, and the request holds what
    /// it keeps of them (a counted copy here cost every request a retain).
    public unowned(unsafe) var edge: EdgeRules?

    public init(_ route: Route) {
        edge = route.rules
        disk = route.disk
        upstream = route.upstream
        policy = route.policy
        allowClientPolicy = route.allowClientPolicy
        staleOnDisconnect = route.staleOnDisconnect
        staleTimeoutMilliseconds = route.staleTimeoutMilliseconds
        grace = route.grace
    }
}

/// A route's `cache_post` settings, as a request under it reads them; or
/// how a QUERY request (RFC 10008) is keyed (`queryMethod`).
public struct PostCaching {
    public var maxBody: Int
    public var normalizeJSON: Bool
    public var uncachedMethods: [String]
    public var persistedQueries = false
    /// A QUERY's `Content-Type` (normalized, "" for none): it joins the key,
    /// JSON media types are normalized, and no body is refused (the method
    /// is safe, whatever its content says). Nil for a POST.
    public var queryMethodType: String?

    public init(maxBody: Int, normalizeJSON: Bool, uncachedMethods: [String], persistedQueries: Bool = false) {
        (self.maxBody, self.normalizeJSON, self.uncachedMethods, self.persistedQueries) = (maxBody, normalizeJSON, uncachedMethods, persistedQueries)
    }

    /// How a QUERY with this `Content-Type` and body limit is keyed.
    public static func queryMethod(contentType: String?, maxBody: Int) -> PostCaching {
        let type = MediaType.normalized(contentType ?? "")
        var caching = PostCaching(maxBody: maxBody, normalizeJSON: MediaType.isJSON(type), uncachedMethods: [])
        caching.queryMethodType = type
        return caching
    }
}
