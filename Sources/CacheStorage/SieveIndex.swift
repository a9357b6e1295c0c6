import CacheSemantics

/// Single-threaded index over keys with SIEVE eviction (Zhang et al., NSDI
/// 2024): keys sit in insertion order; a hit only sets the key's visited
/// bit (no list splice); the eviction hand walks from the oldest end,
/// clearing visited bits and evicting the first unvisited key. Each key is
/// represented by its newest variant, which carries the list links and the
/// key's other variants; an open-addressing table of those entries finds
/// keys. Per key that costs one table slot and three words in the entry's
/// tail. Admission: an entry offered from a slower tier that would evict
/// must be asked for more often than the key it would evict
/// (`FrequencySketch`, counted on this tier's misses), so a working set
/// larger than memory does not churn it.
struct SieveIndex: ~Copyable {
    /// Variants kept per key; beyond this the oldest not served since the
    /// last such choice goes (a second chance, as SIEVE gives keys), so a
    /// hot variant is not pushed out by requests with new values of the
    /// Vary fields.
    static let maxVariants = 32

    let limitBytes: Int
    private var table = KeyTable<CachedResponse>()
    /// tag → keys whose variants carry it; only tagged entries cost anything.
    private var tagged: [String: Set<String>] = [:]
    private var newest: CachedResponse?
    private var oldest: CachedResponse?
    /// SIEVE's hand: the next key it looks at (nil: the oldest).
    private var hand: CachedResponse?
    private var sketch = FrequencySketch()
    /// The last key admission compared against, with its hash: the hand
    /// rarely moves while promotions are declined, so the next check
    /// compares against the same key without hashing it again. Held
    /// strongly (its identity cannot be reused), let go when it leaves.
    private var lastVictim: (entry: CachedResponse, hash: Int)?
    private(set) var bytes = 0
    private(set) var evictions = 0
    private(set) var objectCount = 0

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    var count: Int { table.count }

    /// `hash`: `KeyHash.of(key)`, computed once by the caller.
    mutating func get(_ key: String, hash: Int) -> Variants {
        guard let head = table.find(key, hash: hash) else {
            sketch.record(hash)
            return Variants()
        }
        head.visited = true
        return Variants(older: head.olderVariants, newest: head)
    }

    /// The same for a reader without the lock (`ShardReaders`: no change is
    /// under way): nothing of the index is written, only the entry's
    /// visited bit (atomically, when clear). A miss is the caller's to
    /// record (`recordMiss`, under the lock).
    func peek(_ key: String, hash: Int) -> Variants {
        guard let head = table.find(key, hash: hash) else { return Variants() }
        head.visited = true
        return Variants(older: head.olderVariants, newest: head)
    }

    mutating func recordMiss(_ hash: Int) { sketch.record(hash) }

    /// The key SIEVE evicts next (the hand moves past it); nil when empty.
    private mutating func nextVictim() -> CachedResponse? {
        guard var candidate = hand ?? oldest else { return nil }
        while candidate.visited {
            candidate.visited = false
            candidate = candidate.lruNewer ?? oldest!
        }
        hand = candidate.lruNewer
        return candidate
    }

    /// Admission for an entry from a slower tier that needs room: it must be
    /// wanted more often than the key the hand would evict (looked at
    /// without moving the hand, a few keys at most). `hash`: the entry's key's.
    private mutating func admits(_ entry: CachedResponse, hash: Int) -> Bool {
        guard let oldestAddress = oldest?.address else { return true }
        // Walked by address: no reference taken per key passed.
        var candidate = hand?.address ?? oldestAddress
        for _ in 0..<8 where CachedResponse.linkWord(at: candidate) & 1 != 0 {
            candidate = CachedResponse.newer(at: candidate) ?? oldestAddress
        }
        let victimHash: Int
        if let last = lastVictim, last.entry.address == candidate {
            victimHash = last.hash
        } else {
            let victim = CachedResponse.entry(at: candidate)
            victimHash = KeyHash.of(victim.keyBytes)
            lastVictim = (victim, victimHash)
        }
        return sketch.frequency(hash) > sketch.frequency(victimHash)
    }

    private func variants(of head: CachedResponse) -> [CachedResponse] { head.olderVariants + [head] }

    private static func cost(_ variants: [CachedResponse]) -> Int { variants.reduce(0) { $0 + $1.costBytes } }

