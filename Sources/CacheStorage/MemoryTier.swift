import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The memory tier: an LRU bounded in bytes, shared by every worker thread
/// behind one lock. Work under the lock is a hash probe and a few pointer
/// moves; entries are immutable (but for their LRU links, which only this
/// tier touches under its lock), so readers use them after unlocking.
public final class MemoryTier: CacheTier {
    private let state: Locked<LRUIndex>
    public let name = "memory"
    public let limitBytes: Int
    public let maxObjectBytes: Int
    /// How long an entry stays after it was stored (memory_ttl; nil: until
    /// evicted). This decides how long the tier keeps the bytes, not what
    /// is fresh.
    public let lifetimeSeconds: Int?
    /// Per-key overrides (routes); `hasRules` spares a hit the lock when no
    /// route sets a lifetime.
    private let rules = Locked<(any TierLifetimes)?>(nil)
    private let hasRules = Atomic<Bool>(false)

    /// `maxObjectBytes`: the largest body kept (max_object_size; default:
    /// anything that fits).
    public init(limitBytes: Int, maxObjectBytes: Int? = nil, lifetimeSeconds: Int? = nil) {
        self.limitBytes = limitBytes
        self.maxObjectBytes = min(maxObjectBytes ?? limitBytes, limitBytes)
        self.lifetimeSeconds = lifetimeSeconds
        state = Locked(LRUIndex(limitBytes: limitBytes))
    }

    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        rules.withLock { $0 = lifetimes }
        hasRules.store(lifetimes != nil, ordering: .releasing)
    }

    /// The stored variants for `key` (one per distinct set of values of the
    /// request fields its Vary names), marked most recently used. Past its
    /// memory lifetime a key is dropped (a slower tier may still hold it).
    public func lookup(_ key: String) -> Variants {
        let found = state.withLock { $0.get(key) }
        guard !found.isEmpty else { return found }
        let override = hasRules.load(ordering: .acquiring) ? rules.withLock({ $0 })?.memoryLifetime(key) : nil
        guard let lifetime = override ?? lifetimeSeconds else { return found }
        let now = Int64(Date().timeIntervalSince1970)
        guard found.contains(where: { now - $0.timing.responseTime > Int64(lifetime) }) else { return found }
        remove(key)
        return Variants()
    }

    /// Stores `entry` beside the other variants of its key: it replaces the
    /// variant with the same Vary values, and every variant selected by a
    /// different set of Vary fields (the upstream changed its Vary). Then
    /// evicts least recently used keys until the total fits. Returns false
    /// when the entry alone exceeds the limit.
    @discardableResult
    public func insert(_ entry: CachedResponse, promoted: Bool = false) -> Bool {
        // A body in a file costs memory only for its head (hits sendfile it).
        guard entry.body.count <= maxObjectBytes else { return false }
        return state.withLock { $0.put(entry) }
    }

    @discardableResult
    public func remove(_ key: String) -> Int {
        state.withLock { $0.remove(key) }
    }

    /// Removes (or, `soft`, marks stale) what `scope` matches; the number of
    /// stored responses (variants) per key it touched.
    public func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge {
        TierPurge(counts: state.withLock { $0.purge(scope, soft: soft) })
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
    public func removeStored(before cutoff: Int64) -> [String: Int] {
        state.withLock { $0.removeVariants { $0.timing.responseTime < cutoff } }
    }

    /// Tag-to-key links held (for tests: evicted entries leave none behind).
    var tagIndexSize: Int { state.withLock { $0.tagLinks } }

    public var stats: TierStats {
        state.withLock { TierStats(name: name, objects: $0.objectCount, bytes: $0.bytes, limitBytes: limitBytes, evictions: $0.evictions) }
    }
}

/// The variants stored for one key, oldest first, without an array for the
/// usual single one (a hit allocates nothing to return it).
public struct Variants: RandomAccessCollection, Sendable {
    private let older: [CachedResponse]
    private let newest: CachedResponse?

    public init() {
        older = []
        newest = nil
    }

    public init(_ variants: [CachedResponse]) {
        newest = variants.last
        older = variants.count > 1 ? Array(variants.dropLast()) : []
    }

    init(older: [CachedResponse], newest: CachedResponse) {
        self.older = older
        self.newest = newest
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { newest == nil ? 0 : older.count + 1 }
    public subscript(position: Int) -> CachedResponse { position < older.count ? older[position] : newest! }
}

/// Single-threaded LRU index over keys. Each key is represented by its
/// newest variant, which carries the list links and the key's other
/// variants; an open-addressing table of those entries finds keys. Per key
/// that costs one table slot and three words in the entry's tail.
struct LRUIndex: ~Copyable {
    /// Variants kept per key; the oldest goes beyond this.
    static let maxVariants = 32

    let limitBytes: Int
    private var table = KeyTable()
    /// tag → keys whose variants carry it; only tagged entries cost anything.
    private var tagged: [String: Set<String>] = [:]
    private var newest: CachedResponse?
    private var oldest: CachedResponse?
    private(set) var bytes = 0
    private(set) var evictions = 0
    private(set) var objectCount = 0

    init(limitBytes: Int) { self.limitBytes = limitBytes }

    var count: Int { table.count }

    mutating func get(_ key: String) -> Variants {
        guard let head = table.find(key) else { return Variants() }
        unlink(head)
        pushNewest(head)
        return Variants(older: head.olderVariants, newest: head)
    }

    private func variants(of head: CachedResponse) -> [CachedResponse] { head.olderVariants + [head] }

    private static func cost(_ variants: [CachedResponse]) -> Int { variants.reduce(0) { $0 + $1.costBytes } }

