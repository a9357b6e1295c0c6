import FoundationEssentials
import EventLoop
import Synchronization
import Threads

/// An ordered list of tiers, fastest first, behind one interface: a lookup
/// asks each tier in turn and offers what a slower tier found to the faster
/// ones (each may decline: admission); a store goes to every tier that
/// takes it; removals and purges reach every tier. Proxy, Admin and Serve
/// see this and `CacheTier`, never a particular tier.
public final class TieredStore: @unchecked Sendable {
    public let tiers: [any CacheTier]
    /// The paths whose responses said No-Vary-Search (keys in canonical form).
    public let searchVariances = SearchVariances()

    /// The first tier when it is the memory tier: its hits can come from a
    /// worker's `LocalHits` without a lock.
    private let memory: MemoryTier?
    /// Each tier's capabilities, asked once (nil where it lacks one).
    private let admitting: [(any AdmittingTier)?]
    private let streaming: [(any StreamingTier)?]
    private let blocking: [(any BlockingTier)?]
    private let lifetimed: [(any LifetimeTier)?]

    public init(tiers: [any CacheTier]) {
        precondition(!tiers.isEmpty, "a store needs at least one tier")
        self.tiers = tiers
        memory = tiers[0] as? MemoryTier
        admitting = tiers.map { $0.asAdmitting }
        streaming = tiers.map { $0.asStreaming }
        blocking = tiers.map { $0.asBlocking }
        lifetimed = tiers.map { $0.asLifetime }
        for (level, tier) in streaming.enumerated() where level > 0 {
            tier?.whenPiecesJoin { [weak self] key in self?.forget(key, above: level) }
        }
    }

    /// The first tier's name and limit (the memory tier's, for statistics).
    public var first: any CacheTier { tiers[0] }

    /// The tier named `name`, if the store has one.
    public func tier(named name: String) -> (any CacheTier)? { tiers.first { $0.name == name } }

