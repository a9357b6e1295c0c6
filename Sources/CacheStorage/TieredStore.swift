import Foundation
import Synchronization

/// Memory in front of disk, behind one interface: a lookup checks memory,
/// then disk (promoting what it finds); a store goes to memory and, in the
/// background, to disk; a removal clears both.
public final class TieredStore: @unchecked Sendable {
    public let memory: MemoryTier
    public let disk: DiskTier?
    /// Rebuilds a stored response from a disk record (the proxy knows how).
    private let rehydrate: @Sendable (DiskRecord) -> CachedResponse

    /// How long the memory tier keeps an entry after it was stored (nil:
    /// until evicted). The disk tier's lifetime is the DiskTier's own. These
    /// decide how long each tier keeps the bytes, not what is fresh.
    public let memoryLifetimeSeconds: Int?
    /// Per-key overrides (routes); nil when there are none. `hasRules`
    /// spares a hit the lock when no route sets a lifetime.
    private let rules = Locked<(any TierLifetimes)?>(nil)
    private let hasRules = Atomic<Bool>(false)

    /// Installs per-key tier lifetimes (routes' memory_ttl and disk_ttl);
    /// nil removes them.
    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        rules.withLock { $0 = lifetimes }
        hasRules.store(lifetimes != nil, ordering: .releasing)
        disk?.setLifetimeRules(lifetimes)
    }

    public init(memory: MemoryTier, disk: DiskTier?, memoryLifetimeSeconds: Int? = nil,
                rehydrate: @escaping @Sendable (DiskRecord) -> CachedResponse) {
        self.memory = memory
        self.disk = disk
        self.memoryLifetimeSeconds = memoryLifetimeSeconds
        self.rehydrate = rehydrate
    }

    public func lookup(_ key: String) -> Variants {
        var inMemory = memory.lookup(key)
        let override = hasRules.load(ordering: .acquiring) ? rules.withLock({ $0 })?.memoryLifetime(key) : nil
        if let lifetime = override ?? memoryLifetimeSeconds, !inMemory.isEmpty {
            let now = Int64(Date().timeIntervalSince1970)
            if inMemory.contains(where: { now - $0.timing.responseTime > Int64(lifetime) }) {
                // Past memory_ttl: out of memory; the disk tier may still hold it.
                memory.remove(key)
                inMemory = Variants()
            }
        }
        guard inMemory.isEmpty, let disk else { return inMemory }
        let since = fetchToken
        let entries = disk.lookup(key).map { record in
            let entry = rehydrate(record)
            return record.markedStale ? entry.markedStale() : entry
        }
        // Promotion loses to a purge that ran while the files were read.
        purges.withLock { log in
            for entry in entries where log.verdict(key: key, tags: entry.tags, since: since) == .store { memory.insert(entry) }
        }
        return Variants(entries)
    }

    // MARK: storing, under the purge lock

    /// Purges, numbered. Its lock also orders every store against every
    /// purge: a store either lands before a purge (which then removes it) or
    /// is checked against it.
    private let purges = Locked(PurgeLog())
    private let purgeNumber = Atomic<UInt64>(0)

    /// Taken when a fetch starts and handed back when it stores, so that a
    /// purge in between wins (see `insert`).
    public var fetchToken: UInt64 { purgeNumber.load(ordering: .acquiring) }

    /// Stores in memory (when it fits) and queues the disk write. Returns
    /// whether any tier took it. `toDisk: false` keeps the entry in memory
    /// only (a route with disk = false). `since`: the `fetchToken` taken
    /// when the response was requested; a purge since then that matches the
    /// entry refuses it (a soft one stores it marked stale).
    @discardableResult
    public func insert(_ entry: CachedResponse, toDisk: Bool = true, fetchedSince since: UInt64) -> Bool {
        purges.withLock { log in
            var entry = entry
            switch log.verdict(key: entry.key, tags: entry.tags, since: since) {
            case .refuse: return false
            case .storeStale: entry = entry.markedStale()
            case .store: break
            }
            let inMemory = memory.insert(entry)
            guard let disk, toDisk else { return inMemory }
            // A response whose body is already a disk file keeps that file; only
            // in-memory bodies are written.
            guard let record = DiskRecord(entry, storedAt: Int64(Date().timeIntervalSince1970)) else { return inMemory }
            disk.store(record)
            return true
        }
    }

    /// Starts streaming a response too large for memory to the disk tier,
    /// unless a purge since `since` matches it. Later purges are the disk
    /// tier's to apply when the stream finishes.
    public func beginDiskStream(_ record: DiskRecord, fetchedSince since: UInt64) -> DiskTier.Stream? {
        purges.withLock { log in
            var record = record
            switch log.verdict(key: record.key, tags: record.tags, since: since) {
            case .refuse: return nil
            case .storeStale: record.markedStale = true
            case .store: break
            }
            return disk?.beginStream(record)
        }
    }

    @discardableResult
    public func remove(_ key: String) -> Bool {
        let inMemory = memory.remove(key)
        let onDisk = disk?.remove(key) ?? 0
        return inMemory || onDisk > 0
    }

    /// Removes (or, `soft`, marks stale) what `scope` matches in both
    /// tiers, and makes fetches in flight lose to it. Returns the number of
    /// stored responses: per key, the larger of its memory and disk counts
    /// (the tiers mostly hold the same responses).
    public func purge(_ scope: PurgeScope, soft: Bool) -> Int {
        purgeReportingFailures(scope, soft: soft).purged
    }

    /// A purge, with the files it could not delete (or mark stale): those
    /// responses are gone until a restart finds their files again.
    public func purgeReportingFailures(_ scope: PurgeScope, soft: Bool) -> (purged: Int, failures: [String]) {
        // A purge must see every file: first let the start-up index finish
        // (outside the lock, so stores go on meanwhile).
        disk?.waitForIndex(timeoutSeconds: 120)
        // Numbered and applied to both indexes under the lock: no store
        // slips in between. Files are deleted after, already unreachable.
        let (inMemory, files) = purges.withLock { log -> ([String: Int], [(key: String, name: String)]) in
            purgeNumber.store(log.record(scope, soft: soft), ordering: .releasing)
            return (memory.purge(scope, soft: soft), disk?.purgeIndex(scope, soft: soft) ?? [])
        }
        let failures = disk?.applyPurge(files, soft: soft) ?? []
        return (Self.merge(inMemory, files.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }), failures)
    }

    /// Empties the memory tier only; returns the number of responses dropped.
    public func clearMemory() -> Int { memory.removeAll() }

    /// Removes responses stored before `cutoff` (wall seconds) from both tiers.
    public func prune(storedBefore cutoff: Int64) -> Int {
        Self.merge(memory.removeReceived(before: cutoff), disk?.removeStored(before: cutoff) ?? [:])
    }

    private static func merge(_ a: [String: Int], _ b: [String: Int]) -> Int {
        a.merging(b, uniquingKeysWith: max).values.reduce(0, +)
    }
}

/// Per-key tier lifetimes (the proxy's routes). `.some(nil)` means "never
/// expires", nil means "no override for this key".
public protocol TierLifetimes: Sendable {
    func memoryLifetime(_ key: String) -> Int??
    func diskLifetime(_ key: String) -> Int??
}
