import Synchronization

/// The memory tier: an LRU bounded in bytes, shared by every worker thread
/// behind one mutex. Work under the lock is a hash lookup and a few pointer
/// moves; entries are immutable, so readers use them after unlocking.
public final class MemoryTier: Sendable {
    private let state: Locked<LRUIndex>
    public let limitBytes: Int

    public init(limitBytes: Int) {
        self.limitBytes = limitBytes
        state = Locked(LRUIndex(limitBytes: limitBytes))
    }

    /// The stored variants for `key` (one per distinct set of values of the
    /// request fields its Vary names), marked most recently used.
    public func lookup(_ key: String) -> [CachedResponse] {
        state.withLock { $0.get(key) }
    }

    /// Stores `entry` beside the other variants of its key: it replaces the
    /// variant with the same Vary values, and every variant selected by a
    /// different set of Vary fields (the upstream changed its Vary). Then
    /// evicts least recently used keys until the total fits. Returns false
    /// when the entry alone exceeds the limit.
    @discardableResult
    public func insert(_ entry: CachedResponse) -> Bool {
        state.withLock { $0.put(entry) }
    }

    @discardableResult
    public func remove(_ key: String) -> Bool {
        state.withLock { $0.remove(key) }
    }

    /// Removes (or, `soft`, marks stale) what `scope` matches. Returns the
    /// number of stored responses (variants) per key it touched.
    public func purge(_ scope: PurgeScope, soft: Bool) -> [String: Int] {
        state.withLock { $0.purge(scope, soft: soft) }
    }

    /// Empties the tier; returns the number of stored responses dropped.
    public func removeAll() -> Int {
        state.withLock { index in
            let n = index.objectCount
            index.removeAll()
            return n
        }
    }

    /// Removes responses received before `cutoff` (wall seconds); returns
    /// how many per key.
    public func removeReceived(before cutoff: Int64) -> [String: Int] {
        state.withLock { $0.removeVariants { $0.timing.responseTime < cutoff } }
    }

    /// Tag-to-key links held (for tests: evicted entries leave none behind).
    var tagIndexSize: Int { state.withLock { $0.tagLinks } }

    /// Objects are stored responses (variants), not keys.
    public var stats: (objects: Int, bytes: Int, evictions: Int) {
        state.withLock { ($0.objectCount, $0.bytes, $0.evictions) }
    }
}

/// Single-threaded LRU index: a dictionary into an intrusive doubly linked
/// list of nodes, most recent at the head.
struct LRUIndex: ~Copyable {
    final class Node {
        let key: String
        var variants: [CachedResponse]
        var cost: Int
        var newer: Node?
        unowned(unsafe) var older: Node?
        init(_ key: String, _ variants: [CachedResponse]) {
            self.key = key
            self.variants = variants
            cost = variants.reduce(0) { $0 + $1.costBytes }
        }
    }

    /// Variants kept per key; the oldest goes beyond this.
    static let maxVariants = 32

    let limitBytes: Int
    private var nodes: [String: Node] = [:]
    /// tag → keys whose variants carry it; only tagged entries cost anything.
    private var tagged: [String: Set<String>] = [:]
    private var newest: Node?
    private var oldest: Node?
    private(set) var bytes = 0
    private(set) var evictions = 0

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    var count: Int { nodes.count }
    private(set) var objectCount = 0

    mutating func get(_ key: String) -> [CachedResponse] {
        guard let node = nodes[key] else { return [] }
        unlink(node)
        pushNewest(node)
        return node.variants
    }

    mutating func put(_ entry: CachedResponse) -> Bool {
        guard entry.costBytes <= limitBytes else { return false }
        var variants = nodes[entry.key]?.variants ?? []
        variants.removeAll { $0.varyNames != entry.varyNames || $0.varyValues == entry.varyValues }
        variants.append(entry)
        if variants.count > Self.maxVariants { variants.removeFirst(variants.count - Self.maxVariants) }
        remove(entry.key)
        let node = Node(entry.key, variants)
        // Evict other keys first; if this key's own variants still do not
        // fit, drop its oldest variants.
        while bytes + node.cost > limitBytes, let victim = oldest {
            remove(victim.key)
            evictions += 1
        }
        while node.cost > limitBytes, node.variants.count > 1 {
            node.cost -= node.variants.removeFirst().costBytes
            evictions += 1
        }
        add(node)
        return true
    }

