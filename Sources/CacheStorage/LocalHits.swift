import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One worker's copies of its recent memory-tier hits, so that a key hit
/// again and again (a hot object) takes no lock and writes nothing another
/// thread reads: each worker owns one (never shared between threads), and
/// holds private copies of the tier's entries (`CachedResponse.copied`), so
/// a hit counts references on its own copy, not on the entry every worker
/// reads. A copy answers while its key's node is still the tier's (not
/// `retired`: evicted, replaced, removed, purged or its variants changed;
/// other keys' changes do not matter) and SIEVE's visited bit is set: once
/// the hand clears it, the next hit goes through the tier, which sets it
/// again, so a key in use is spared as if every hit went there. Both bits
/// are read at the node's address, without a reference counted.
///
/// A copy costs memory beyond `memory_limit` and keeps its entry alive, so
/// only small entries are copied (at most `largestCopied` bytes each) into
/// at most `slotCount` slots: at most 4 MiB per worker.
public final class LocalHits {
    struct Slot {
        var hash = 0
        var variants = Variants()
        /// The tier's node the copies were made from (held, so that its
        /// `bits` stay), and the address of its bits, kept apart: a hit
        /// reads them there, without touching the node's reference count.
        var node: SieveNode?
        var bits: UnsafeMutablePointer<UInt>?
        /// The routes' lifetime rules (`LifetimeRules.generation`) when
        /// copied, and the key's memory lifetime by them.
        var rules: UInt = 0
        var lifetime: Int?? = nil
        /// Copies are made on a key's second hit in a row here: a working
        /// set larger than the slots would copy on nearly every lookup.
        var seen = false
    }

    static let slotCount = 128
    static let largestCopied = 16 << 10
    private var slots = [Slot](repeating: Slot(), count: LocalHits.slotCount)
    /// Lookups answered here (tests).
    private(set) var answered = 0
    /// The slot that answered the last lookup answered here.
    private var lastAnswered = -1

    /// This worker's reader slot: its lookups that miss the copies read the
    /// tier's shards without their mutex (nil: every slot is taken).
    let reader = ShardReader()

    /// What this worker's hits from the tier hold in place of their blocks
    /// this period, and the epoch it announced (0: no period under way).
    private var token = PeriodToken()
    private var announced: UInt64 = 0

    public init() {}

    deinit { endPeriod() }

    /// This period's token, the epoch announced at its first read; nil
    /// without a reader slot (hits then hold their blocks).
    /// (Unmanaged: the caller counts one reference, where a hit keeps it.)
    @inline(__always)
    func periodToken() -> Unmanaged<PeriodToken>? {
        guard let reader else { return nil }
        if announced == 0 { announced = Reclamation.announce(reader) }
        return .passUnretained(token)
    }

    /// Ends the period (a worker's loop turn): responses its hits returned
    /// and still held (a client that has not taken its bytes yet) keep the
    /// token, which lingers; the next period gets a new one.
    public func endPeriod() {
        guard announced != 0, let reader else { return }
        if !isKnownUniquelyReferenced(&token) {
            Reclamation.linger(token, epoch: announced)
            token = PeriodToken()
        }
        Reclamation.withdraw(reader)
        announced = 0
        if Reclamation.waiting.load(ordering: .relaxed) > 0 { Reclamation.collect() }
    }

    /// The copies for `key` while its entry is current and the lifetime
    /// rules are those they were made under (`rules`), with the key's
    /// memory lifetime by them; nil otherwise.
    @inline(__always)
    func find(_ key: String, hash: Int, rules: UInt) -> (variants: Variants, lifetime: Int??)? {
        let i = hash & (Self.slotCount - 1)
        guard slots[i].hash == hash, slots[i].rules == rules, let bits = slots[i].bits, SieveNode.mayAnswer(bits),
              let newest = slots[i].variants.last, Self.same(newest.keyBytes, key) else { return nil }
        answered &+= 1
        lastAnswered = i
        return (slots[i].variants, slots[i].lifetime)
    }

    /// Where `entry`'s served mark is, when it is one of the copies the
    /// last lookup answered here with (a request served one of a key's
    /// variants right after its lookup): the node's bits and the variant's
    /// index, found without hashing the key.
    func servedMark(of entry: CachedResponse) -> (bits: UnsafeMutablePointer<UInt>, index: Int)? {
        guard lastAnswered >= 0, let bits = slots[lastAnswered].bits,
              let index = slots[lastAnswered].variants.firstIndex(where: { $0.isSame(entry) }) else { return nil }
        return (bits, index)
    }

    /// Whether `keep` would copy what the tier answers for this key now:
    /// then the lookup hands it the key's node.
    @inline(__always)
    func wantsNode(hash: Int) -> Bool {
        let i = hash & (Self.slotCount - 1)
        return slots[i].hash == hash && slots[i].seen
    }

    /// Keeps copies of what the tier answered for a key (`variants`, the
    /// entries of `node`), on its second lookup in a row here. The same
    /// node again (the hand had cleared its visited bit) keeps the copies
    /// made before.
    func keep(_ variants: Variants, node: SieveNode?, hash: Int, rules: UInt, lifetime: Int??) {
        let i = hash & (Self.slotCount - 1)
        guard slots[i].hash == hash, slots[i].seen, let node else {
            slots[i] = Slot(hash: hash, seen: true)
            return
        }
        if slots[i].node === node, slots[i].rules == rules { return }
        guard variants.allSatisfy({ $0.costBytes <= Self.largestCopied }) else { return }
        slots[i] = Slot(hash: hash, variants: Variants(variants.map { $0.copied() }), node: node, bits: node.bits, rules: rules,
                        lifetime: lifetime, seen: true)
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