    /// Installs per-key tier lifetimes (routes' memory_ttl and disk_ttl) in
    /// every tier; nil removes them.
    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        for tier in lifetimed { tier?.setLifetimeRules(lifetimes) }
    }

    /// `local`: the calling worker's copies of its recent memory hits.
    public func lookup(_ key: String, local: LocalHits? = nil) -> Variants {
        lookup(key, local: local, mayBlock: true) ?? Variants()
    }

    /// `lookup` as a worker's loop makes it: nil, having found nothing,
    /// where a slower tier would wait for the disk; then `lookup` is made
    /// on an I/O thread (`BlockingWork`), off the loop.
    public func lookupWithoutBlocking(_ key: String, local: LocalHits? = nil) -> Variants? {
        lookup(key, local: local, mayBlock: false)
    }

    @inline(__always)
    private func lookup(_ key: String, local: LocalHits?, mayBlock: Bool) -> Variants? {
        let hash = KeyHash.of(key)
        // A memory miss is counted for admission with the promotion's
        // question when a slower tier has the key (`missUnrecorded`).
        var missUnrecorded = tiers.count > 1
        let found = memory?.lookup(key, local: local, hash: hash, missUnrecorded: &missUnrecorded) ?? tiers[0].lookup(key, hash: hash)
        guard found.isEmpty, tiers.count > 1 else { return found }
        return lookupSlower(key, hash: hash, mayBlock: mayBlock, missUnrecorded: missUnrecorded)
    }

    /// The rest of a lookup, past the first tier (kept out of the hit path).
    /// Nil only when `mayBlock` is false and a tier would wait for the disk
    /// (the lookup is asked again: its memory miss is counted then).
    private func lookupSlower(_ key: String, hash: Int, mayBlock: Bool, missUnrecorded: Bool) -> Variants? {
        var missUnrecorded = missUnrecorded
        defer { if missUnrecorded { memory?.recordMiss(hash) } }
        let since = fetchToken
        let removedSince = removalNumber.load(ordering: .acquiring)
        let begunSince = changesBegun.load(ordering: .acquiring)
        // (Loaded after `changesBegun`: equal, none was under way.)
        let quietAtStart = changesDone.load(ordering: .acquiring) == begunSince
        for level in 1..<tiers.count {
            let found: Variants
            if !mayBlock, let tier = blocking[level] {
                guard let read = tier.lookupWithoutBlocking(key, hash: hash) else {
                    missUnrecorded = false
                    return nil
                }
                found = read
            } else {
                found = tiers[level].lookup(key, hash: hash)
            }
            guard !found.isEmpty else { continue }
            // Admission first, per tier: a working set larger than the faster
            // tiers is mostly declined, and then no store-wide lock is taken.
            // (`insert` decides again under the lock.)
            guard found.contains(where: { fasterAdmit($0, before: level, hash: hash, recordingMiss: &missUnrecorded) }) else { return found }
            // A small body left in its file is read in first (outside the lock).
            let promoted = found.compactMap { $0.inMemory(mayBlock: mayBlock) }
            // Promotion loses to a purge or a removal that ran while the
            // tier was read, without the store-wide lock on the hit path:
            // inserted first, then checked. A purge or removal counts itself
            // begun (`changesBegun`) before it touches a tier, and the tier's
            // own lock orders it against the insert: either it finds the
            // promoted entry there and removes it, or the check below sees
            // it began (or under way when the lookup began: it may have
            // passed the faster tiers and not yet the slower one), and the
            // promotion is judged under the lock.
            for entry in promoted {
                for faster in tiers[..<level] { faster.insert(entry, promoted: true) }
            }
            if !quietAtStart || changesBegun.load(ordering: .acquiring) != begunSince {
                purges.withLock { log in
                    let removed = removals.withLock { $0.removed(key, since: removedSince) }
                    guard removed || promoted.contains(where: { log.verdict(key: key, tags: $0.tags, since: since) != .store })
                    else { return }
                    for faster in tiers[..<level] { faster.remove(key) }
                }
            }
            return found
        }
        return Variants()
    }

    /// Whether a tier before `level` would take `entry` (one that does not
    /// choose takes everything).
    /// `recordingMiss`: the memory tier's miss is still to be counted (then
    /// with this question, under the same lock); false once it is.
    private func fasterAdmit(_ entry: CachedResponse, before level: Int, hash: Int, recordingMiss: inout Bool) -> Bool {
        // The usual store (memory, then disk): asked directly, not through an existential.
        if level == 1, let memory {
            defer { recordingMiss = false }
            return memory.wouldAdmit(entry, keyHash: hash, recordingMiss: recordingMiss)
        }
        if recordingMiss {
            memory?.recordMiss(hash)
            recordingMiss = false
        }
        for faster in 0..<level {
            guard let tier = admitting[faster] else { return true }
            if tier.wouldAdmit(entry, keyHash: hash) { return true }
        }
        return false
    }

    // MARK: storing, under the purge lock

    /// Purges, numbered. Its lock also orders every store against every
    /// purge: a store either lands before a purge (which then removes it) or
    /// is checked against it.
    private let purges = Locked(PurgeLog())
    private let purgeNumber = Atomic<UInt64>(0)
    /// Purges and removals begun, counted under the purge lock before they
    /// touch any tier, and done (what a promotion checks).
    private let changesBegun = Atomic<UInt64>(0)
    private let changesDone = Atomic<UInt64>(0)

    /// Taken when a fetch starts and handed back when it stores, so that a
    /// purge in between wins (see `insert`).
    public var fetchToken: UInt64 { purgeNumber.load(ordering: .acquiring) }

    /// Stores in every tier that takes it (`firstTierOnly`: the memory tier
    /// alone, for a route with disk = false). Returns whether any took it.
    /// `since`: the `fetchToken` taken when the response was requested; a
    /// purge since then that matches the entry refuses it (a soft one
    /// stores it marked stale).
    @discardableResult
    public func insert(_ entry: CachedResponse, firstTierOnly: Bool = false, fetchedSince since: UInt64) -> Bool {
        // A disk hit's small body, left in its file, is read in to be stored
        // (from the page cache only: this runs on a worker's loop; a cold one
        // stays in its file, and the disk keeps the file it has).
        let entry = entry.inMemory(mayBlock: false) ?? entry
        return purges.withLock { log in
            var entry = entry
            switch log.verdict(key: entry.key, tags: entry.tags, since: since) {
            case .refuse: return false
            case .storeStale: entry = entry.markedStale()
            case .store: break
            }
            var taken = false
            for tier in firstTierOnly ? tiers[..<1] : tiers[...] {
                if tier.insert(entry, promoted: false) { taken = true }
            }
            return taken
        }
    }

    /// Starts streaming a response too large for the tiers before the first
    /// that takes streams, unless a purge since `since` matches it. Later
    /// purges are that tier's to apply when the stream commits.
    func beginStream(_ head: StoredHead, storedAt: Int64, fetchedSince since: UInt64) -> (stream: any TierStream, limit: Int)? {
        purges.withLock { log in
            var head = head
            switch log.verdict(key: head.key, tags: head.tags, since: since) {
            case .refuse: return nil
            case .storeStale: head.lifetime = 0
            case .store: break
            }
            for tier in streaming.dropFirst() {
                if let tier, let stream = tier.beginStream(head, storedAt: storedAt) { return (stream, tier.maxObjectBytes) }
            }
            return nil
        }
    }

    /// The largest body any tier but the first stores (0: none).
    public var largestStreamedObject: Int { streaming.dropFirst().compactMap { $0?.maxObjectBytes }.max() ?? 0 }

    /// Removals (an unsafe method's invalidation), numbered like purges but
    /// kept apart (they may come at every POST): only promotions check them.
    /// Guarded by their own lock, taken inside the purge lock.
    private let removals = Locked(RecentRemovals())
    private let removalNumber = Atomic<UInt64>(0)

    /// Removes every variant of `key` from every tier. When something was
    /// removed, the removal is numbered (under the purge lock) so that a
    /// promotion of what a lookup read from a slower tier meanwhile loses to
    /// it, and the faster tiers are cleared once more for a promotion that
    /// landed before the number did. Nothing stored (most uncacheable
    /// answers come here): no lock beyond the tiers' own.
    @discardableResult
    public func remove(_ key: String) -> Bool {
        var removed = false
        for tier in tiers where tier.remove(key) > 0 { removed = true }
        guard removed, tiers.count > 1 else { return removed }
        forget(key, above: tiers.count - 1)
        return true
    }

    /// The tiers before `level` forget `key` (after a removal; or a slower
    /// tier joined the key's pieces by itself), numbered as a removal: a
    /// promotion of what a lookup read before loses to it.
    private func forget(_ key: String, above level: Int) {
        purges.withLock { _ in
            changesBegun.add(1, ordering: .sequentiallyConsistent)
            removalNumber.store(removals.withLock { $0.record(key) }, ordering: .releasing)
            for tier in tiers[..<level] { tier.remove(key) }
            changesDone.add(1, ordering: .sequentiallyConsistent)
        }
    }

    /// Removes (or, `soft`, marks stale) what `scope` matches in every
    /// tier, and makes fetches in flight lose to it. Returns the number of
    /// stored responses: per key, the largest count of any tier (the tiers
    /// mostly hold the same responses).
    public func purge(_ scope: PurgeScope, soft: Bool) -> Int {
        purgeReportingFailures(scope, soft: soft).purged
    }

    /// A purge, with what a tier could not do (files it could not delete or
    /// mark stale): those responses come back after a restart.
    public func purgeReportingFailures(_ scope: PurgeScope, soft: Bool) -> (purged: Int, failures: [String]) {
        // A purge must see every entry: let each tier finish finding what it
        // holds first (outside the lock, so stores go on meanwhile).
        for tier in blocking { tier?.waitUntilReady(timeoutSeconds: 120) }
        let parts = unreachable(scope, soft: soft)
        let failures = parts.flatMap { $0.finish() }
        return (Self.merge(parts.map(\.counts)), failures)
    }

    /// A hard purge asked for on a worker's loop (a write's invalidation
    /// of a URL's cached queries), which waits for no disk: the matches
    /// are unreachable at once, numbered as any purge, even in a tier that
    /// is still reading what it holds at start (`purgeNow`), and their
    /// files are deleted on an I/O thread.
    public func purgeWithoutBlocking(_ scope: PurgeScope, on loop: EventLoop) {
        let parts = unreachable(scope, soft: false, now: true)
        BlockingWork.shared.run({ parts.map { $0.finish() } }, on: loop) { _ in }
    }

    /// Numbered and applied to every tier under the lock: no store slips
    /// in between. Slow work (files) is left to each part's `finish`, the
    /// matches already unreachable.
    private func unreachable(_ scope: PurgeScope, soft: Bool, now: Bool = false) -> [TierPurge] {
        purges.withLock { log -> [TierPurge] in
            changesBegun.add(1, ordering: .sequentiallyConsistent)
            let number = log.record(scope, soft: soft)
            let parts = tiers.map { now ? $0.purgeNow(scope) : $0.purge(scope, soft: soft) }
            // Published only once every tier has forgotten the matches: a
            // lookup that takes this number cannot find them any more, so
            // what it promotes is not from before the purge.
            purgeNumber.store(number, ordering: .releasing)
            changesDone.add(1, ordering: .sequentiallyConsistent)
            return parts
        }
    }

    /// Empties the first (memory) tier only; returns the number of responses dropped.
    public func clearMemory() -> Int { tiers[0].removeAll() }

    /// A variant of a key with several answered a request (the memory tier
    /// keeps the variants most served).
    public func noteServed(_ entry: CachedResponse, local: LocalHits? = nil) { memory?.noteServed(entry, local: local) }

    /// Removes responses stored before `cutoff` (wall seconds) from every tier.
    public func prune(storedBefore cutoff: Int64) -> Int {
        Self.merge(tiers.map { $0.removeStored(before: cutoff) })
    }

    public var stats: [TierStats] { tiers.map(\.stats) }

    /// Waits (bounded) until every tier's queued writes are done.
    public func flush(timeoutSeconds: Double) {
        for tier in blocking { tier?.flush(timeoutSeconds: timeoutSeconds) }
    }

    /// At a stop: waits (bounded) for queued writes, then has each tier
    /// record what makes the next start's first lookups quick.
    public func shutDown(timeoutSeconds: Double) {
        flush(timeoutSeconds: timeoutSeconds)
        for tier in blocking { tier?.recordForRestart() }
    }

    /// Descriptors the tiers keep open, given back (see `BlockingTier.releaseDescriptors`).
    public func releaseDescriptors() -> Int { blocking.reduce(0) { $0 + ($1?.releaseDescriptors() ?? 0) } }

    private static func merge(_ counts: [[String: Int]]) -> Int {
        counts.reduce(into: [String: Int]()) { $0.merge($1, uniquingKeysWith: max) }.values.reduce(0, +)
    }
}

/// The last removals, by key hash: enough for the short time a lookup reads
/// a slower tier. A lookup older than all of them counts as overtaken.
struct RecentRemovals {
    private var ring = [(number: UInt64, hash: Int)](repeating: (0, 0), count: 256)
    private var latest: UInt64 = 0

    mutating func record(_ key: String) -> UInt64 {
        latest += 1
        ring[Int(latest % UInt64(ring.count))] = (latest, KeyHash.of(key))
        return latest
    }

    /// Whether `key` may have been removed after removal number `since`.
    func removed(_ key: String, since: UInt64) -> Bool {
        guard since < latest else { return false }
        if latest - since >= UInt64(ring.count) { return true }
        let hash = KeyHash.of(key)
        var n = latest
        while n > since {
            if ring[Int(n % UInt64(ring.count))].hash == hash { return true }
            n -= 1
        }
        return false
    }
}
