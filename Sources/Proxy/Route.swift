import CacheSemantics
import CacheStorage
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

    /// Whether this route applies to a path and method.
    func applies(path: Substring, method: String) -> Bool {
        guard path.hasPrefix(prefix) else { return false }
        if !methods.isEmpty && !methods.contains(method) { return false }
        if let glob { return fnmatch(glob, String(path), 0) == 0 }
        return true
    }
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
    /// `compress` for this route (nil: the global list; empty: off here).
    public var compress: MediaTypePatterns?
    /// Purge tags given to every response stored under this route.
    public var tags: [String] = []
    /// Whether responses under this route go to the disk tier.
    public var disk = true
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
        guard ignoreQuery || sortQuery || !ignoredQueryParameters.isEmpty,
              let mark = target.firstIndex(of: "?") else { return target }
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

    public init(prefix: String) {
        self.prefix = prefix
    }
}

/// The configured routes; `match` picks the longest prefix that applies.
public struct RouteTable: Sendable, Equatable, TierLifetimes {
    public private(set) var routes: [Route]
    public var isEmpty: Bool { routes.isEmpty }

    public init(_ routes: [Route] = []) {
        // Longest prefix first, so the first match is the most specific.
        self.routes = routes.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// Per-key memory lifetime overrides, for the tiers.
    public func memoryLifetime(_ key: String) -> Int?? {
        match(key)?.memoryTTL
    }

    /// Per-key disk lifetime overrides, for the tiers.
    public func diskLifetime(_ key: String) -> Int?? {
        guard let route = match(key) else { return nil }
        return route.diskMirrorsMemory ? route.memoryTTL : route.diskTTL
    }

    /// The cache key of a target: as its route says, else the target itself.
    public func cacheKey(_ target: String) -> String {
        match(target)?.cacheKey(target) ?? target
    }

    /// The route for a request target (path and query), if any.
    /// Storage decisions concern GET responses, hence the default method.
    public func match(_ target: String, method: String = "GET") -> Route? {
        guard !routes.isEmpty else { return nil }
        let path = target.prefix { $0 != "?" }
        return routes.first { $0.applies(path: path, method: method) }
    }
}
