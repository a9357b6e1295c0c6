import CacheSemantics

/// Single-threaded index over a memory shard's keys: each key is a
/// `SieveNode` (its variants, list links and bits); an open-addressing
/// table of unmanaged references to them finds keys, tags find their keys.
/// Which keys go when it needs room, and which entries from a slower tier
/// it takes, is its `EvictionPolicy`'s (`SieveEviction`).
struct SieveIndex: ~Copyable {
    /// Variants kept per key; beyond this the oldest not served since the
    /// last such choice goes (a second chance, as SIEVE gives keys), so a
    /// hot variant is not pushed out by requests with new values of the
    /// Vary fields.
    static let maxVariants = 32

    let limitBytes: Int
    /// Owns the nodes: each is retained once when added, and retired
    /// (`Reclamation`) when taken out (`detach`) or at the end.
    private var table = KeyTable<NodeRef>()
    /// tag → keys whose variants carry it; only tagged entries cost anything.
    private var tagged: [String: Set<String>] = [:]
    private var eviction = SieveEviction()
    private(set) var bytes = 0
    private(set) var evictions = 0
    private(set) var objectCount = 0

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    deinit {
        var nodes: [Unmanaged<SieveNode>] = []
        table.forEach { nodes.append($0.unmanaged) }
        Reclamation.retire(nodes)
    }

    var count: Int { table.count }

    /// A key's node, marked visited (nil: absent, a miss counted for
    /// admission). `hash`: `KeyHash.of(key)`, computed once by the caller.
    /// The reference is valid under the lock this is called under.
    mutating func get(_ key: String, hash: Int) -> NodeRef? {
        guard let found = table.find(key, hash: hash) else {
            eviction.missed(hash: hash)
            return nil
        }
        found.with { $0.visited = true }
        return found
    }

    /// The same for a reader without the lock (`ShardReaders`: no change is
    /// under way, and none begins while it reads): nothing of the index is
    /// written, only the node's visited bit (atomically, when clear). A
    /// miss is the caller's to record (`recordMiss`, under the lock).
    func peek(_ key: String, hash: Int) -> NodeRef? {
        guard let found = table.find(key, hash: hash) else { return nil }
        found.with { $0.visited = true }
        return found
    }

    /// A key's node, not marked (nil: absent).
    func node(forKeyBytes key: UnsafeRawBufferPointer, hash: Int) -> NodeRef? { table.find(keyBytes: key, hash: hash) }

    mutating func recordMiss(_ hash: Int) { eviction.missed(hash: hash) }

    private static func cost(_ variants: [CachedResponse]) -> Int { variants.reduce(0) { $0 + $1.costBytes } }

    /// Whether a promotion of `entry` would be taken now (what `put`
    /// decides first for one). `hash`: `KeyTable.hash` of its key.
    func wouldAdmit(_ entry: CachedResponse, hash: Int) -> Bool {
        let cost = entry.costBytes
        return cost <= limitBytes && (bytes + cost <= limitBytes || eviction.admits(hash: hash))
    }

    /// `promoted`: offered by a slower tier (admission applies; `hash`, of
    /// its key, is computed when not given).
    mutating func put(_ entry: CachedResponse, promoted: Bool = false, hash: Int? = nil) -> Bool {
        let cost = entry.costBytes
        guard cost <= limitBytes else { return false }
        let hash = hash ?? KeyHash.of(entry.keyBytes)
        if promoted && !wouldAdmit(entry, hash: hash) { return false }
        guard let found = node(forKeyBytes: entry.keyBytes, hash: hash) else {
            // A new key (every miss): no variant arrays to build.
            while bytes + cost > limitBytes, let victim = eviction.nextVictim() {
                remove(victim)
                evictions += 1
            }
            add(newest: entry, cost: cost, hash: hash)
            return true
        }
        // The key's variants, each with its served mark.
        let servedBits = found.with { $0.served }
        var variants = found.with { $0.variants }.enumerated().map { ($1, servedBits & (1 << UInt($0)) != 0) }
        let newPiece = entry.status == 206 ? entry.storedPiece : nil
        variants.removeAll { old, _ in
            guard old.varyNames == entry.varyNames else { return true }
            guard old.varyValues == entry.varyValues else { return false }
            // The same variant: replaced, but for the other pieces of a new
            // piece's representation, apart from it (bounded below).
            guard let newPiece, old.status == 206, let oldPiece = old.storedPiece else { return true }
            return !PartialContent.staysBeside(newPiece, etag: entry.etag, stored: oldPiece, etag: old.etag)
        }
        if newPiece != nil {
            let pieces = variants.indices.filter { variants[$0].0.varyValues == entry.varyValues }
            for index in pieces.prefix(max(0, pieces.count - (PartialContent.maxPiecesPerVariant - 1))).reversed() {
                variants.remove(at: index)
            }
        }
        variants.append((entry, false))
        while variants.count > Self.maxVariants {
            var marks = variants.map(\.1)
            let drop = Self.variantToDrop(&marks)
            for i in variants.indices { variants[i].1 = marks[i] }
            variants.remove(at: drop)
        }
        remove(found)
        // Evict other keys first; if this key's own variants still do not
        // fit, drop its oldest variants.
        var total = variants.reduce(0) { $0 + $1.0.costBytes }
        while bytes + total > limitBytes, let victim = eviction.nextVictim() {
            remove(victim)
            evictions += 1
        }
        while total > limitBytes, variants.count > 1 {
            total -= variants.removeFirst().0.costBytes
            evictions += 1
        }
        let marks = variants.enumerated().reduce(UInt(0)) { $0 | ($1.element.1 ? 1 << UInt($1.offset) : 0) }
        add(variants.map(\.0), cost: total, hash: hash, served: marks)
        return true
    }

