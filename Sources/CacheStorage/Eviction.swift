/// Which of a tier's entries go when it needs room, kept apart from how
/// the tier stores them (its key table, its files): the tier tells the
/// policy what enters, what leaves and what it missed, and asks it, one
/// at a time, what goes next and whether an entry offered by a slower
/// tier is worth what it would push out. The memory tier's policy is
/// `SieveEviction`, the disk tier's `RecencyEviction`.
protocol EvictionPolicy {
    associatedtype Victim
    /// An entry stored, as the newest.
    mutating func entered(_ victim: Victim)
    /// An entry taken out (evicted, replaced, removed, purged).
    mutating func left(_ victim: Victim)
    /// A lookup found nothing for the key of `hash`.
    mutating func missed(hash: Int)
    /// What goes next; nil when nothing is left to evict.
    mutating func nextVictim() -> Victim?
    /// Whether an entry of the key of `hash`, offered by a slower tier, is
    /// wanted more than what it would evict.
    func admits(hash: Int) -> Bool
}

/// SIEVE (Zhang et al., NSDI 2024) over a memory tier's keys: keys sit in
/// insertion order; a hit only sets the key's visited bit (no list
/// splice, no lock: `SieveNode.visited`); the hand walks from the oldest
/// end, clearing visited bits, and evicts the first unvisited key.
/// Admission: an entry from a slower tier must be asked for more often
/// than the key the hand would evict (`FrequencySketch`, counted on
/// misses), so a working set larger than memory does not churn it.
struct SieveEviction: EvictionPolicy {
    private(set) var newest: NodeRef?
    private(set) var oldest: NodeRef?
    /// The next key the hand looks at (nil: the oldest).
    private var hand: NodeRef?
    private var sketch = FrequencySketch()

    mutating func entered(_ found: NodeRef) {
        let previous = newest
        found.with { node in
            node.olderKey = previous
            node.newer = nil
        }
        if let previous { previous.with { $0.newer = found } } else { oldest = found }
        newest = found
    }

    mutating func left(_ found: NodeRef) {
        let (newer, older) = found.with { ($0.newer, $0.olderKey) }
        if hand?.isSame(found) == true { hand = newer }
        if let newer { newer.with { $0.olderKey = older } } else if newest?.isSame(found) == true { newest = older }
        if let older { older.with { $0.newer = newer } } else if oldest?.isSame(found) == true { oldest = newer }
        found.with { node in
            node.newer = nil
            node.olderKey = nil
            node.visited = false
        }
    }

    /// A key that replaced another (`older`: the key that was just older
    /// than it) goes back to its place in the order, not the newest end.
    mutating func place(_ found: NodeRef, after older: NodeRef?) {
        left(found)
        let newer = older.map { o in o.with { $0.newer } } ?? oldest
        found.with { node in
            node.olderKey = older
            node.newer = newer
        }
        if let newer { newer.with { $0.olderKey = found } } else { newest = found }
        if let older { older.with { $0.newer = found } } else { oldest = found }
    }

    mutating func missed(hash: Int) { sketch.record(hash) }

    mutating func nextVictim() -> NodeRef? {
        guard var candidate = hand ?? oldest else { return nil }
        while candidate.with({ $0.visited }) {
            candidate.with { $0.visited = false }
            candidate = candidate.with { $0.newer } ?? oldest!
        }
        hand = candidate.with { $0.newer }
        return candidate
    }

    /// Looks at the key the hand would evict without moving the hand (a
    /// few keys at most).
    func admits(hash: Int) -> Bool {
        guard let oldest else { return true }
        var candidate = hand ?? oldest
        for _ in 0..<8 where candidate.with({ $0.visited }) {
            candidate = candidate.with { $0.newer } ?? oldest
        }
        return sketch.frequency(hash) > sketch.frequency(candidate.with { $0.hash })
    }

    /// Every key gone at once (the tier cleared).
    mutating func removeAll() {
        newest = nil
        oldest = nil
        hand = nil
    }
}

/// Approximate LRU over a disk tier's files: the order is taken when an
/// eviction round begins (least recently used first, then oldest stored),
/// so storing and hitting cost the policy nothing; a round walks it.
/// Every file is admitted (the disk takes what memory would not).
struct RecencyEviction: EvictionPolicy {
    struct File: Equatable {
        let key: String
        let name: FileName
        /// When it was last stored or served (the index's count), and
        /// stored (wall seconds).
        let lastUse: UInt64
        let storedAt: Int64
    }

    private var order: [File]
    private var next = 0

    /// A round over `files`.
    init(_ files: [File]) {
        order = files.sorted { ($0.lastUse, $0.storedAt) < ($1.lastUse, $1.storedAt) }
    }

    mutating func entered(_ victim: File) {}  // (the next round sees it)
    mutating func left(_ victim: File) {}  // (taken by this round, or seen gone by the next)
    mutating func missed(hash: Int) {}

    mutating func nextVictim() -> File? {
        guard next < order.count else { return nil }
        next += 1
        return order[next - 1]
    }

    func admits(hash: Int) -> Bool { true }
}

/// How often keys were asked for, approximately (a count-min sketch of four
/// rows of 8-bit counters, saturating at 15, halved every 40,960 records
/// so that old popularity fades: TinyLFU's reset). Fixed size, no
/// allocation per record.
struct FrequencySketch {
    private static let width = 4096
    private var counters = [UInt8](repeating: 0, count: 4 * width)
    private var records = 0

    /// A key's counter in each row (a multiplicative hash per row; the top
    /// 12 bits index the row's 4,096 counters).
    @inline(__always)
    private static func slots(_ hash: Int) -> (Int, Int, Int, Int) {
        let h = UInt64(bitPattern: Int64(hash))
        return (Int(truncatingIfNeeded: (h &* 0x9E37_79B9_7F4A_7C15) >> 52),
                width + Int(truncatingIfNeeded: (h &* 0xC2B2_AE3D_27D4_EB4F) >> 52),
                2 * width + Int(truncatingIfNeeded: (h &* 0x1656_67B1_9E37_79F9) >> 52),
                3 * width + Int(truncatingIfNeeded: (h &* 0x85EB_CA77_C2B2_AE63) >> 52))
    }

    mutating func record(_ hash: Int) {
        let s = Self.slots(hash)
        counters.withUnsafeMutableBufferPointer { c in
            func bump(_ i: Int) { if c[i] < 15 { c[i] += 1 } }
            bump(s.0)
            bump(s.1)
            bump(s.2)
            bump(s.3)
        }
        records += 1
        if records >= 10 * Self.width {
            records = 0
            for i in counters.indices { counters[i] >>= 1 }
        }
    }

    func frequency(_ hash: Int) -> Int {
        let s = Self.slots(hash)
        return counters.withUnsafeBufferPointer { c in Int(min(min(c[s.0], c[s.1]), min(c[s.2], c[s.3]))) }
    }
}
