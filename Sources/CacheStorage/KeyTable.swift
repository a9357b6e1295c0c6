#if canImport(Glibc)
import Glibc
#endif

/// The seeded hash of a cache key: the standard library's per-process
/// seeded hasher, so clients cannot choose URLs that collide. Computed once
/// per request and handed to every tier (it picks a shard, then a slot).
enum KeyHash {
    static func of(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    static func of(_ key: String) -> Int {
        var key = key
        return key.withUTF8 { of(UnsafeRawBufferPointer($0)) }
    }
}

/// What a `KeyTable` holds: one reference-sized value per key.
protocol KeyTableEntry {
    /// Calls `body` with its key's UTF-8 bytes.
    func withKeyBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T
    var key: String { get }
    /// Whether both are the same object.
    func isSame(_ other: Self) -> Bool
}

extension KeyTableEntry {
    func hasKey(_ wanted: UnsafeRawBufferPointer) -> Bool {
        withKeyBytes { bytes in
            bytes.count == wanted.count && (bytes.count == 0 || memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0)
        }
    }

    var keyHash: Int { withKeyBytes { KeyHash.of($0) } }
}

/// Open-addressing hash table (linear probing, backward-shift deletion) of
/// entries by key: 16 bytes a slot, the key's hash beside its entry, so a
/// probe reads the entry (and its key) only when the hashes agree, and
/// removal and growth never hash a key again. An empty slot costs 16 bytes,
/// not an entry's size: the memory tier's responses and the disk tier's
/// keys both live in blocks of their own.
struct KeyTable<Entry: KeyTableEntry> {
    private struct Slot {
        var hash = 0
        var entry: Entry?
    }

    private var slots = [Slot](repeating: Slot(), count: 16)
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    private func index(of key: String, hash: Int? = nil) -> Int? {
        var key = key
        return key.withUTF8 { index(ofKeyBytes: UnsafeRawBufferPointer($0), hash: hash) }
    }

    private func index(ofKeyBytes wanted: UnsafeRawBufferPointer, hash: Int? = nil) -> Int? {
        let hash = hash ?? KeyHash.of(wanted)
        var i = hash & mask
        while let entry = slots[i].entry {
            if slots[i].hash == hash, entry.hasKey(wanted) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The slot holding this very entry.
    private func index(of entry: Entry) -> Int? {
        let hash = entry.keyHash
        var i = hash & mask
        while let other = slots[i].entry {
            if slots[i].hash == hash, other.isSame(entry) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    func find(_ key: String, hash: Int? = nil) -> Entry? { index(of: key, hash: hash).flatMap { slots[$0].entry } }

    func find(keyBytes: UnsafeRawBufferPointer, hash: Int? = nil) -> Entry? {
        index(ofKeyBytes: keyBytes, hash: hash).flatMap { slots[$0].entry }
    }

    /// Adds an entry whose key is absent (`hash`: its key's, when known).
    mutating func insert(_ entry: Entry, hash: Int? = nil) {
        if (count + 1) * 4 > slots.count * 3 { grow() }
        let hash = hash ?? entry.keyHash
        assert(hash == entry.keyHash, "a key table hash that is not its key's")
        var i = hash & mask
        while slots[i].entry != nil { i = (i + 1) & mask }
        slots[i] = Slot(hash: hash, entry: entry)
        count += 1
    }

    @discardableResult
    mutating func remove(_ key: String, hash: Int? = nil) -> Entry? {
        guard let i = index(of: key, hash: hash) else { return nil }
        return remove(at: i)
    }

    /// Removes this entry (found by identity); false when it is not in the table.
    @discardableResult
    mutating func remove(_ entry: Entry) -> Bool {
        guard let i = index(of: entry) else { return false }
        remove(at: i)
        return true
    }

    @discardableResult
    private mutating func remove(at index: Int) -> Entry? {
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

    var entries: [Entry] { slots.compactMap { $0.entry } }
    var keys: [String] { slots.compactMap { $0.entry?.key } }

    /// Every entry, in no order (no array built).
    func forEach(_ body: (Entry) -> Void) {
        for slot in slots { if let entry = slot.entry { body(entry) } }
    }

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

extension CachedResponse: KeyTableEntry {
    func withKeyBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T { body(keyBytes) }
}
