import Foundation

/// Memory in front of disk, behind one interface: a lookup checks memory,
/// then disk (promoting what it finds); a store goes to memory and, in the
/// background, to disk; a removal clears both.
public final class TieredStore: @unchecked Sendable {
    public let memory: MemoryTier
    public let disk: DiskTier?
    /// Rebuilds a stored response from a disk record (the proxy knows how).
    private let rehydrate: @Sendable (DiskRecord) -> CachedResponse

    public init(memory: MemoryTier, disk: DiskTier?, rehydrate: @escaping @Sendable (DiskRecord) -> CachedResponse) {
        self.memory = memory
        self.disk = disk
        self.rehydrate = rehydrate
    }

    public func lookup(_ key: String) -> [CachedResponse] {
        let inMemory = memory.lookup(key)
        guard inMemory.isEmpty, let disk else { return inMemory }
        let entries = disk.lookup(key).map(rehydrate)
        for entry in entries { memory.insert(entry) }
        return entries
    }

    /// Stores in memory (when it fits) and queues the disk write. Returns
    /// whether any tier took it.
    @discardableResult
    public func insert(_ entry: CachedResponse) -> Bool {
        let inMemory = memory.insert(entry)
        guard let disk else { return inMemory }
        disk.store(DiskRecord(entry, storedAt: Int64(Date().timeIntervalSince1970)))
        return true
    }

    @discardableResult
    public func remove(_ key: String) -> Bool {
        let inMemory = memory.remove(key)
        let onDisk = disk?.remove(key) ?? 0
        return inMemory || onDisk > 0
    }
}
