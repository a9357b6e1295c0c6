import CEventLoop
import Clocks
import CacheSemantics
import FoundationEssentials
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The memory tier: bounded in bytes, shared by every worker thread. A
/// worker's hit is a hash probe and a bit set without the shard's lock
/// (`ShardReaders`); a store is a few pointer moves under it, with no
/// reader inside. Entries are immutable (the tier's bookkeeping is in its
/// index's nodes, `SieveNode`), so readers use them after the lookup.
public final class MemoryTier: CacheTier, AdmittingTier, LifetimeTier {
    /// Shards by key hash, each a SIEVE index behind its own lock: changes
    /// to different keys do not wait for each other, and a hit only sets a
    /// bit (no list splice).
    private let shards: [Shard]
    /// The same, for the hit path: read without a reference count (every
    /// worker retaining the one shard object would write a shared word).
    nonisolated(unsafe) private let shardRefs: UnsafeMutablePointer<Unmanaged<Shard>>

    /// A shard: its index behind its own lock. (Workers' copies of entries
    /// learn of changes per key, from the entries: `LocalHits`.)
    final class Shard: @unchecked Sendable {
        let index: Locked<SieveIndex>
        /// Raised while a change is under way (`ShardReaders`), on a cache
        /// line of its own: readers load it on every lookup.
        private let changing = UnsafeMutableRawPointer.allocate(byteCount: ShardReaders.stride, alignment: ShardReaders.stride)

        init(limitBytes: Int) {
            index = Locked(SieveIndex(limitBytes: limitBytes))
            changing.storeBytes(of: 0, as: UInt.self)
        }

        deinit { changing.deallocate() }

        private var address: UInt { UInt(bitPattern: Unmanaged.passUnretained(self).toOpaque()) }

        /// A change to what readers read (the table, the list, a key's
        /// variants): under the mutex, with no reader inside.
        @inline(__always)
        func change<T>(_ body: (inout SieveIndex) -> T) -> T {
            index.withLock { index in
                el_store_word_seq(changing, 1)
                ShardReaders.waitOut(address)
                defer { el_store_word(changing, 0) }
                return body(&index)
            }
        }

        /// What a lookup found: the key's variants, and (when asked for
        /// one, `LocalHits.wantsNode`) its node, retained.
        struct Found {
            var variants = Variants()
            var node: SieveNode?
        }

        /// `body` run on the index without the mutex, as a reader; nil
        /// when a change is under way (then the caller takes the mutex).
        @inline(__always)
        private func reading<T>(_ reader: ShardReader, _ body: (borrowing SieveIndex) -> T) -> T? {
            el_store_word_seq(reader.word, address)
            defer { el_store_word(reader.word, 0) }
            guard el_load_word_seq(changing) == 0 else { return nil }
            return index.withoutLock(body)
        }

        /// A key's variants read without the mutex (empty: absent); nil
        /// when a change is under way.
        @inline(__always)
        func read(_ key: String, hash: Int, reader: ShardReader, node wanted: Bool, token: Unmanaged<PeriodToken>?) -> Found? {
            reading(reader) { Self.found($0.peek(key, hash: hash), node: wanted, token: token) }
        }

        /// The same under the mutex (a miss counted for admission).
        func get(_ key: String, hash: Int, node wanted: Bool, token: Unmanaged<PeriodToken>?) -> Found {
            index.withLock { Self.found($0.get(key, hash: hash), node: wanted, token: token) }
        }

        /// Built while the index holds the node (a reader, or the mutex).
        /// With a worker's period `token`, the newest variant's block is
        /// borrowed, not retained (`Reclamation`).
        @inline(__always)
        private static func found(_ ref: NodeRef?, node wanted: Bool, token: Unmanaged<PeriodToken>?) -> Found {
            guard let ref else { return Found() }
            return ref.with { node in
                let newest = token.map { ref.newest(heldBy: $0) } ?? node.newest
                return Found(variants: Variants(older: node.older, newest: newest), node: wanted ? node : nil)
            }
        }

