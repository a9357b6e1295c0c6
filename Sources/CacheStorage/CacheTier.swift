/// One storage tier (memory, disk, or any other): the verbs every tier
/// answers the same way, with the same types, as Varnish's stevedores.
/// `TieredStore` keeps an ordered list of tiers, fastest first, and nothing
/// outside CacheStorage needs to know which tiers there are. What only some
/// tiers do is a capability protocol of its own (`AdmittingTier`,
/// `StreamingTier`, `BlockingTier`, `LifetimeTier`), which the store asks
/// each tier for once.
public protocol CacheTier: AnyObject, Sendable {
    /// A short name for statistics ("memory", "disk").
    var name: String { get }
    var limitBytes: Int { get }
    /// The largest body (in bytes) this tier stores.
    var maxObjectBytes: Int { get }
    /// The variants stored for `key`, oldest first (empty: none).
    func lookup(_ key: String) -> Variants
    /// The same, with `KeyHash.of(key)` computed once by the store for
    /// every tier it asks (the hash is seeded per process; by default unused).
    func lookup(_ key: String, hash: Int) -> Variants
    /// Stores a complete response beside the key's other variants. A tier may
    /// queue the work (the disk writes in the background). `promoted`: found
    /// in a slower tier, so this tier may decline it (admission). Returns
    /// whether the tier took it.
    @discardableResult
    func insert(_ entry: CachedResponse, promoted: Bool) -> Bool
    /// Removes every variant of `key`; returns how many there were.
    @discardableResult
    func remove(_ key: String) -> Int
    /// Removes (or, `soft`, marks stale) what `scope` matches. This part runs
    /// under the store's purge lock and must be quick: afterwards no lookup
    /// finds a matching entry. Slow work (deleting files) goes in `finish`.
    func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge
    /// The same, hard, without waiting for anything (`purge` may wait for
    /// the tier to know what it holds): for a worker's loop.
    func purgeNow(_ scope: PurgeScope) -> TierPurge
    /// Removes responses stored before `cutoff` (wall seconds); how many per key.
    func removeStored(before cutoff: Int64) -> [String: Int]
    /// Empties the tier; returns the number of responses dropped.
    func removeAll() -> Int
    var stats: TierStats { get }

    // This tier as each capability protocol it conforms to (nil where it
    // does not). Given by the protocols' extensions below, never written by
    // a tier: the store asks these, not `as?`, whose first use per protocol
    // scans every conformance record in the binary (0.66 million
    // instructions of the daemon's start).
    var asAdmitting: (any AdmittingTier)? { get }
    var asStreaming: (any StreamingTier)? { get }
    var asBlocking: (any BlockingTier)? { get }
    var asLifetime: (any LifetimeTier)? { get }
}

extension CacheTier {
    public func lookup(_ key: String, hash: Int) -> Variants { lookup(key) }
    public func purgeNow(_ scope: PurgeScope) -> TierPurge { purge(scope, soft: false) }
    public var asAdmitting: (any AdmittingTier)? { nil }
    public var asStreaming: (any StreamingTier)? { nil }
    public var asBlocking: (any BlockingTier)? { nil }
    public var asLifetime: (any LifetimeTier)? { nil }
}

extension AdmittingTier {
    public var asAdmitting: (any AdmittingTier)? { self }
}

extension StreamingTier {
    public var asStreaming: (any StreamingTier)? { self }
}

extension BlockingTier {
    public var asBlocking: (any BlockingTier)? { self }
}

extension LifetimeTier {
    public var asLifetime: (any LifetimeTier)? { self }
}

/// A tier that may decline what a slower tier offers (admission).
public protocol AdmittingTier: CacheTier {
    /// Whether this tier would now take `entry` offered by a slower tier,
    /// asked before the store-wide lock a promotion needs: most offers of
    /// a working set larger than the tier are declined.
    /// `insert(_:promoted: true)` decides again. `keyHash`: as for `lookup(_:hash:)`.
    func wouldAdmit(_ entry: CachedResponse, keyHash: Int) -> Bool
}