    /// Of a key's variants' served marks (oldest first, the new one last),
    /// the one to drop: the oldest not served in this period. Marks are
    /// kept while new variants come (clearing those passed let a burst of
    /// new values of a varied header push out the hot variant unless it was
    /// asked for between each two); once every older variant is marked, a
    /// period ends: the marks are cleared and the oldest goes.
    static func variantToDrop(_ served: inout [Bool]) -> Int {
        if let unserved = served.indices.dropLast().first(where: { !served[$0] }) { return unserved }
        for index in served.indices { served[index] = false }
        return 0
    }

    /// Marks the variant `entry` is (or a worker's copy of it is) as served
    /// (under the shard's lock, as the choice that clears the marks).
    func markServed(_ entry: CachedResponse, hash: Int) {
        guard let found = node(forKeyBytes: entry.keyBytes, hash: hash) else { return }
        found.with { node in
            if let i = node.variantIndex(of: entry) { node.markServed(i) }
        }
    }

    var tagLinks: Int { tagged.values.reduce(0) { $0 + $1.count } }

    /// Adds a key's variants (oldest first; the key must be absent) as the
    /// newest key; returns its node. `cost`: theirs, when the caller has it.
    @discardableResult
    private mutating func add(_ variants: [CachedResponse], cost: Int? = nil, hash: Int? = nil, served: UInt = 0) -> NodeRef {
        add(newest: variants.last!, older: Array(variants.dropLast()), cost: cost ?? Self.cost(variants), hash: hash, served: served)
    }

    /// The same without a variants array (a new key: every miss).
    @discardableResult
    private mutating func add(newest entry: CachedResponse, older: [CachedResponse] = [], cost: Int, hash: Int? = nil,
                              served: UInt = 0) -> NodeRef {
        let hash = hash ?? KeyHash.of(entry.keyBytes)
        let node = NodeRef(retaining: SieveNode.make(newest: entry, older: older, hash: hash, served: served))
        table.insert(node, hash: hash)
        eviction.entered(node)
        bytes += cost
        objectCount += older.count + 1
        if !entry.tags.isEmpty || older.contains(where: { !$0.tags.isEmpty }) {
            let key = entry.key
            for variant in older + [entry] { for tag in variant.tags { tagged[tag, default: []].insert(key) } }
        }
        return node
    }

    /// Removes a key; returns how many variants it had.
    @discardableResult
    mutating func remove(_ key: String) -> Int {
        guard let found = table.remove(key) else { return 0 }
        let n = found.with { $0.variantCount }
        detach(found)
        return n
    }

    /// Takes a key (by its node, already out of the table) out of the list
    /// and the counts, and lets the node go.
    private mutating func detach(_ found: NodeRef) {
        let variants = found.with { $0.variants }
        eviction.left(found)
        found.with { $0.retire() }  // workers' copies of the key stop answering
        Reclamation.retire(found.unmanaged)  // freed once no worker may be reading it
        bytes -= Self.cost(variants)
        objectCount -= variants.count
        guard variants.contains(where: { !$0.tags.isEmpty }) else { return }
        let key = variants.last!.key
        for variant in variants {
            for tag in variant.tags {
                tagged[tag]?.remove(key)
                if tagged[tag]?.isEmpty == true { tagged[tag] = nil }
            }
        }
    }

    /// Removes a key by its node (no key string needed: eviction).
    private mutating func remove(_ found: NodeRef) {
        if table.remove(found) { detach(found) }
    }

    mutating func removeAll() {
        var nodes: [Unmanaged<SieveNode>] = []
        table.forEach { found in
            found.with { node in
                node.retire()
                node.newer = nil
                node.olderKey = nil
            }
            nodes.append(found.unmanaged)
        }
        Reclamation.retire(nodes)
        eviction.removeAll()
        table = KeyTable<NodeRef>()
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
        case .regex(let pattern): return table.keys.filter { pattern.matches(key: $0) }
        case .all: return table.keys
        }
    }

    mutating func purge(_ scope: PurgeScope, soft: Bool) -> [String: Int] {
        var touched: [String: Int] = [:]
        for key in candidates(scope) {
            guard let found = table.find(key) else { continue }
            let variants = found.with { $0.variants }
            let matching = variants.filter { scope.matches(key: key, tags: $0.tags) }
            guard !matching.isEmpty else { continue }
            touched[key] = matching.count
            if soft {
                replace(found, with: variants.map { scope.matches(key: key, tags: $0.tags) ? $0.markedStale() : $0 })
            } else {
                replace(found, with: variants.filter { !scope.matches(key: key, tags: $0.tags) })
            }
        }
        return touched
    }

    /// Removes the variants `shouldRemove` picks, per key.
    mutating func removeVariants(_ shouldRemove: (CachedResponse) -> Bool) -> [String: Int] {
        var removed: [String: Int] = [:]
        for key in table.keys {
            guard let found = table.find(key) else { continue }
            let variants = found.with { $0.variants }
            let n = variants.reduce(0) { $0 + (shouldRemove($1) ? 1 : 0) }
            guard n > 0 else { continue }
            removed[key] = n
            replace(found, with: variants.filter { !shouldRemove($0) })
        }
        return removed
    }

    /// Swaps a key's variants (none: the key goes), keeping its recency.
    private mutating func replace(_ found: NodeRef, with variants: [CachedResponse]) {
        let older = found.with { $0.olderKey }
        let hash = found.with { $0.hash }
        remove(found)
        guard !variants.isEmpty else { return }
        eviction.place(add(variants, hash: hash), after: older)
    }
}
