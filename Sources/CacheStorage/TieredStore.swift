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
    private let rules = Mutex<(any TierLifetimes)?>(nil)
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

    public func lookup(_ key: String) -> [CachedResponse] {
        var inMemory = memory.lookup(key)
        let override = hasRules.load(ordering: .acquiring) ? rules.withLock({ $0 })?.memoryLifetime(key) : nil
        if let lifetime = override ?? memoryLifetimeSeconds, !inMemory.isEmpty {
            let now = Int64(Date().timeIntervalSince1970)
            if inMemory.contains(where: { now - $0.timing.responseTime > Int64(lifetime) }) {
                // Past memory_ttl: out of memory; the disk tier may still hold it.
                memory.remove(key)
                inMemory = []
            }
        }
        guard inMemory.isEmpty, let disk else { return inMemory }
        let entries = disk.lookup(key).map(rehydrate)
        for entry in entries { memory.insert(entry) }
        return entries
    }

    /// Stores in memory (when it fits) and queues the disk write. Returns
    /// whether any tier took it.
    /// `toDisk: false` keeps the entry in memory only (a route with disk = false).
    @discardableResult
    public func insert(_ entry: CachedResponse, toDisk: Bool = true) -> Bool {
        let inMemory = memory.insert(entry)
        guard let disk, toDisk else { return inMemory }
        // A response whose body is already a disk file keeps that file; only
        // in-memory bodies are written.
        guard let record = DiskRecord(entry, storedAt: Int64(Date().timeIntervalSince1970)) else { return inMemory }
        disk.store(record)
        return true
    }

    @discardableResult
    public func remove(_ key: String) -> Bool {
        let inMemory = memory.remove(key)
        let onDisk = disk?.remove(key) ?? 0
        return inMemory || onDisk > 0
    }
}

/// Per-key tier lifetimes (the proxy's routes). `.some(nil)` means "never
/// expires", nil means "no override for this key".
public protocol TierLifetimes: Sendable {
    func memoryLifetime(_ key: String) -> Int??
    func diskLifetime(_ key: String) -> Int??
}
