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

    /// The entry for `key`, marked most recently used.
    public func lookup(_ key: String) -> CachedResponse? {
        state.withLock { $0.get(key) }
    }

    /// Stores `entry` (replacing any entry for its key) and evicts least
    /// recently used entries until the total fits. Returns false when the
    /// entry alone exceeds the limit.
    @discardableResult
    public func insert(_ entry: CachedResponse) -> Bool {
        state.withLock { $0.put(entry) }
    }

    @discardableResult
    public func remove(_ key: String) -> Bool {
        state.withLock { $0.remove(key) }
    }

    public var stats: (objects: Int, bytes: Int, evictions: Int) {
        state.withLock { ($0.count, $0.bytes, $0.evictions) }
    }
}

/// Single-threaded LRU index: a dictionary into an intrusive doubly linked
/// list of nodes, most recent at the head.
struct LRUIndex: ~Copyable {
    final class Node {
        let entry: CachedResponse
        let cost: Int
        var newer: Node?
        unowned(unsafe) var older: Node?
        init(_ entry: CachedResponse) {
            self.entry = entry
            cost = entry.costBytes
        }
    }

    let limitBytes: Int
    private var nodes: [String: Node] = [:]
    private var newest: Node?
    private var oldest: Node?
    private(set) var bytes = 0
    private(set) var evictions = 0

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    var count: Int { nodes.count }

    mutating func get(_ key: String) -> CachedResponse? {
        guard let node = nodes[key] else { return nil }
        unlink(node)
        pushNewest(node)
        return node.entry
    }

    mutating func put(_ entry: CachedResponse) -> Bool {
        remove(entry.key)
        let node = Node(entry)
        guard node.cost <= limitBytes else { return false }
        while bytes + node.cost > limitBytes, let victim = oldest {
            unlink(victim)
            nodes[victim.entry.key] = nil
            bytes -= victim.cost
            evictions += 1
        }
        nodes[entry.key] = node
        pushNewest(node)
        bytes += node.cost
        return true
    }

    @discardableResult
    mutating func remove(_ key: String) -> Bool {
        guard let node = nodes.removeValue(forKey: key) else { return false }
        unlink(node)
        bytes -= node.cost
        return true
    }

    /// Keys from most to least recently used (for tests and purges).
    func keysByRecency() -> [String] {
        var keys: [String] = []
        var node = newest
        while let n = node { keys.append(n.entry.key); node = n.older }
        return keys
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