/// A tier that stores a response whose body arrives in pieces (one too
/// large for the tiers before it).
public protocol StreamingTier: CacheTier {
    /// Nil when it cannot now.
    func beginStream(_ head: StoredHead, storedAt: Int64) -> (any TierStream)?
    /// Has `forget` called (from the tier's own thread) with a key whose
    /// stored pieces the tier joined by itself: the copies a faster tier
    /// holds would hide the joined piece.
    func whenPiecesJoin(_ forget: @escaping @Sendable (String) -> Void)
}

extension StreamingTier {
    public func whenPiecesJoin(_ forget: @escaping @Sendable (String) -> Void) {}
}

/// A tier whose lookups may wait for a disk, and which learns what it holds
/// and writes in the background.
public protocol BlockingTier: CacheTier {
    /// The lookup without waiting: nil where it would (a worker's loop then
    /// has `lookup` made on an I/O thread).
    func lookupWithoutBlocking(_ key: String, hash: Int) -> Variants?
    /// Blocks (bounded) until the tier knows everything it holds (the disk
    /// tier's start-up index): a purge must see every entry.
    func waitUntilReady(timeoutSeconds: Double)
    /// Blocks (bounded) until queued writes are done.
    func flush(timeoutSeconds: Double)
    /// The process ran out of descriptors: closes some the tier keeps open
    /// for later reads (and keeps fewer from now on); how many.
    func releaseDescriptors() -> Int
    /// At a stop, after `flush`: leaves what makes the next start's first
    /// lookups quick (the disk tier's name snapshots).
    func recordForRestart()
}

extension BlockingTier {
    public func releaseDescriptors() -> Int { 0 }
    public func recordForRestart() {}
}

/// A tier with per-key lifetimes of the stored bytes (routes' memory_ttl, disk_ttl).
public protocol LifetimeTier: CacheTier {
    func setLifetimeRules(_ lifetimes: (any TierLifetimes)?)
}

/// A body on its way into a tier, piece by piece. Used from one thread.
public protocol TierStream: AnyObject {
    /// Queues body bytes; false when the stream gave up (it is then aborted).
    func append(_ bytes: UnsafeRawBufferPointer) -> Bool
    /// The body is complete: the response becomes findable.
    func commit()
    /// The body will not complete: nothing is kept.
    func abort()
    /// When the tier is behind with writing: keeps `resume`, called from
    /// any thread once it has caught up, and returns true (the caller
    /// should stop appending until then). Otherwise returns false.
    func pauseIfBacklogged(_ resume: @escaping @Sendable () -> Void) -> Bool
}

extension TierStream {
    public func pauseIfBacklogged(_ resume: @escaping @Sendable () -> Void) -> Bool { false }
}

/// The quick half of a purge (what it matched, per key) and the slow half,
/// run outside the store's lock, which returns what it failed to do.
public struct TierPurge {
    public var counts: [String: Int]
    public var finish: () -> [String]
    public init(counts: [String: Int], finish: @escaping () -> [String] = { [] }) {
        self.counts = counts
        self.finish = finish
    }
}

public struct TierStats: Equatable, Sendable {
    public var name: String
    /// Stored responses (variants), not keys.
    public var objects: Int
    public var bytes: Int
    public var limitBytes: Int
    public var evictions: Int
    /// false while the tier is still finding what it holds (the disk index at start).
    public var ready: Bool
    /// Bytes waiting to be written (a tier that writes behind: the disk).
    public var queuedBytes = 0
    /// Responses a tier that writes behind was to store and could not.
    public var writeFailures = 0
    public init(name: String, objects: Int, bytes: Int, limitBytes: Int, evictions: Int = 0, ready: Bool = true) {
        self.name = name
        self.objects = objects
        self.bytes = bytes
        self.limitBytes = limitBytes
        self.evictions = evictions
        self.ready = ready
    }
}

/// Per-key tier lifetimes (the proxy's routes). `.some(nil)` means "never
/// expires", nil means "no override for this key".
public protocol TierLifetimes: Sendable {
    func memoryLifetime(_ key: String) -> Int??
    func diskLifetime(_ key: String) -> Int??
}
