#if canImport(Glibc)
import Glibc
#endif

/// Open-addressing hash table (linear probing, backward-shift deletion) of
/// entries by key: 8 bytes a slot, the key read from the entry's own block.
/// Keys hash with the standard library's per-process seeded hasher, so
/// clients cannot choose URLs that collide.
struct KeyTable {
    private var slots: [CachedResponse?] = Array(repeating: nil, count: 16)
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    private func home(_ entry: CachedResponse) -> Int { Self.hash(entry.keyBytes) & mask }

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
        var i = (hash ?? Self.hash(wanted)) & mask
        while let entry = slots[i] {
            let bytes = entry.keyBytes
            if bytes.count == wanted.count, bytes.count == 0 || memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0 {
                return i
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The entry stored under the same key as `entry` (no key string built).
    func find(sameKeyAs entry: CachedResponse) -> CachedResponse? { index(ofKeyBytes: entry.keyBytes).flatMap { slots[$0] } }

    /// The slot holding this very entry.
    private func index(of entry: CachedResponse) -> Int? {
        var i = home(entry)
        while let other = slots[i] {
            if other.isSame(entry) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    func find(_ key: String, hash: Int? = nil) -> CachedResponse? { index(of: key, hash: hash).flatMap { slots[$0] } }

    /// Adds an entry whose key is absent.
    mutating func insert(_ entry: CachedResponse) {
        if (count + 1) * 4 > slots.count * 3 { grow() }
        var i = home(entry)
        while slots[i] != nil { i = (i + 1) & mask }
        slots[i] = entry
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
        let removed = slots[hole]
        slots[hole] = nil
        count -= 1
        // Move later entries of the run back over the hole when their home
        // allows, so probes never stop early at a gap.
        var i = (hole + 1) & mask
        while let entry = slots[i] {
            let h = home(entry)
            // `entry` may move to `hole` unless its home lies cyclically in (hole, i].
            let stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i)
            if !stays {
                slots[hole] = entry
                slots[i] = nil
                hole = i
            }
            i = (i + 1) & mask
        }
        return removed
    }

    var entries: [CachedResponse] { slots.compactMap { $0 } }
    var keys: [String] { slots.compactMap { $0?.key } }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: old.count * 2)
        for case let entry? in old {
            var i = home(entry)
            while slots[i] != nil { i = (i + 1) & mask }
            slots[i] = entry
        }
    }
}
