import EventLoop
import Threads
import TLS

/// Where the fleet's Redis master is now, for every connection a node
/// makes to it (the purge feed's, each worker's shared tier): one fixed
/// address (`redis =`), or the one Redis Sentinel names, which a
/// `SentinelWatcher` sets and changes on a failover. Each address it takes
/// is a new generation: a connection made to an older one is closed and
/// made again. Any thread.
public final class RedisMaster: @unchecked Sendable {
    /// A master address and the generation it came with.
    public struct Current: Equatable, Sendable {
        public let address: RedisAddress
        public let generation: UInt64
    }

    /// Named by Sentinel (connections check that it is a master, `ROLE`),
    /// or given.
    public let followsSentinel: Bool
    /// With `rediss://`: how the master's certificate is verified.
    public let tls: TLSClientContext?
    private let state: Locked<State>

    private struct State {
        var current: Current?
        var nextGeneration: UInt64 = 1
        var watchers: [(loop: EventLoop, changed: () -> Void)] = []
        /// Called when a connection doubts the master (the watcher asks again).
        var doubted: ((UInt64) -> Void)?
        var failovers = 0
        /// Since when the node has had no master (monotonic ms), and the time without one before.
        var missingSince: UInt64?
        var missingMilliseconds: UInt64 = 0
    }

    /// A fixed address: nothing ever changes it.
    public init(fixed address: RedisAddress, tls: TLSClientContext? = nil) {
        followsSentinel = false
        self.tls = tls
        state = Locked(State(current: Current(address: address, generation: 0)))
    }

    /// No master yet: `set` gives the first. `now`: monotonic milliseconds.
    public init(followingSentinelAt now: UInt64) {
        followsSentinel = true
        tls = nil
        state = Locked(State(missingSince: now))
    }

    public var current: Current? { state.withLock { $0.current } }

    /// `changed` runs on `loop` whenever the master's address changes or
    /// is lost (read `current` there).
    public func watch(on loop: EventLoop, _ changed: @escaping () -> Void) {
        state.withLock { $0.watchers.append((loop, changed)) }
    }

    /// What asks Sentinel again when a connection doubts the master.
    public func onDoubt(_ ask: @escaping (UInt64) -> Void) {
        state.withLock { $0.doubted = ask }
    }

    /// A connection to generation `generation` found no master there (it
    /// says it is a replica, refused a write with READONLY, or is gone).
    public func doubt(_ generation: UInt64) {
        guard followsSentinel else { return }
        let ask = state.withLock { state -> ((UInt64) -> Void)? in
            guard state.current?.generation == generation else { return nil }
            return state.doubted
        }
        ask?(generation)
    }

    /// The address Sentinel names now. A new one starts a generation
    /// (counted as a failover after the first) and tells every watcher;
    /// the same one again changes nothing. `now`: monotonic milliseconds.
    public func set(_ address: RedisAddress, now: UInt64) {
        let watchers = state.withLock { state -> [(loop: EventLoop, changed: () -> Void)] in
            guard state.current?.address != address else { return [] }
            if state.nextGeneration > 1 { state.failovers += 1 }
            state.current = Current(address: address, generation: state.nextGeneration)
            state.nextGeneration += 1
            return state.watchers
        }
        for watcher in watchers { watcher.loop.execute(watcher.changed) }
    }

    /// The node's purge stream reached the master (true) or lost it: the
    /// time between is time without a master. `now`: monotonic ms.
    public func reached(_ reached: Bool, now: UInt64) {
        state.withLock { state in
            if reached, let since = state.missingSince {
                state.missingMilliseconds += now >= since ? now - since : 0
                state.missingSince = nil
            } else if !reached, state.missingSince == nil {
                state.missingSince = now
            }
        }
    }

    /// Failovers seen (the master's address changed), and the milliseconds
    /// spent without a known master so far. `now`: monotonic milliseconds.
    public func figures(now: UInt64) -> (failovers: Int, withoutMasterMilliseconds: UInt64) {
        state.withLock { state in
            let open = state.missingSince.map { now >= $0 ? now - $0 : 0 } ?? 0
            return (state.failovers, state.missingMilliseconds + open)
        }
    }
}
