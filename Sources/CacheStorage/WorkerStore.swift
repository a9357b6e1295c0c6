import EventLoop
import Threads

/// The store as one worker's loop uses it, the one thing the request path
/// talks to: the tiers every worker shares (`TieredStore`: memory, disk),
/// this worker's copies of its hits (`LocalHits`), and behind them the
/// fleet's shared tier, the last stage before the upstream (memory -> disk
/// -> fleet), asked asynchronously and only once the local tiers missed.
/// The shared stage is per worker (its Redis connection runs on the
/// worker's loop), hence here and not in `TieredStore`. Used on that
/// worker's thread only (`tiers` may be used from any).
public final class WorkerStore {
    public let tiers: TieredStore
    /// This worker's copies of its recent memory hits (no lock for a hot key).
    public let localHits = LocalHits()
    /// The fleet's shared tier (`[fleet]`); set before the worker runs.
    public var shared: (any SharedTier)?
    /// Tells the fleet's other nodes and its shared tier of a purge this
    /// node made on its own (a Cache-Group-Invalidation); set before the
    /// worker runs, callable from any thread.
    public var announce: (@Sendable (PurgeScope) -> Void)?

    public init(tiers: TieredStore) {
        self.tiers = tiers
    }

    // MARK: the local tiers

    /// The local tiers' variants of `key`, or nil where a slower tier would
    /// wait for the disk (then `tiers.lookup` is made on an I/O thread).
    @inline(__always)
    public func lookupWithoutBlocking(_ key: String) -> Variants? { tiers.lookupWithoutBlocking(key, local: localHits) }

    /// The same, waiting for the disk where it must.
    public func lookup(_ key: String) -> Variants { tiers.lookup(key, local: localHits) }

    /// `lookup` made on an I/O thread, its variants handed back on `loop`
    /// (when `lookupWithoutBlocking` would have waited).
    public func lookupOffLoop(_ key: String, on loop: EventLoop, found: @escaping (Variants) -> Void) {
        let tiers = tiers
        BlockingWork.shared.run({ tiers.lookup(key) }, on: loop, then: found)
    }

    /// A hard purge that waits for no disk (`TieredStore.purgeWithoutBlocking`).
    public func purgeWithoutBlocking(_ scope: PurgeScope, on loop: EventLoop) { tiers.purgeWithoutBlocking(scope, on: loop) }

    /// The process ran out of descriptors: the tiers give back what they keep open.
    public func releaseDescriptors() -> Int { tiers.releaseDescriptors() }

    @discardableResult
    public func remove(_ key: String) -> Bool { tiers.remove(key) }

    public func noteServed(_ entry: CachedResponse) { tiers.noteServed(entry, local: localHits) }

    // MARK: the shared stage

    /// Whether the fleet's stage is there.
    public var hasSharedStage: Bool { shared != nil }

    /// The largest body the shared stage takes (0: none).
    public var sharedMaxObjectBytes: Int { shared?.maxObjectBytes ?? 0 }

    /// Asks the shared stage for `key` once the local tiers had nothing
    /// usable (`local`: what they had); true when asked: `found` then runs
    /// once, on the worker's loop, with `local` and what the shared stage
    /// had, stored in the local tiers (`toDisk`: the disk too) unless a
    /// purge applied here since the lookup began. False (no fleet, or Redis
    /// unreachable): nothing runs, and the caller goes on at once.
    public func lookupShared(_ key: String, after local: Variants, toDisk: Bool, found: @escaping (Variants) -> Void) -> Bool {
        guard let shared else { return false }
        let since = tiers.fetchToken
        return shared.lookup(key) { [tiers] variants in
            let stored = variants.filter { tiers.insert($0, firstTierOnly: !toDisk, fetchedSince: since) }
            found(stored.isEmpty ? local : Variants(Array(local) + stored))
        }
    }

    /// Offers a response just stored locally to the shared stage (`mark`:
    /// taken when its fetch began, by its `MissHandler`; a small body left in a file is read in
    /// from the page cache, else it is not offered).
    func share(_ entry: CachedResponse, fetchedAt mark: SharedMark?) {
        guard let shared, let mark, let resident = entry.inMemory(mayBlock: false), resident.bodyFile == nil else { return }
        shared.store(resident, fetchedAt: mark)
    }

    /// Claims the fetch of `key` for this node across the fleet (see
    /// `SharedTier.claim`); false, calling nothing, when it cannot be asked.
    public func claim(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool {
        shared?.claim(key, milliseconds: milliseconds, outcome: outcome) ?? false
    }

    /// Gives a claim up (see `SharedTier.release`).
    public func release(_ key: String) { shared?.release(key) }
}
