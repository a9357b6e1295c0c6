import Synchronization

/// A named upstream (`[upstreams.NAME]`, or the one `upstream` names): a
/// pool of servers requests are spread over, round robin or by the hash of
/// their cache key (the same key always to the same server while it is
/// up). A server whose connections fail `maxFails` times in a row is left
/// out for `failTimeout` (passive failure marking, as nginx's max_fails and
/// fail_timeout); when every server is out, the one back soonest is tried.
/// Shared by every worker; its figures are atomics.
public final class UpstreamPool: Sendable {
    public enum Balance: String, Sendable, CaseIterable {
        case roundRobin = "round_robin"
        case hash
    }

    public let name: String
    public let servers: [UpstreamServer]
    public let balance: Balance
    public let maxFails: Int
    public let failTimeoutMilliseconds: UInt64
    /// The active health check: a path each server is asked every
    /// `interval`, and the statuses that pass (nil: any 2xx or 3xx).
    public struct HealthCheck: Equatable, Sendable {
        public var path: String
        public var intervalMilliseconds: Int
        public var status: Int?
        public init(path: String, intervalMilliseconds: Int = 5_000, status: Int? = nil) {
            (self.path, self.intervalMilliseconds, self.status) = (path, intervalMilliseconds, status)
        }
        public func passes(_ answer: Int?) -> Bool {
            guard let answer else { return false }
            return status.map { $0 == answer } ?? (200..<400).contains(answer)
        }
    }
    public let healthCheck: HealthCheck?
    private let turn = Atomic<Int>(0)

    public convenience init(name: String, servers: [String], balance: Balance = .roundRobin, maxFails: Int = 1,
                failTimeoutMilliseconds: UInt64 = 10_000, healthCheck: HealthCheck? = nil) {
        precondition(!servers.isEmpty, "a pool has servers")
        self.init(name: name, servers: servers.map { UpstreamServer(base: $0) }, balance: balance, maxFails: maxFails,
                  failTimeoutMilliseconds: failTimeoutMilliseconds, healthCheck: healthCheck)
    }

    private init(name: String, servers: [UpstreamServer], balance: Balance, maxFails: Int, failTimeoutMilliseconds: UInt64,
                 healthCheck: HealthCheck?) {
        self.healthCheck = healthCheck
        self.name = name
        self.servers = servers
        self.balance = balance
        self.maxFails = maxFails
        self.failTimeoutMilliseconds = failTimeoutMilliseconds
    }

    /// This pool with the servers `old` (the same pool before a reload)
    /// also has: their figures and health go on, not from zero.
    public func keepingServers(of old: UpstreamPool?) -> UpstreamPool {
        guard let old else { return self }
        let kept = servers.map { server in old.servers.first { $0.base == server.base } ?? server }
        return UpstreamPool(name: name, servers: kept, balance: balance, maxFails: maxFails,
                            failTimeoutMilliseconds: failTimeoutMilliseconds, healthCheck: healthCheck)
    }

    /// The server a request for `key` goes to at `now` (monotonic ms).
    public func pick(key: String, now: UInt64) -> UpstreamServer {
        if servers.count == 1 { return servers[0] }
        let start: Int
        switch balance {
        case .roundRobin: start = turn.wrappingAdd(1, ordering: .relaxed).oldValue
        case .hash: start = Int(truncatingIfNeeded: Self.hash(key) % UInt64(servers.count))
        }
        var soonest = servers[Self.index(start, servers.count)]
        for offset in 0..<servers.count {
            let server = servers[Self.index(start + offset, servers.count)]
            if server.isUp(now: now) { return server }
            if server.downUntil.load(ordering: .relaxed) < soonest.downUntil.load(ordering: .relaxed) { soonest = server }
        }
        return soonest
    }

    /// Whether no server takes requests at `now`: each is left out after
    /// failures, or failed its health check.
    public func allDown(now: UInt64) -> Bool { !servers.contains { $0.isUp(now: now) } }

    private static func index(_ n: Int, _ count: Int) -> Int { ((n % count) + count) % count }

    /// FNV-1a over the key's bytes: stable across runs and nodes.
    public static func hash(_ key: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key.utf8 { h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return h
    }

    /// A request to `server` failed to connect or timed out. Past
    /// max_fails in a row it is left out for fail_timeout; `markedDown`
    /// counts the times it went from taking requests to left out (a
    /// failure while it is left out already moves the end, and counts no
    /// second time).
    public func failed(_ server: UpstreamServer, now: UInt64) {
        server.errors.wrappingAdd(1, ordering: .relaxed)
        if server.consecutiveFails.wrappingAdd(1, ordering: .relaxed).newValue >= maxFails {
            server.consecutiveFails.store(0, ordering: .relaxed)
            let wasTaking = server.downUntil.exchange(now + failTimeoutMilliseconds, ordering: .relaxed) <= now
            if wasTaking { server.markedDown.wrappingAdd(1, ordering: .relaxed) }
        }
    }
}

/// The pools of a configuration: where requests go that no route sends
/// elsewhere, and the named ones routes choose.
public final class UpstreamPools: Sendable {
    public let defaultPool: UpstreamPool
    public let named: [String: UpstreamPool]