        /// Whether `entry`'s variant is marked served (true as well when
        /// it is gone: nothing to mark), read without the mutex; nil when a
        /// change is under way.
        func isMarkedServed(_ entry: CachedResponse, hash: Int, reader: ShardReader) -> Bool? {
            reading(reader) { index in
                index.node(forKeyBytes: entry.keyBytes, hash: hash)?.with { node in
                    node.variantIndex(of: entry).map { node.served & (1 << UInt($0)) != 0 }
                } ?? true
            }
        }
    }
    private let shardShift: Int
    public let name = "memory"
    public let limitBytes: Int
    public let maxObjectBytes: Int
    /// How long an entry stays after it was stored (memory_ttl; nil: until
    /// evicted). This decides how long the tier keeps the bytes, not what
    /// is fresh.
    public let lifetimeSeconds: Int?
    /// What memory_ttl is measured by.
    let clock: WallClock
    /// Per-key overrides (routes), read by a hit without a lock.
    private let rules = LifetimeRules()

    /// `maxObjectBytes`: the largest body kept (max_object_size; default:
    /// anything that fits). Up to 16 shards, as many as still each hold the
    /// largest object with room to spare.
    ///
    /// `slowerTierBehind`: a disk tier keeps what this tier does not. Then a
    /// small tier (fewer than 16 shards by the rule above) is split further,
    /// into shards of at least 256 KiB, and keeps only the objects such a
    /// shard holds with the same room to spare: the rest are the slower
    /// tier's alone. Otherwise a memory tier of 2 MiB in front of a disk tier
    /// is one shard, and every worker's disk hits take its one lock twice
    /// (the look-up that misses, then admission).
    public init(limitBytes: Int, maxObjectBytes: Int? = nil, lifetimeSeconds: Int? = nil, slowerTierBehind: Bool = false,
                clock: WallClock = WallClock()) {
        self.clock = clock
        self.limitBytes = limitBytes
        var largest = min(maxObjectBytes ?? limitBytes, limitBytes)
        self.lifetimeSeconds = lifetimeSeconds
        let margin = 64 << 10
        var count = 1
        while count < 16 && limitBytes / (count * 2) >= largest + margin { count *= 2 }
        if slowerTierBehind {
            let before = count
            while count < 16 && limitBytes / (count * 2) >= Self.smallestShardBytes { count *= 2 }
            if count > before { largest = min(largest, limitBytes / count - margin) }
        }
        self.maxObjectBytes = largest
        shardShift = Int.bitWidth - count.trailingZeroBitCount
        shards = (0..<count).map { _ in Shard(limitBytes: limitBytes / count) }
        shardRefs = .allocate(capacity: count)
        shardRefs.initialize(from: shards.map { Unmanaged.passUnretained($0) }, count: count)
    }

    /// The shard of a key's hash (its high bits; the table uses the low ones).
    @inline(__always)
    private func shard(_ hash: Int) -> Shard {
        shards.count == 1 ? shards[0] : shards[Int(UInt(bitPattern: hash) >> UInt(shardShift))]
    }

    deinit { shardRefs.deallocate() }

    /// `body` with the shard of a key's hash, borrowed (`shards` keeps it).
    @inline(__always)
    private func withShard<T>(_ hash: Int, _ body: (Shard) -> T) -> T {
        let i = shards.count == 1 ? 0 : Int(UInt(bitPattern: hash) >> UInt(shardShift))
        return shardRefs[i]._withUnsafeGuaranteedRef(body)
    }

    public var shardCount: Int { shards.count }

