#if canImport(Glibc)
import Glibc
#endif

/// Open-addressing hash table (linear probing, backward-shift deletion) of
/// entries by key: 16 bytes a slot, the key's hash beside its entry, so a
/// probe reads the entry (and its key, at the far end of its block) only
/// when the hashes agree, and removal and growth never hash a key again.
/// Keys hash with the standard library's per-process seeded hasher, so
/// clients cannot choose URLs that collide.
struct KeyTable {
    private struct Slot {
        var hash = 0
        var entry: CachedResponse?
    }

    private var slots = [Slot](repeating: Slot(), count: 16)
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    /// The hash of a key (the memory tier picks a shard by its high bits).
    static func hash(_ key: String) -> Int {
        var key = key
        return key.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    private func index(of key: String, hash: Int? = nil) -> Int? {
        var key = key
        return key.withUTF8 { index(ofKeyBytes: UnsafeRawBufferPointer($0), hash: hash) }
    }

    private func index(ofKeyBytes wanted: UnsafeRawBufferPointer, hash: Int? = nil) -> Int? {
        let hash = hash ?? Self.hash(wanted)
        var i = hash & mask
        while let entry = slots[i].entry {
            if slots[i].hash == hash {
                let bytes = entry.keyBytes
                if bytes.count == wanted.count, bytes.count == 0 || memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0 {
                    return i
                }
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The entry stored under the same key as `entry` (no key string built).
    /// `hash`: its key's, when the caller has it.
    func find(sameKeyAs entry: CachedResponse, hash: Int? = nil) -> CachedResponse? {
        index(ofKeyBytes: entry.keyBytes, hash: hash).flatMap { slots[$0].entry }
    }

    /// The slot holding this very entry.
    private func index(of entry: CachedResponse) -> Int? {
        let hash = Self.hash(entry.keyBytes)
        var i = hash & mask
        while let other = slots[i].entry {
            if slots[i].hash == hash, other.isSame(entry) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    func find(_ key: String, hash: Int? = nil) -> CachedResponse? { index(of: key, hash: hash).flatMap { slots[$0].entry } }

    /// Adds an entry whose key is absent (`hash`: its key's, when known).
    mutating func insert(_ entry: CachedResponse, hash: Int? = nil) {
        if (count + 1) * 4 > slots.count * 3 { grow() }
        let hash = hash ?? Self.hash(entry.keyBytes)
        assert(hash == Self.hash(entry.keyBytes), "a key table hash that is not its key's")
        var i = hash & mask
        while slots[i].entry != nil { i = (i + 1) & mask }
        slots[i] = Slot(hash: hash, entry: entry)
        count += 1
    }

    mutating func remove(_ key: String) -> CachedResponse? {
        guard let i = index(of: key) else { return nil }
        return remove(at: i)
    }

    /// Removes this entry (found by identity); false when it is not in the table.
    @discardableResult
    mutating func remove(_ entry: CachedResponse) -> Bool {
        guard let i = index(of: entry) else { return false }
        remove(at: i)
        return true
    }

    @discardableResult
    private mutating func remove(at index: Int) -> CachedResponse? {
        var hole = index
        let removed = slots[hole].entry
        slots[hole] = Slot()
        count -= 1
        // Move later entries of the run back over the hole when their home
        // allows, so probes never stop early at a gap.
        var i = (hole + 1) & mask
        while slots[i].entry != nil {
            let h = slots[i].hash & mask
            // The entry may move to `hole` unless its home lies cyclically in (hole, i].
            let stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i)
            if !stays {
                slots[hole] = slots[i]
                slots[i] = Slot()
                hole = i
            }
            i = (i + 1) & mask
        }
        return removed
    }

    var entries: [CachedResponse] { slots.compactMap { $0.entry } }
    var keys: [String] { slots.compactMap { $0.entry?.key } }

    private mutating func grow() {
        let old = slots
        slots = [Slot](repeating: Slot(), count: old.count * 2)
        for slot in old where slot.entry != nil {
            var i = slot.hash & mask
            while slots[i].entry != nil { i = (i + 1) & mask }
            slots[i] = slot
        }
    }
}
