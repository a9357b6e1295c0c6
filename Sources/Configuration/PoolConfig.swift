import Proxy
import Routing
import TOMLKit
import Upstream

/// One `[upstreams.NAME]` table: a pool of servers that `upstream` or a
/// route's `upstream` names.
public struct PoolConfig: Equatable {
    public var name: String
    public var servers: [String]
    public var balance = UpstreamPool.Balance.roundRobin
    public var maxFails = 1
    public var failTimeoutMilliseconds = 10_000
    public var healthCheck: UpstreamPool.HealthCheck?

    public static let keys = ["servers", "balance", "max_fails", "fail_timeout", "health_check", "health_interval", "health_status"]

    /// Names: letters, digits, '_' and '-'.
    public static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64 && !text.contains("://")
            && text.utf8.allSatisfy { b in
                (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F || b == 0x2D
            }
    }

    /// `[upstreams.NAME]` tables; `fail(name, key, message)` makes the error.
    public static func parse(_ value: TOMLValueConvertible, fail: (String, String, String) -> ConfigError) throws(ConfigError) -> [PoolConfig] {
        guard value.type == .table, let tables = value.table else {
            throw fail("", "", "expected [upstreams.NAME] tables, each with servers = [\"http://HOST:PORT\", ...]")
        }
        var pools: [PoolConfig] = []
        for name in tables.keys.sorted() {
            guard isName(name), let table = tables[name]?.table else {
                throw fail(name, "", "expected an [upstreams.NAME] table named with letters, digits, '_' or '-'")
            }
            for key in table.keys where !keys.contains(key) {
                throw fail(name, key, UnknownKey.message("upstream key", key, known: keys))
            }
            guard let list = table["servers"]?.array, list.count > 0,
                  let servers = Optional((0..<list.count).compactMap { list[$0].string }), servers.count == list.count,
                  servers.allSatisfy(Units.validUpstream) else {
                throw fail(name, "servers", "expected servers = [\"http://10.0.0.1:9000\", ...]: one or more http:// or https:// URLs")
            }
            var pool = PoolConfig(name: name, servers: servers)
            if let item = table["balance"] {
                guard let text = item.string, let balance = UpstreamPool.Balance(rawValue: text) else {
                    throw fail(name, "balance", "expected \"round_robin\" or \"hash\" (the cache key's hash: one server per URL)")
                }
                pool.balance = balance
            }
            if let item = table["max_fails"] {
                guard let n = item.int, (1...100).contains(n) else { throw fail(name, "max_fails", "must be between 1 and 100") }
                pool.maxFails = n
            }
            if let item = table["fail_timeout"] {
                guard let text = item.string, let ms = Units.parseDurationMilliseconds(text), ms >= 1000 else {
                    throw fail(name, "fail_timeout", "expected a duration of at least 1s, such as \"10s\"")
                }
                pool.failTimeoutMilliseconds = ms
            }
            if let item = table["health_check"] {
                guard let path = item.string, path.hasPrefix("/") else {
                    throw fail(name, "health_check", "expected a path such as \"/healthz\" that each server is asked")
                }
                pool.healthCheck = UpstreamPool.HealthCheck(path: path)
            }
            if let item = table["health_interval"] {
                guard pool.healthCheck != nil else { throw fail(name, "health_interval", "only with health_check") }
                guard let text = item.string, let ms = Units.parseDurationMilliseconds(text), ms >= 100, ms <= 3_600_000 else {
                    throw fail(name, "health_interval", "expected a duration from 100ms to 1h, such as \"5s\"")
                }
                pool.healthCheck?.intervalMilliseconds = ms
            }
            if let item = table["health_status"] {
                guard pool.healthCheck != nil else { throw fail(name, "health_status", "only with health_check") }
                guard let status = item.int, (100...599).contains(status) else {
                    throw fail(name, "health_status", "expected a status code such as 200")
                }
                pool.healthCheck?.status = status
            }
            pools.append(pool)
        }
        return pools
    }

    public func make() -> UpstreamPool {
        UpstreamPool(name: name, servers: servers, balance: balance, maxFails: maxFails,
                     failTimeoutMilliseconds: UInt64(failTimeoutMilliseconds), healthCheck: healthCheck)
    }
}

extension Settings {
    /// An `upstream` (or a route's) that names no `[upstreams.NAME]` table.
    public func unknownPool() -> (route: Int?, message: String)? {
        let names = Set(pools.map(\.name))
        let known = names.isEmpty ? "none is defined" : "defined: " + names.sorted().joined(separator: ", ")
        if let upstream, !Units.validUpstream(upstream), !names.contains(upstream) {
            return (nil, "no [upstreams.\(upstream)] table (\(known))")
        }
        for (index, route) in routes.enumerated() {
            if let name = route.upstream, !names.contains(name) { return (index, "no [upstreams.\(name)] table (\(known))") }
        }
        return nil
    }
}
