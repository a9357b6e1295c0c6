import CacheStorage
#if canImport(Glibc)
import Glibc
#endif

/// The configured routes; `match` picks the one that applies: routes that
/// name hosts before those that do not (a virtual host's routes are its
/// own), the longest prefix first within each. Matching reads bytes only
/// (`RouteMatcher`): a memory hit asks it for its key's lifetime.
public struct RouteTable: Sendable, Equatable, TierLifetimes {
    public let routes: [Route]
    public var isEmpty: Bool { routes.isEmpty }
    /// Whether any route names hosts: keys then carry the request's host
    /// name after a space ("/a?b example.com"; `VirtualHosts`).
    public let keysHost: Bool
    /// Whether any route sets a tier lifetime (else the tiers need not ask).
    public let setsLifetimes: Bool
    /// Whether any route caches POSTs (`PostQuery`).
    public let cachesPost: Bool
    private let matcher: RouteMatcher
    /// What a request reads of each route, made once: `RouteFacts(routes[i])`
    /// on each request copied the whole route (a retain and a release for
    /// each of its strings, lists and rules).
    private let facts: [RouteFacts]

    public init(_ routes: [Route] = []) {
        self.routes = routes.sorted {
            $0.hosts.isEmpty != $1.hosts.isEmpty ? !$0.hosts.isEmpty : $0.prefix.utf8.count > $1.prefix.utf8.count
        }
        keysHost = routes.contains { !$0.hosts.isEmpty }
        setsLifetimes = routes.contains { $0.memoryTTL != nil || $0.diskTTL != nil || $0.diskMirrorsMemory }
        cachesPost = routes.contains { $0.cachePost }
        matcher = RouteMatcher(self.routes)
        facts = self.routes.map(RouteFacts.init)
    }

    public static func == (a: RouteTable, b: RouteTable) -> Bool { a.routes == b.routes }

    /// Per-key memory lifetime overrides, for the tiers.
    public func memoryLifetime(_ key: String) -> Int?? {
        guard let i = index(key) else { return nil }
        return routes[i].memoryTTL
    }

    /// Per-key disk lifetime overrides, for the tiers.
    public func diskLifetime(_ key: String) -> Int?? {
        guard let i = index(key) else { return nil }
        return routes[i].diskMirrorsMemory ? routes[i].memoryTTL : routes[i].diskTTL
    }

    /// The cache key of a request: its target as its route says, and with
    /// virtual hosts the host name its Host field gives.
    public func cacheKey(_ target: String, host: String?) -> String {
        guard keysHost else {
            guard let i = index(target), routes[i].changesKeys else { return target }
            return routes[i].cacheKey(target)
        }
        let name = VirtualHosts.name(host)
        let key = target + " " + name
        guard let i = index(key), routes[i].changesKeys else { return key }
        return routes[i].cacheKey(target) + " " + name
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
            let keys = key == asGiven ? [key] : [asGiven, key]
            // The URL's cached queries (QUERY requests, and POSTs), by their tag.
            let queries = keys.compactMap { PostQuery.tag(urlKey: $0).map(PurgeScope.tag) }
            return keys.map(PurgeScope.key) + queries
        }
        let onPath = path.prefix { $0 != "?" }
        var targets = [target]
        for route in routes where onPath.hasPrefix(route.prefix) {
            let key = route.cacheKey(target)
            if !targets.contains(key) { targets.append(key) }
        }
        // Every host's key of the path, and their cached queries ("path\n...").
        return [.key(target)] + targets.map { .prefix($0 + " ") } + targets.map { .prefix($0 + "\n") }
    }

    /// The route for a cache key (or a request target without virtual
    /// hosts), if any. Storage decisions concern GET responses, hence the
    /// default method.
    public func match(_ key: String, method: String = "GET") -> Route? {
        index(key, method: method).map { routes[$0] }
    }

    /// A request's cache key and what it reads of its route, matched once
    /// where the two agree (GET and HEAD without virtual hosts: key
    /// options touch only the query, which matching ignores).
    public func keyAndFacts(_ target: String, host: @autoclosure () -> String?, method: String) -> (key: String, route: RouteFacts?) {
        guard !routes.isEmpty else { return (target, nil) }
        guard !keysHost, method == "GET" || method == "HEAD" else {
            let key = cacheKey(target, host: keysHost ? host() : nil)
            return (key, index(key, method: method == "HEAD" ? "GET" : method).map { facts[$0] })
        }
        guard let i = index(target) else { return (target, nil) }
        return (routes[i].changesKeys ? routes[i].cacheKey(target) : target, facts[i])
    }

    /// How a POST with this key is cached, when its route caches POSTs.
    public func postCaching(_ key: String) -> PostCaching? {
        guard cachesPost, let i = index(key, method: "POST"), routes[i].cachePost else { return nil }
        let route = routes[i]
        return PostCaching(maxBody: route.maxPostBody, normalizeJSON: route.normalizeJSON, uncachedMethods: route.uncachedRPCMethods,
                           persistedQueries: route.cachePersistedQueries)
    }

    /// How a QUERY (RFC 10008) with this key and Content-Type is keyed: its
    /// body bounded by its route's `max_post_body` (64 KiB by default).
    public func queryCaching(_ key: String, contentType: String?) -> PostCaching {
        .queryMethod(contentType: contentType, maxBody: index(key, method: "QUERY").map { routes[$0].maxPostBody } ?? Route.defaultMaxPostBody)
    }

    /// The position in `routes` of the route for a key, if any.
    @inline(__always)
    public func index(_ key: String, method: String = "GET") -> Int? {
        guard !routes.isEmpty else { return nil }
        if let found = key.utf8.withContiguousStorageIfAvailable({ index(UnsafeRawBufferPointer($0), key: key, method: method) }) {
            return found
        }
        return Array(key.utf8).withUnsafeBytes { index($0, key: key, method: method) }
    }

    private func index(_ bytes: UnsafeRawBufferPointer, key: String, method: String) -> Int? {
        // The path ends at the query (or, with virtual hosts, at the space before the host).
        var end = 0
        // (or at the line feed before a cached POST's body digest).
        while end < bytes.count && bytes[end] != UInt8(ascii: "?") && bytes[end] != 0x0A
              && !(keysHost && bytes[end] == VirtualHosts.separator) { end += 1 }
        var host: UnsafeRawBufferPointer?
        if keysHost {
            var space = bytes.count
            while space > end && bytes[space - 1] != VirtualHosts.separator { space -= 1 }
            host = space > end ? UnsafeRawBufferPointer(rebasing: bytes[space...]) : UnsafeRawBufferPointer(start: nil, count: 0)
        }
        let path = UnsafeRawBufferPointer(rebasing: bytes[..<end])
        return matcher.first(path: path, host: host) { i in
            let route = routes[i]
            if !route.methods.isEmpty && !route.methods.contains(method) { return false }
            if let glob = route.glob { return fnmatch(glob, String(decoding: path, as: UTF8.self), 0) == 0 }
            return true
        }
    }
}