    /// Whether a promotion of `entry` would be taken now (what `put`
    /// decides first for one). `hash`: `KeyTable.hash` of its key.
    mutating func wouldAdmit(_ entry: CachedResponse, hash: Int) -> Bool {
        let cost = entry.costBytes
        return cost <= limitBytes && (bytes + cost <= limitBytes || admits(entry, hash: hash))
    }

    /// `promoted`: offered by a slower tier (admission applies; `hash`, of
    /// its key, is computed when not given).
    mutating func put(_ entry: CachedResponse, promoted: Bool = false, hash: Int? = nil) -> Bool {
        let cost = entry.costBytes
        guard cost <= limitBytes else { return false }
        let hash = hash ?? KeyHash.of(entry.keyBytes)
        if promoted && !wouldAdmit(entry, hash: hash) { return false }
        guard let head = table.find(sameKeyAs: entry, hash: hash) else {
            // A new key (every miss): no variant arrays to build.
            while bytes + cost > limitBytes, let victim = nextVictim() {
                remove(head: victim)
                evictions += 1
            }
            add(single: entry, cost: cost, hash: hash)
            return true
        }
        var variants = self.variants(of: head)
        let newPiece = entry.status == 206 ? entry.storedPiece : nil
        variants.removeAll { old in
            guard old.varyNames == entry.varyNames else { return true }
            guard old.varyValues == entry.varyValues else { return false }
            // The same variant: replaced, but for the other pieces of a new
            // piece's representation, apart from it (bounded below).
            guard let newPiece, old.status == 206, let oldPiece = old.storedPiece else { return true }
            return !PartialContent.staysBeside(newPiece, etag: entry.etag, stored: oldPiece, etag: old.etag)
        }
        if newPiece != nil {
            let pieces = variants.indices.filter { variants[$0].varyValues == entry.varyValues }
            for index in pieces.prefix(max(0, pieces.count - (PartialContent.maxPiecesPerVariant - 1))).reversed() {
                variants.remove(at: index)
            }
        }
        variants.append(entry)
        while variants.count > Self.maxVariants { variants.remove(at: Self.variantToDrop(variants)) }
        remove(head: head)
        // Evict other keys first; if this key's own variants still do not
        // fit, drop its oldest variants.
        var total = Self.cost(variants)
        while bytes + total > limitBytes, let victim = nextVictim() {
            remove(head: victim)
            evictions += 1
        }
        while total > limitBytes, variants.count > 1 {
            total -= variants.removeFirst().costBytes
            evictions += 1
        }
        add(variants, hash: hash)
        return true
    }

    /// Of a key's variants (oldest first, the new one last), the oldest
    /// not served since the last choice; those passed lose their mark. All
    /// served: the oldest.
    static func variantToDrop(_ variants: [CachedResponse]) -> Int {
        for (index, variant) in variants.dropLast().enumerated() {
            guard variant.variantServed else { return index }
            variant.variantServed = false
        }
        return 0
    }

    /// Marks `entry`, a variant of a key with several, as served (under
    /// the shard's lock, as the choice that clears the mark).
    func markServed(_ entry: CachedResponse) { (entry.original ?? entry).variantServed = true }

    var tagLinks: Int { tagged.values.reduce(0) { $0 + $1.count } }

    /// `add` for a key with one variant.
    private mutating func add(single entry: CachedResponse, cost: Int, hash: Int) {
        let entry = entry.forIndex
        table.insert(entry, hash: hash)
        pushNewest(entry)
        bytes += cost
        objectCount += 1
        let tags = entry.tags
        if !tags.isEmpty {
            let key = entry.key
            for tag in tags { tagged[tag, default: []].insert(key) }
        }
    }

    /// Adds a key's variants (oldest first; the key must be absent) as the
    /// newest key; returns its head.
    @discardableResult
    private mutating func add(_ variants: [CachedResponse], hash: Int? = nil) -> CachedResponse {
        // A head once taken out stays retired (workers' copies of its key
        // must not answer again): a key's new set gets a head of its own.
        let head = variants.last!.forIndex
        head.olderVariants = Array(variants.dropLast())
        table.insert(head, hash: hash)
        pushNewest(head)
        bytes += Self.cost(variants)
        objectCount += variants.count
        if variants.contains(where: { !$0.tags.isEmpty }) {
            let key = head.key
            for variant in variants { for tag in variant.tags { tagged[tag, default: []].insert(key) } }
        }
        return head
    }

    /// Removes a key; returns how many variants it had.
    @discardableResult
    mutating func remove(_ key: String) -> Int {
        guard let head = table.remove(key) else { return 0 }
        let n = head.olderVariants.count + 1
        detach(head)
        return n
    }

