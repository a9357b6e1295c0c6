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

    /// Host names it serves (virtual hosts): names, or "*.example.com"
    /// for every name under one (lowercased, from `VirtualHosts.pattern`).
    /// Empty: every host.
    public var hosts: [String] = []

    /// Whether this route applies to a path and method (and, where it
    /// names hosts, the request's host name).
    func applies(path: Substring, host: Substring? = nil, method: String) -> Bool {
        guard path.hasPrefix(prefix) else { return false }
        if !hosts.isEmpty {
            guard let host, hosts.contains(where: { VirtualHosts.matches(host, pattern: $0) }) else { return false }
        }
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

/// The configured routes; `match` picks the one that applies: routes that
/// name hosts before those that do not (a virtual host's routes are its
/// own), the longest prefix first within each.
public struct RouteTable: Sendable, Equatable, TierLifetimes {
    public private(set) var routes: [Route]
    public var isEmpty: Bool { routes.isEmpty }
    /// Whether any route names hosts: keys then carry the request's host
    /// name after a space ("/a?b example.com"; `VirtualHosts`).
    public let keysHost: Bool

    public init(_ routes: [Route] = []) {
        self.routes = routes.sorted {
            $0.hosts.isEmpty != $1.hosts.isEmpty ? !$0.hosts.isEmpty : $0.prefix.utf8.count > $1.prefix.utf8.count
        }
        keysHost = routes.contains { !$0.hosts.isEmpty }
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

    /// The cache key of a request: its target as its route says, and with
    /// virtual hosts the host name its Host field gives.
    public func cacheKey(_ target: String, host: String?) -> String {
        guard keysHost else { return match(target)?.cacheKey(target) ?? target }
        let name = VirtualHosts.name(host)
        let path = target.prefix { $0 != "?" }
        let route = routes.first { $0.applies(path: path, host: Substring(name), method: "GET") }
        return (route?.cacheKey(target) ?? target) + " " + name
    }

    /// The cache key of a target that may name its host after a space (a
    /// stored key, or a purge's "/a example.com"): without virtual hosts
    /// the host is dropped.
    public func cacheKey(_ target: String) -> String {
        let (path, host) = VirtualHosts.split(target)
        return cacheKey(host == nil ? target : String(path), host: host.map(String.init))
    }

    /// What a purge of one URL removes: the target as given and its cache
    /// key. With virtual hosts, a target without a host ("/a", not
    /// "/a example.com") names that path on every host: a prefix of every
    /// such key (each route's key options applied).
    public func purgeScopes(_ target: String) -> [PurgeScope] {
        let (path, host) = VirtualHosts.split(target)
        guard keysHost, host == nil else {
            let key = cacheKey(target)
            let asGiven = keysHost ? String(path) + " " + VirtualHosts.name(host.map(String.init)) : String(path)
            return key == asGiven ? [.key(key)] : [.key(asGiven), .key(key)]
        }
        let onPath = path.prefix { $0 != "?" }
        var targets = [target]
        for route in routes where onPath.hasPrefix(route.prefix) {
            let key = route.cacheKey(target)
            if !targets.contains(key) { targets.append(key) }
        }
        return [.key(target)] + targets.map { .prefix($0 + " ") }
    }

    /// The route for a cache key (or a request target without virtual
    /// hosts), if any. Storage decisions concern GET responses, hence the
    /// default method.
    public func match(_ key: String, method: String = "GET") -> Route? {
        guard !routes.isEmpty else { return nil }
        guard keysHost else {
            let path = key.prefix { $0 != "?" }
            return routes.first { $0.applies(path: path, method: method) }
        }
        let (target, host) = VirtualHosts.split(key)
        let path = target.prefix { $0 != "?" }
        return routes.first { $0.applies(path: path, host: host ?? "", method: method) }
    }
}