    /// The smallest shard a tier with a slower tier behind it is split into.
    static let smallestShardBytes = 256 << 10

    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        rules.set(lifetimes)
    }

    /// The stored variants for `key` (one per distinct set of values of the
    /// request fields its Vary names), marked visited. Past its memory
    /// lifetime a key is dropped (a slower tier may still hold it).
    public func lookup(_ key: String) -> Variants { lookup(key, local: nil) }

    public func lookup(_ key: String, hash: Int) -> Variants { lookup(key, local: nil, hash: hash) }

    /// The same, first from (and then into) a worker's `LocalHits`: a key
    /// hit there takes no lock while its entry is unchanged.
    /// `hash`: `KeyHash.of(key)`, when the caller has it.
    public func lookup(_ key: String, local: LocalHits?, hash: Int? = nil) -> Variants {
        var missUnrecorded = false
        return lookup(key, local: local, hash: hash, missUnrecorded: &missUnrecorded)
    }

    /// The same; `missUnrecorded` true lets a miss read without the mutex
    /// go uncounted for admission, and is left true when it did: the caller
    /// counts it (`recordMiss`, or `wouldAdmit(_:keyHash:recordingMiss:)`
    /// for the disk's answer: one lock, not two, per disk hit).
    public func lookup(_ key: String, local: LocalHits?, hash: Int?, missUnrecorded: inout Bool) -> Variants {
        let mayDefer = missUnrecorded
        missUnrecorded = false
        let hash = hash ?? KeyHash.of(key)
        let found: Variants
        let override: Int??  // the key's route's memory_ttl, kept with a copy
        let generation = rules.generation
        if let local, let kept = local.find(key, hash: hash, rules: generation) {
            (found, override) = kept
        } else {
            let wanted = local?.wantsNode(hash: hash) ?? false
            let token = local?.periodToken()  // announced before the read
            let read = withShard(hash) { shard in
                guard let reader = local?.reader,
                      let read = shard.read(key, hash: hash, reader: reader, node: wanted, token: token) else {
                    return shard.get(key, hash: hash, node: wanted, token: token)
                }
                // A miss still counts for admission (under the mutex: the sketch is the index's).
                if read.variants.isEmpty {
                    if mayDefer { missUnrecorded = true } else { shard.index.withLock { $0.recordMiss(hash) } }
                }
                return read
            }
            found = read.variants
            guard !found.isEmpty else { return found }
            override = generation == 0 ? nil : rules.memoryLifetime(key)
            local?.keep(found, node: read.node, hash: hash, rules: generation, lifetime: override)
        }
        guard let lifetime = override ?? lifetimeSeconds else { return found }
        let now = clock.now()
        guard found.contains(where: { now.minusSaturating($0.timing.responseTime) > Int64(lifetime) }) else { return found }
        remove(key)
        return Variants()
    }

    /// Stores `entry` beside the other variants of its key: it replaces the
    /// variant with the same Vary values, and every variant selected by a
    /// different set of Vary fields (the upstream changed its Vary). Then
    /// evicts (SIEVE) until the total fits. Returns false when the entry
    /// alone exceeds the limit, or (`promoted`) admission turned it away.
    @discardableResult
    public func insert(_ entry: CachedResponse, promoted: Bool = false) -> Bool {
        // A body in a file costs memory only for its head (hits sendfile
        // it): stored so when a response refreshed by a 304 has no other
        // place; what the disk tier found stays there (it keeps it open).
        guard entry.body.count <= maxObjectBytes, !(promoted && entry.bodyFile != nil) else { return false }
        let hash = KeyHash.of(entry.keyBytes)
        return shard(hash).change { $0.put(entry, promoted: promoted, hash: hash) }
    }

    public func wouldAdmit(_ entry: CachedResponse) -> Bool { wouldAdmit(entry, keyHash: KeyHash.of(entry.keyBytes)) }

    public func wouldAdmit(_ entry: CachedResponse, keyHash: Int) -> Bool { wouldAdmit(entry, keyHash: keyHash, recordingMiss: false) }

    /// The same, counting first the miss a lookup left uncounted.
    public func wouldAdmit(_ entry: CachedResponse, keyHash: Int, recordingMiss: Bool) -> Bool {
        guard let bytes = entry.residentBodyBytes, bytes <= maxObjectBytes else {
            if recordingMiss { recordMiss(keyHash) }
            return false
        }
        return shard(keyHash).index.withLock { index in
            if recordingMiss { index.recordMiss(keyHash) }
            return index.wouldAdmit(entry, hash: keyHash)
        }
    }

    /// Counts a miss for admission (one `lookup` left uncounted).
    public func recordMiss(_ hash: Int) { shard(hash).index.withLock { $0.recordMiss(hash) } }

    @discardableResult
    public func remove(_ key: String) -> Int {
        shard(KeyHash.of(key)).change { $0.remove(key) }
    }

    /// `entry`, one of a key's several variants, answered a request: the
    /// variants most served are the ones kept (`SieveIndex.variantToDrop`).
    /// Once per variant between choices: the mark is read first, without
    /// the mutex where the worker has a reader slot (`local`), and without
    /// hashing the key where a worker's copy answered.
    public func noteServed(_ entry: CachedResponse, local: LocalHits? = nil) {
        // Served from a worker's copy (a hot key): the mark is read at the node's address.
        if let mark = local?.servedMark(of: entry), SieveNode.isServed(mark.bits, index: mark.index) { return }
        let hash = KeyHash.of(entry.keyBytes)
        withShard(hash) { shard in
            if let reader = local?.reader, shard.isMarkedServed(entry, hash: hash, reader: reader) == true { return }
            shard.index.withLock { $0.markServed(entry, hash: hash) }
        }
    }

    /// Removes (or, `soft`, marks stale) what `scope` matches; the number of
    /// stored responses (variants) per key it touched.
    public func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge {
        TierPurge(counts: eachShard { $0.purge(scope, soft: soft) }.reduce(into: [:]) { $0.merge($1) { a, _ in a } })
    }

    /// Empties the tier; returns the number of stored responses dropped.
    public func removeAll() -> Int {
        eachShard { index in
            let n = index.objectCount
            index.removeAll()
            return n
        }.reduce(0, +)
    }

    /// Removes responses received before `cutoff` (wall seconds); returns
    /// how many per key.
    public func removeStored(before cutoff: Int64) -> [String: Int] {
        eachShard { $0.removeVariants { $0.timing.responseTime < cutoff } }.reduce(into: [:]) { $0.merge($1) { a, _ in a } }
    }

    /// Visits every shard as a change (purges, clears, prunes).
    private func eachShard<T>(_ body: (inout SieveIndex) -> T) -> [T] { shards.map { $0.change(body) } }

    /// Reads every shard (statistics): no version bump.
    private func readEachShard<T>(_ body: (inout SieveIndex) -> T) -> [T] { shards.map { $0.index.withLock(body) } }

    /// Runs `body` holding every shard's mutex, as a slow change would
    /// (tests: a worker's hit must not wait for it).
    func holdingShardMutexes<T>(_ body: () -> T) -> T {
        func hold(_ i: Int) -> T { i == shards.count ? body() : shards[i].index.withLock { _ in hold(i + 1) } }
        return hold(0)
    }

    /// Tag-to-key links held (for tests: evicted entries leave none behind).
    var tagIndexSize: Int { readEachShard { $0.tagLinks }.reduce(0, +) }

    public var stats: TierStats {
        let each = readEachShard { ($0.objectCount, $0.bytes, $0.evictions) }
        return TierStats(name: name, objects: each.reduce(0) { $0 + $1.0 }, bytes: each.reduce(0) { $0 + $1.1 },
                         limitBytes: limitBytes, evictions: each.reduce(0) { $0 + $1.2 })
    }
}

/// The variants stored for one key, oldest first, without an array for the
/// usual single one (a hit allocates nothing to return it).
public struct Variants: RandomAccessCollection, Sendable {
    // Read in place by the request path in other modules (inlinable: a
    // call per element returned each one retained).
    @usableFromInline let older: [CachedResponse]
    @usableFromInline let newest: CachedResponse?

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

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { newest == nil ? 0 : older.count + 1 }
    @inlinable public subscript(position: Int) -> CachedResponse { position < older.count ? older[position] : newest! }

    /// The same responses, each holding its own block (for a holder that
    /// keeps them beyond a worker's period: `CachedResponse.owned`).
    public func owned() -> Variants {
        guard let newest, !(newest.isOwned && older.allSatisfy(\.isOwned)) else { return self }
        return Variants(older: older.map { $0.owned() }, newest: newest.owned())
    }

    /// Collects variants oldest first; one alone needs no array.
    struct Builder {
        private var older: [CachedResponse] = []
        private var newest: CachedResponse?

        mutating func append(_ entry: CachedResponse) {
            if let newest { older.append(newest) }
            newest = entry
        }

        var variants: Variants { newest.map { Variants(older: older, newest: $0) } ?? Variants() }
    }
}