    /// Takes a key (by its head, already out of the table) out of the list and the counts.
    private mutating func detach(_ head: CachedResponse) {
        if let last = lastVictim, last.entry.isSame(head) { lastVictim = nil }
        let variants = variants(of: head)
        unlink(head)
        head.retired = true  // workers' copies of the key stop answering
        head.olderVariants = []
        bytes -= Self.cost(variants)
        objectCount -= variants.count
        guard variants.contains(where: { !$0.tags.isEmpty }) else { return }
        let key = head.key
        for variant in variants {
            for tag in variant.tags {
                tagged[tag]?.remove(key)
                if tagged[tag]?.isEmpty == true { tagged[tag] = nil }
            }
        }
    }

    /// Removes a key by its head (no key string needed: eviction).
    private mutating func remove(head: CachedResponse) {
        if table.remove(head) { detach(head) }
    }

    mutating func removeAll() {
        // Links are unowned: clear them so no entry still held by a client
        // points at freed ones.
        while let head = oldest {
            oldest = head.lruNewer
            head.lruNewer = nil
            head.lruOlder = nil
            head.visited = false
            head.retired = true
            head.olderVariants = []
        }
        newest = nil
        hand = nil
        lastVictim = nil
        table = KeyTable<CachedResponse>()
        tagged.removeAll()
        bytes = 0
        objectCount = 0
    }

    /// The keys `scope` may match (prefix and all look at every key; a tag
    /// at its own keys only).
    private func candidates(_ scope: PurgeScope) -> [String] {
        switch scope {
        case .key(let key): return table.find(key) == nil ? [] : [key]
        case .tag(let tag): return tagged[tag].map(Array.init) ?? []
        case .prefix(let prefix): return table.keys.filter { $0.hasPrefix(prefix) }
        case .all: return table.keys
        }
    }

    mutating func purge(_ scope: PurgeScope, soft: Bool) -> [String: Int] {
        var touched: [String: Int] = [:]
        for key in candidates(scope) {
            guard let head = table.find(key) else { continue }
            let variants = variants(of: head)
            let matching = variants.filter { scope.matches(key: key, tags: $0.tags) }
            guard !matching.isEmpty else { continue }
            touched[key] = matching.count
            if soft {
                replace(head, with: variants.map { scope.matches(key: key, tags: $0.tags) ? $0.markedStale() : $0 })
            } else {
                replace(head, with: variants.filter { !scope.matches(key: key, tags: $0.tags) })
            }
        }
        return touched
    }

    /// Removes the variants `shouldRemove` picks, per key.
    mutating func removeVariants(_ shouldRemove: (CachedResponse) -> Bool) -> [String: Int] {
        var removed: [String: Int] = [:]
        for key in table.keys {
            guard let head = table.find(key) else { continue }
            let variants = variants(of: head)
            let n = variants.reduce(0) { $0 + (shouldRemove($1) ? 1 : 0) }
            guard n > 0 else { continue }
            removed[key] = n
            replace(head, with: variants.filter { !shouldRemove($0) })
        }
        return removed
    }

    /// Swaps a key's variants (none: the key goes), keeping its recency.
    private mutating func replace(_ head: CachedResponse, with variants: [CachedResponse]) {
        let older = head.lruOlder
        remove(head: head)
        guard !variants.isEmpty else { return }
        let new = add(variants)
        // Back to where it was in the LRU order, not the newest end.
        unlink(new)
        if let older {
            new.lruOlder = older
            new.lruNewer = older.lruNewer
            if let n = older.lruNewer { n.lruOlder = new } else { newest = new }
            older.lruNewer = new
        } else {
            new.lruNewer = oldest
            if let o = oldest { o.lruOlder = new } else { newest = new }
            oldest = new
        }
    }

    private mutating func unlink(_ head: CachedResponse) {
        let newer = head.lruNewer, older = head.lruOlder
        if hand?.isSame(head) == true { hand = newer }
        if let newer { newer.lruOlder = older } else if newest?.isSame(head) == true { newest = older }
        if let older { older.lruNewer = newer } else if oldest?.isSame(head) == true { oldest = newer }
        head.lruNewer = nil
        head.lruOlder = nil
        head.visited = false
    }

    private mutating func pushNewest(_ head: CachedResponse) {
        head.lruOlder = newest
        head.lruNewer = nil
        if let n = newest { n.lruNewer = head } else { oldest = head }
        newest = head
    }
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