    mutating func put(_ entry: CachedResponse) -> Bool {
        let cost = entry.costBytes
        guard cost <= limitBytes else { return false }
        guard let head = table.find(sameKeyAs: entry) else {
            // A new key (every miss): no variant arrays to build.
            while bytes + cost > limitBytes, let victim = oldest {
                remove(head: victim)
                evictions += 1
            }
            add(single: entry, cost: cost)
            return true
        }
        var variants = self.variants(of: head)
        variants.removeAll { $0.varyNames != entry.varyNames || $0.varyValues == entry.varyValues }
        variants.append(entry)
        if variants.count > Self.maxVariants { variants.removeFirst(variants.count - Self.maxVariants) }
        remove(head: head)
        // Evict other keys first; if this key's own variants still do not
        // fit, drop its oldest variants.
        var total = Self.cost(variants)
        while bytes + total > limitBytes, let victim = oldest {
            remove(head: victim)
            evictions += 1
        }
        while total > limitBytes, variants.count > 1 {
            total -= variants.removeFirst().costBytes
            evictions += 1
        }
        add(variants)
        return true
    }

    var tagLinks: Int { tagged.values.reduce(0) { $0 + $1.count } }

    /// `add` for a key with one variant.
    private mutating func add(single entry: CachedResponse, cost: Int) {
        table.insert(entry)
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
    private mutating func add(_ variants: [CachedResponse]) -> CachedResponse {
        let head = variants.last!
        head.olderVariants = Array(variants.dropLast())
        table.insert(head)
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
        let variants = variants(of: head)
        unlink(head)
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
            head.olderVariants = []
        }
        newest = nil
        table = KeyTable()
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
        if let newer { newer.lruOlder = older } else if newest?.isSame(head) == true { newest = older }
        if let older { older.lruNewer = newer } else if oldest?.isSame(head) == true { oldest = newer }
        head.lruNewer = nil
        head.lruOlder = nil
    }

    private mutating func pushNewest(_ head: CachedResponse) {
        head.lruOlder = newest
        head.lruNewer = nil
        if let n = newest { n.lruNewer = head } else { oldest = head }
        newest = head
    }
}

/// Open-addressing hash table (linear probing, backward-shift deletion) of
/// entries by key: 8 bytes a slot, the key read from the entry's own block.
/// Keys hash with the standard library's per-process seeded hasher, so
/// clients cannot choose URLs that collide.
struct KeyTable {
    private var slots: [CachedResponse?] = Array(repeating: nil, count: 16)
    private(set) var count = 0

    private var mask: Int { slots.count - 1 }

    private static func hash(_ bytes: UnsafeRawBufferPointer) -> Int {
        var hasher = Hasher()
        hasher.combine(bytes: bytes)
        return hasher.finalize()
    }

    private func home(_ entry: CachedResponse) -> Int { Self.hash(entry.keyBytes) & mask }

    private func index(of key: String) -> Int? {
        var key = key
        return key.withUTF8 { index(ofKeyBytes: UnsafeRawBufferPointer($0)) }
    }

    private func index(ofKeyBytes wanted: UnsafeRawBufferPointer) -> Int? {
        var i = Self.hash(wanted) & mask
        while let entry = slots[i] {
            let bytes = entry.keyBytes
            if bytes.count == wanted.count, bytes.count == 0 || memcmp(bytes.baseAddress!, wanted.baseAddress!, bytes.count) == 0 {
                return i
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The entry stored under the same key as `entry` (no key string built).
    func find(sameKeyAs entry: CachedResponse) -> CachedResponse? { index(ofKeyBytes: entry.keyBytes).flatMap { slots[$0] } }

    /// The slot holding this very entry.
    private func index(of entry: CachedResponse) -> Int? {
        var i = home(entry)
        while let other = slots[i] {
            if other.isSame(entry) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    func find(_ key: String) -> CachedResponse? { index(of: key).flatMap { slots[$0] } }

    /// Adds an entry whose key is absent.
    mutating func insert(_ entry: CachedResponse) {
        if (count + 1) * 4 > slots.count * 3 { grow() }
        var i = home(entry)
        while slots[i] != nil { i = (i + 1) & mask }
        slots[i] = entry
        count += 1
    }

    mutating func remove(_ key: String) -> CachedResponse? {
        guard let i = index(of: key) else { return nil }
        return remove(at: i)
    }

    /// Removes this entry (found by identity); false when it is not in the table.
    @discardableResult
    mutating func remove(_ entry: CachedResponse) -> Bool {
        guard let i = index(of: entry) else { return false }
        remove(at: i)
        return true
    }

    @discardableResult
    private mutating func remove(at index: Int) -> CachedResponse? {
        var hole = index
        let removed = slots[hole]
        slots[hole] = nil
        count -= 1
        // Move later entries of the run back over the hole when their home
        // allows, so probes never stop early at a gap.
        var i = (hole + 1) & mask
        while let entry = slots[i] {
            let h = home(entry)
            // `entry` may move to `hole` unless its home lies cyclically in (hole, i].
            let stays = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i)
            if !stays {
                slots[hole] = entry
                slots[i] = nil
                hole = i
            }
            i = (i + 1) & mask
        }
        return removed
    }

    var entries: [CachedResponse] { slots.compactMap { $0 } }
    var keys: [String] { slots.compactMap { $0?.key } }

    private mutating func grow() {
        let old = slots
        slots = Array(repeating: nil, count: old.count * 2)
        for case let entry? in old {
            var i = home(entry)
            while slots[i] != nil { i = (i + 1) & mask }
            slots[i] = entry
        }
    }
}
