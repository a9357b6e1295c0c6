#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import Synchronization
import Upstream

/// Active health checks (`health_check` in an `[upstreams.NAME]` table): on
/// a thread of its own, each server of such a pool is asked its path every
/// `health_interval`; one that fails (no answer, or a status the check does
/// not take) is left out until a check passes again. The pools are read
/// anew each round (a reload replaces them).
public final class HealthChecker: @unchecked Sendable {
    private let pools: () -> [UpstreamPool]
    private let settings: () -> UpstreamSettings
    private let log: (String) -> Void
    /// When each pool's servers are next due, by pool identity.
    private var due: [ObjectIdentifier: UInt64] = [:]

    public init(pools: @escaping () -> [UpstreamPool], settings: @escaping () -> UpstreamSettings,
                log: @escaping (String) -> Void) {
        self.pools = pools
        self.settings = settings
        self.log = log
    }

    /// Runs the checks for ever (the thread's body).
    public func run() {
        while true {
            round(now: EventLoop.nowMilliseconds())
            usleep(100_000)
        }
    }

    /// Checks the pools that are due at `now`.
    public func round(now: UInt64) {
        let pools = pools()
        due = due.filter { key, _ in pools.contains { ObjectIdentifier($0) == key } }
        for pool in pools {
            guard let check = pool.healthCheck else { continue }
            let id = ObjectIdentifier(pool)
            if let next = due[id], next > now { continue }
            due[id] = now + UInt64(check.intervalMilliseconds)
            for server in pool.servers {
                let status = HealthProbe.status(server.base + check.path, timeoutMilliseconds: min(check.intervalMilliseconds, 5_000),
                                                settings: settings())
                let healthy = check.passes(status)
                if healthy != server.healthy.load(ordering: .relaxed) {
                    log("upstream \(pool.name): \(server.base) is \(healthy ? "healthy again" : "unhealthy") "
                        + "(\(check.path) answered \(status.map(String.init) ?? "nothing"))")
                }
                server.checked(healthy: healthy)
            }
        }
    }
}
