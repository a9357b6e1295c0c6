#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import Synchronization
import Threads

/// Active health checks (`health_check` in an `[upstreams.NAME]` table):
/// each server of such a pool is asked its path every `health_interval`, on
/// its own schedule, each probe on a thread of its own: one that hangs
/// (until its timeout) delays no other server's checks. A server that fails
/// (no answer, or a status the check does not take) is left out until a
/// check passes again. The pools are read anew each round (a reload
/// replaces them).
public final class HealthChecker: @unchecked Sendable {
    private let pools: () -> [UpstreamPool]
    private let settings: () -> UpstreamSettings
    private let log: @Sendable (String) -> Void
    /// When each server is next due, by server identity; the servers whose
    /// probe is still out (touched on the checker's thread and the probes').
    private let state = Mutex<(due: [ObjectIdentifier: UInt64], probing: Set<ObjectIdentifier>)>(([:], []))

    public init(pools: @escaping () -> [UpstreamPool], settings: @escaping () -> UpstreamSettings,
                log: @escaping @Sendable (String) -> Void) {
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

    /// Starts the probes that are due at `now` and not still out.
    public func round(now: UInt64) {
        let pools = pools()
        let live = Set(pools.flatMap { $0.servers.map(ObjectIdentifier.init) })
        state.withLock { $0.due = $0.due.filter { live.contains($0.key) } }
        for pool in pools {
            guard let check = pool.healthCheck else { continue }
            for server in pool.servers {
                let id = ObjectIdentifier(server)
                let start = state.withLock { s -> Bool in
                    guard !s.probing.contains(id), (s.due[id] ?? 0) <= now else { return false }
                    s.due[id] = now + UInt64(check.intervalMilliseconds)
                    s.probing.insert(id)
                    return true
                }
                guard start else { continue }
                let settings = settings(), name = pool.name, log = log
                do {
                    try startThread(name: "larder-health") { [self] in
                        let status = HealthProbe.status(server.base + check.path,
                                                        timeoutMilliseconds: min(check.intervalMilliseconds, 5_000), settings: settings)
                        let healthy = check.passes(status)
                        if healthy != server.healthy.load(ordering: .relaxed) {
                            log("upstream \(name): \(server.base) is \(healthy ? "healthy again" : "unhealthy") "
                                + "(\(check.path) answered \(status.map(String.init) ?? "nothing"))")
                        }
                        server.checked(healthy: healthy)
                        _ = state.withLock { $0.probing.remove(id) }
                    }
                } catch {
                    _ = state.withLock { $0.probing.remove(id) }
                }
            }
        }
    }
}