    public init(defaultPool: UpstreamPool, named: [String: UpstreamPool] = [:]) {
        self.defaultPool = defaultPool
        self.named = named
    }

    /// The pool a route names (nil, or unknown: the default).
    public func pool(named name: String?) -> UpstreamPool {
        guard let name, let pool = named[name] else { return defaultPool }
        return pool
    }

    /// These pools with the servers the same pools of `old` (the running
    /// configuration, on a reload) have: a reload keeps their figures.
    public func keepingServers(of old: UpstreamPools) -> UpstreamPools {
        let named = self.named.mapValues { $0.keepingServers(of: old.named[$0.name]) }
        let defaultPool = named[self.defaultPool.name]
            ?? self.defaultPool.keepingServers(of: old.defaultPool.name == self.defaultPool.name ? old.defaultPool : nil)
        return UpstreamPools(defaultPool: defaultPool, named: named)
    }

    /// Every pool, the default first.
    public var all: [UpstreamPool] {
        [defaultPool] + named.values.filter { $0 !== defaultPool }.sorted { $0.name < $1.name }
    }
}

/// One server of a pool: its base URL and its figures.
public final class UpstreamServer: Sendable {
    /// `http(s)://host[:port][/prefix]`, the request's path appended.
    public let base: String
    /// Left out until then (monotonic ms; 0: never marked).
    public let downUntil = Atomic<UInt64>(0)
    public let consecutiveFails = Atomic<Int>(0)
    public let requests = Atomic<Int>(0)
    public let errors = Atomic<Int>(0)
    public let markedDown = Atomic<Int>(0)
    public let headMicroseconds = Atomic<Int>(0)
    public let heads = Atomic<Int>(0)

    /// `host[:port]` of `base`, as the access log names the server (nginx's `$upstream_addr`).
    public let address: String

    public init(base: String) {
        self.base = base
        let utf8 = Array(base.utf8)
        var start = 0
        for i in 0..<max(0, utf8.count - 2) where utf8[i] == 0x3A && utf8[i + 1] == 0x2F && utf8[i + 2] == 0x2F {  // "://"
            start = i + 3
            break
        }
        address = String(decoding: utf8[start...].prefix { $0 != 0x2F }, as: UTF8.self)
    }

    /// Not left out after failures, and passing its health check (if any).
    public func isUp(now: UInt64) -> Bool { downUntil.load(ordering: .relaxed) <= now && healthy.load(ordering: .relaxed) }

    /// What the last health check found (true until one fails).
    public let healthy = Atomic<Bool>(true)

    /// The health checker's finding.
    public func checked(healthy: Bool) { self.healthy.store(healthy, ordering: .relaxed) }

    public func started() { requests.wrappingAdd(1, ordering: .relaxed) }

    /// A response head came back: the server answers.
    public func answered(microseconds: Int) {
        consecutiveFails.store(0, ordering: .relaxed)
        heads.wrappingAdd(1, ordering: .relaxed)
        headMicroseconds.wrappingAdd(microseconds, ordering: .relaxed)
    }

    /// What `/stats` and `/metrics` show of it.
    public struct Figures: Equatable, Sendable {
        public var base: String
        public var up: Bool
        public var requests: Int
        public var errors: Int
        public var markedDown: Int
        /// Whether the last health check passed (nil: its pool has no
        /// health check, so only its passive state, `up`, is known).
        public var healthy: Bool?
        /// Mean time to the response head, in milliseconds (0 before any).
        public var averageMilliseconds: Double
        /// Response heads received and the microseconds they took, summed.
        public var heads: Int
        public var headMicroseconds: Int
    }

    /// `checked`: its pool has a health check.
    public func figures(now: UInt64, checked: Bool = true) -> Figures {
        let heads = heads.load(ordering: .relaxed)
        return Figures(base: base, up: isUp(now: now), requests: requests.load(ordering: .relaxed),
                       errors: errors.load(ordering: .relaxed), markedDown: markedDown.load(ordering: .relaxed),
                       healthy: checked ? healthy.load(ordering: .relaxed) : nil,
                       averageMilliseconds: heads == 0 ? 0 : Double(headMicroseconds.load(ordering: .relaxed)) / Double(heads) / 1000,
                       heads: heads, headMicroseconds: headMicroseconds.load(ordering: .relaxed))
    }
}
