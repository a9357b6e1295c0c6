import Synchronization

/// The memory tier: an LRU bounded in bytes, shared by every worker thread
/// behind one mutex. Work under the lock is a hash lookup and a few pointer
/// moves; entries are immutable, so readers use them after unlocking.
public final class MemoryTier: Sendable {
    private let state: Mutex<LRUIndex>
    public let limitBytes: Int

    public init(limitBytes: Int) {
        self.limitBytes = limitBytes
        state = Mutex(LRUIndex(limitBytes: limitBytes))
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
            unlink(victim)
            nodes[victim.key] = nil
            bytes -= victim.cost
            objectCount -= victim.variants.count
            evictions += 1
        }
        while node.cost > limitBytes, node.variants.count > 1 {
            node.cost -= node.variants.removeFirst().costBytes
            evictions += 1
        }
        nodes[entry.key] = node
        pushNewest(node)
        bytes += node.cost
        objectCount += node.variants.count
        return true
    }

    @discardableResult
    mutating func remove(_ key: String) -> Bool {
        guard let node = nodes.removeValue(forKey: key) else { return false }
        unlink(node)
        bytes -= node.cost
        objectCount -= node.variants.count
        return true
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
