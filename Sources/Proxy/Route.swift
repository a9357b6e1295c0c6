import CacheSemantics

/// Per-path rules from `[[route]]` tables, matched by longest path prefix.
public struct Route: Sendable, Equatable {
    /// Path prefix this route applies to ("/" matches everything).
    public var prefix: String
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
    /// Whether responses under this route go to the disk tier.
    public var disk = true

    public init(prefix: String) {
        self.prefix = prefix
    }
}

/// The configured routes; `match` picks the longest prefix that applies.
public struct RouteTable: Sendable, Equatable {
    public private(set) var routes: [Route]

    public init(_ routes: [Route] = []) {
        // Longest prefix first, so the first match is the most specific.
        self.routes = routes.sorted { $0.prefix.utf8.count > $1.prefix.utf8.count }
    }

    /// The route for a request target (path and query), if any.
    public func match(_ target: String) -> Route? {
        guard !routes.isEmpty else { return nil }
        let path = target.prefix { $0 != "?" }
        return routes.first { path.hasPrefix($0.prefix) }
    }
}