    var tagLinks: Int { tagged.values.reduce(0) { $0 + $1.count } }

    private mutating func add(_ node: Node) {
        nodes[node.key] = node
        pushNewest(node)
        bytes += node.cost
        objectCount += node.variants.count
        for variant in node.variants { for tag in variant.tags { tagged[tag, default: []].insert(node.key) } }
    }

    @discardableResult
    mutating func remove(_ key: String) -> Bool {
        guard let node = nodes.removeValue(forKey: key) else { return false }
        unlink(node)
        bytes -= node.cost
        objectCount -= node.variants.count
        for variant in node.variants {
            for tag in variant.tags {
                tagged[tag]?.remove(key)
                if tagged[tag]?.isEmpty == true { tagged[tag] = nil }
            }
        }
        return true
    }

    mutating func removeAll() {
        nodes.removeAll()
        tagged.removeAll()
        // Unlink from the oldest end: `newer` links are strong, so dropping
        // one long chain at once would recurse deeply in deinit.
        while let node = oldest {
            oldest = node.newer
            node.newer = nil
            node.older = nil
        }
        newest = nil
        bytes = 0
        objectCount = 0
    }

    /// The keys `scope` may match (prefix and all look at every key; a tag
    /// at its own keys only).
    private func candidates(_ scope: PurgeScope) -> [String] {
        switch scope {
        case .key(let key): return nodes[key] == nil ? [] : [key]
        case .tag(let tag): return tagged[tag].map(Array.init) ?? []
        case .prefix(let prefix): return nodes.keys.filter { $0.hasPrefix(prefix) }
        case .all: return Array(nodes.keys)
        }
    }

    mutating func purge(_ scope: PurgeScope, soft: Bool) -> [String: Int] {
        var touched: [String: Int] = [:]
        for key in candidates(scope) {
            guard let node = nodes[key] else { continue }
            let matching = node.variants.filter { scope.matches(key: key, tags: $0.tags) }
            guard !matching.isEmpty else { continue }
            touched[key] = matching.count
            if soft {
                let variants = node.variants.map { scope.matches(key: key, tags: $0.tags) ? $0.markedStale() : $0 }
                replace(key, with: variants)
            } else {
                replace(key, with: node.variants.filter { !scope.matches(key: key, tags: $0.tags) })
            }
        }
        return touched
    }

    /// Removes the variants `shouldRemove` picks, per key.
    mutating func removeVariants(_ shouldRemove: (CachedResponse) -> Bool) -> [String: Int] {
        var removed: [String: Int] = [:]
        for (key, node) in nodes {
            let n = node.variants.reduce(0) { $0 + (shouldRemove($1) ? 1 : 0) }
            guard n > 0 else { continue }
            removed[key] = n
            replace(key, with: node.variants.filter { !shouldRemove($0) })
        }
        return removed
    }

    /// Swaps a key's variants (none: the key goes), keeping its recency.
    private mutating func replace(_ key: String, with variants: [CachedResponse]) {
        guard let old = nodes[key] else { return }
        let older = old.older
        remove(key)
        guard !variants.isEmpty else { return }
        let node = Node(key, variants)
        add(node)
        // Back to where it was in the LRU order, not the newest end.
        unlink(node)
        if let older {
            node.older = older
            node.newer = older.newer
            if let n = older.newer { n.older = node } else { newest = node }
            older.newer = node
        } else {
            node.newer = oldest
            if let o = oldest { o.older = node } else { newest = node }
            oldest = node
        }
    }

    private mutating func unlink(_ node: Node) {
        // `newer` is strong (it keeps the chain from oldest to newest alive
        // together with the dictionary), `older` is unowned.
        let newer = node.newer, older = node.older
        if let newer { newer.older = older } else { newest = older }
        if let older { older.newer = newer } else { oldest = newer }
        node.newer = nil
        node.older = nil
    }

    private mutating func pushNewest(_ node: Node) {
        node.older = newest
        node.newer = nil
        if let n = newest { n.newer = node } else { oldest = node }
        newest = node
    }
}
