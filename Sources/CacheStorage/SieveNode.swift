import CEventLoop

/// A key in the memory tier's index (`SieveIndex`): its variants, its place
/// in SIEVE's list and its bits. The tier's bookkeeping lives here, not in
/// the responses, which are immutable and the same in every tier.
///
/// A key's set of variants gets a new node whenever it changes; a node taken
/// out of the index is `retired` for good, which is how a worker's copies
/// of the key (`LocalHits`, holding the node) learn to stop answering.
///
/// The index owns its nodes through unmanaged references (`NodeRef`), so
/// that a hit read without the shard's lock counts no reference on a node
/// that every worker reads; the two bit words sit in the tail, at an address
/// that stays put, for workers' copies to read without a reference either.
final class SieveNode: ManagedBuffer<SieveNode.Fields, UInt> {
    struct Fields {
        /// The newest variant (the table compares its key bytes) and the
        /// others, oldest first (let go when the node is retired: a
        /// worker's copies may hold the node a while longer).
        let newest: CachedResponse
        var older: [CachedResponse]
        /// `KeyHash.of` the key: admission compares the hand's key's
        /// frequency without hashing it again.
        let hash: Int
        /// Neighbours in the list (changed under the shard's lock).
        var newer: Unmanaged<SieveNode>?
        var olderKey: Unmanaged<SieveNode>?
    }

    static func make(newest: CachedResponse, older: [CachedResponse], hash: Int, served: UInt = 0) -> SieveNode {
        // The index keeps them: they hold their blocks, not a worker's period token.
        let older = older.allSatisfy(\.isOwned) ? older : older.map { $0.owned() }
        let fields = Fields(newest: newest.owned(), older: older, hash: hash)
        let node = unsafeDowncast(create(minimumCapacity: 2) { _ in fields }, to: SieveNode.self)
        node.withUnsafeMutablePointerToElements { words in
            words.initialize(to: 0)
            (words + 1).initialize(to: served)
        }
        return node
    }

    /// Visited (1) and retired (2), read and set atomically: a hit without
    /// the shard's lock sets visited while the lock's holder may change
    /// the other bit.
    var bits: UnsafeMutablePointer<UInt> { withUnsafeMutablePointerToElements { $0 } }

    var newest: CachedResponse { header.newest }
    var older: [CachedResponse] { header.older }
    var variantCount: Int { header.older.count + 1 }
    var variants: [CachedResponse] { header.older + [header.newest] }
    var hash: Int { header.hash }

    /// Neighbours in the list (changed under the shard's lock).
    var newer: NodeRef? {
        get { header.newer.map(NodeRef.init) }
        set { header.newer = newValue?.unmanaged }
    }

    var olderKey: NodeRef? {
        get { header.olderKey.map(NodeRef.init) }
        set { header.olderKey = newValue?.unmanaged }
    }

    /// Hit since the eviction hand last passed (SIEVE): set by a hit,
    /// cleared by the hand, which spares the key once.
    var visited: Bool {
        get { el_load_word(bits) & 1 != 0 }
        set { setBit(1, newValue) }
    }

    /// Marks the node taken out of the index (evicted, replaced, removed,
    /// purged, its variants changed: bit 2, set once, never cleared) and
    /// lets its older variants go (under the shard's lock, with no reader
    /// inside).
    func retire() {
        setBit(2, true)
        header.older = []
    }

    /// Whether a worker's copy of this key may answer: still the index's,
    /// and used since the hand last passed (else the hit goes through the
    /// tier, which marks it). Read at a node's `bits` address.
    static func mayAnswer(_ bits: UnsafeMutablePointer<UInt>) -> Bool { el_load_word(bits) & 3 == 1 }

    /// Whether variant `index` is marked served, read at a node's `bits`
    /// address: false for a retired node (the key's marks are on its new
    /// node, which the caller looks up).
    static func isServed(_ bits: UnsafeMutablePointer<UInt>, index: Int) -> Bool {
        el_load_word(bits) & 2 == 0 && el_load_word(bits + 1) & (1 << UInt(index)) != 0
    }

    /// Writes only on a change, as one atomic step.
    private func setBit(_ bit: UInt, _ on: Bool) {
        guard (el_load_word(bits) & bit != 0) != on else { return }
        if on { el_or_word(bits, bit) } else { el_and_word(bits, ~bit) }
    }

    /// Bit i: variant i (oldest first) served since the index last chose
    /// which of the key's variants to drop (`SieveIndex.maxVariants`).
    var served: UInt { el_load_word(bits + 1) }

    func markServed(_ i: Int) {
        guard served & (1 << UInt(i)) == 0 else { return }
        el_or_word(bits + 1, 1 << UInt(i))
    }

    /// The index of the variant `entry` is (or a worker's copy of it is).
    func variantIndex(of entry: CachedResponse) -> Int? {
        if entry.isSame(header.newest) { return header.older.count }
        if let i = header.older.firstIndex(where: { $0.isSame(entry) }) { return i }
        if entry.isCopy(of: header.newest) { return header.older.count }
        return header.older.firstIndex { $0.isCopy(of: entry) }
    }
}

/// The index's reference to a node: unmanaged, so tables and lists of them
/// count no references (the index retains each node once, when it adds it,
/// and releases it when it takes it out). It carries the node's newest
/// response too, so that a probe compares the key without first loading
/// the node (both are fetched at once).
struct NodeRef: KeyTableEntry {
    let unmanaged: Unmanaged<SieveNode>
    private let newest: Unmanaged<CachedResponse.Storage>

    /// A new node, retained by the index.
    init(retaining node: SieveNode) {
        unmanaged = .passRetained(node)
        newest = node.header.newest.block
    }

    /// A node the index holds.
    init(_ unmanaged: Unmanaged<SieveNode>) {
        self.unmanaged = unmanaged
        newest = unmanaged._withUnsafeGuaranteedRef { $0.header.newest.block }
    }

    /// The node, borrowed: valid while the index holds it (under the
    /// shard's lock, or as a `ShardReaders` reader).
    @inline(__always)
    func with<T>(_ body: (SieveNode) -> T) -> T { unmanaged._withUnsafeGuaranteedRef(body) }

    /// The node, retained for the caller.
    var node: SieveNode { unmanaged.takeUnretainedValue() }

    /// The newest variant for a worker's hit: its block borrowed, kept by
    /// `token` (the index holds the node; `Reclamation` frees it only once
    /// the period is over).
    @inline(__always)
    func newest(heldBy token: Unmanaged<PeriodToken>) -> CachedResponse {
        CachedResponse(borrowing: newest, token: token)
    }

    @inline(__always)
    func withKeyBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        newest._withUnsafeGuaranteedRef { body(CachedResponse.keyBytes(of: $0)) }
    }

    var key: String { with { $0.header.newest.key } }
    func isSame(_ other: NodeRef) -> Bool { unmanaged.toOpaque() == other.unmanaged.toOpaque() }
}
