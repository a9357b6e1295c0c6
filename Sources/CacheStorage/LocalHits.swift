import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One worker's copy of its recent memory-tier hits, so a key hit again
/// and again (a hot object) takes no lock: each worker owns one (never
/// shared between threads), and an entry here is used only while its
/// shard's version is what it was when the entry was copied, i.e. while
/// nothing in that shard has been stored, removed, purged or evicted since.
/// SIEVE stays right: its hand clears visited bits only while storing (a
/// change), so the first hit after that goes through the shard again and
/// sets the bit of a key still in use.
///
/// A copy keeps its entry alive after the tier let go of it, so only small
/// entries are copied (at most `largestCopied` bytes each) into at most
/// `slotCount` slots: at most 2 MiB per worker beyond `memory_limit`.
public final class LocalHits {
    struct Slot {
        var hash = 0
        var variants = Variants()
        var version: UInt64 = 0
    }

    static let slotCount = 128
    static let largestCopied = 16 << 10
    private var slots = [Slot](repeating: Slot(), count: LocalHits.slotCount)

    public init() {}

    /// The variants copied for `key` while `version` is current, if any.
    @inline(__always)
    func find(_ key: String, hash: Int, version: UInt64) -> Variants? {
        let i = hash & (Self.slotCount - 1)
        guard slots[i].hash == hash, slots[i].version == version,
              let newest = slots[i].variants.last, Self.same(newest.keyBytes, key) else { return nil }
        return slots[i].variants
    }

    func keep(_ variants: Variants, hash: Int, version: UInt64) {
        guard variants.allSatisfy({ $0.costBytes <= Self.largestCopied }) else { return }
        slots[hash & (Self.slotCount - 1)] = Slot(hash: hash, variants: variants, version: version)
    }

    /// Slots holding a copy (tests).
    var copies: Int { slots.reduce(0) { $0 + ($1.variants.isEmpty ? 0 : 1) } }

    /// Drops every copy (tests; a worker never needs to).
    public func removeAll() {
        for i in slots.indices { slots[i] = Slot() }
    }

    private static func same(_ bytes: UnsafeRawBufferPointer, _ key: String) -> Bool {
        var key = key
        return key.withUTF8 { utf8 in
            utf8.count == bytes.count && (utf8.count == 0 || memcmp(utf8.baseAddress!, bytes.baseAddress!, utf8.count) == 0)
        }
    }
}
