import Clocks
import CacheSemantics
import FoundationEssentials
import Threads
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The disk tier: one file per stored response under `directory`, in 256
/// fan-out sub-directories named by the first byte of the key's hash.
///
/// - Writes happen on a background thread (a client never waits for the
///   disk), to a temporary file renamed into place when complete, so a crash
///   leaves either the old file, the new one, or a temporary file that the
///   next start deletes. The checksum catches anything torn underneath.
/// - The index (key → files, sizes, recency) lives in memory and is rebuilt
///   from the files' headers by another background thread at start; until it
///   is complete, a lookup for a key not yet indexed looks at the files
///   themselves.
/// - Eviction is approximate LRU: when the total passes the limit, the least
///   recently used entries go until the total is 95 % of the limit.
/// - Faults (disk full, read-only directory, I/O errors) are logged, at most
///   one line per kind per 10 s, and never stop the proxy.
public final class DiskTier: CacheTier, StreamingTier, BlockingTier, LifetimeTier, @unchecked Sendable {
    public let name = "disk"
    public let directory: String
    public let limitBytes: Int
    /// `limitBytes`, or less while the file system has less room (`DiskSpace`).
    let spaceLimit: Atomic<Int>
    /// Responses that were to be written and were not (a failing or full
    /// disk, a full queue): `/stats` and `/metrics` count them.
    let writeFailures = Atomic<Int>(0)
    let spaceProbe: DiskSpace.Probe
    /// A quarter of the tier: one object cannot flush the rest.
    public var maxObjectBytes: Int { limitBytes / 4 }
    /// How long a file is kept after it was stored (disk_ttl); nil: until evicted.
    public let lifetimeSeconds: Int?
    /// What disk_ttl and stored times are measured by.
    let clock: WallClock
    /// Per-key overrides (routes), read by a hit without a lock.
    let rules = LifetimeRules()

    /// Installs per-key lifetimes (routes' disk_ttl).
    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        rules.set(lifetimes)
    }

    /// The disk lifetime of `key`: its route's, else the tier's.
    func lifetime(for key: String) -> Int? {
        guard !rules.isEmpty else { return lifetimeSeconds }
        return rules.diskLifetime(key) ?? lifetimeSeconds
    }

    /// A fan-out sub-directory's descriptor, opened on first use and kept:
    /// a hit opens its file relative to it.
    final class Subdirectory: Sendable {
        let fd = Atomic<Int32>(-1)
    }
    let subdirectories = (0..<256).map { _ in Subdirectory() }
    /// While the start-up rebuild runs: each sub-directory's stored files
    /// as first listed (by the rebuild, or by a lookup of a key not indexed
    /// yet), so a worker's loop lists one at most once; dropped once the
    /// index is complete (then a key it lacks has no file).
    let rebuildListings = Locked<[[FileName]?]>(Array(repeating: nil, count: 256))
    /// Sub-directory listings made (tests: a snapshot read instead lists none).
    let listings = Atomic<Int>(0)
    /// Each sub-directory's stamp as its snapshot on disk records it (read or written by this process).
    let recordedStamps = Locked<[NameSnapshot.Stamp?]>(Array(repeating: nil, count: 256))
    /// One snapshot written at a time (the rebuild and a stop may overlap).
    let snapshotWrites = Locked(())
    /// The index (totals, tags, write ordering) behind the tier's lock; the
    /// files by key are in `files`, sharded, so hits take no tier-wide lock.
    let state: Locked<DiskIndex>
    let files: DiskFiles
    let queue = WriteQueue()
    private let lockFD: FileDescriptor
    let log: @Sendable (String) -> Void
    /// Streams being written; touched only on the writer thread.
    var streams: [UInt64: OpenStream] = [:]
    let faults = Locked<[String: Int64]>([:])
    /// Told the keys whose pieces the writer joined (`whenPiecesJoin`).
    let piecesJoined = Locked<(@Sendable (String) -> Void)?>(nil)

    /// Marks this instance's temporary files, so the start-up sweep of
    /// leftovers from a crash never deletes a write in progress.
    let instanceToken = String(UInt64.random(in: 0...UInt64.max), radix: 36)

    /// Bytes charged per file beyond its size: file-system block rounding
    /// and the index entry.
    public static let overheadBytes = 4096 + 256

    public enum OpenError: Error, CustomStringConvertible {
        case inUse(String)
        case unusable(String)
        public var description: String {
            switch self {
            case .inUse(let m), .unusable(let m): return m
            }
        }
    }

    /// Opens (creating if needed) and locks the directory, then starts the
    /// index rebuild and the writer in the background.
    /// `keptFiles`: how many descriptors hits may keep open (`DiskFiles`);
    /// `keptFileRecheckNanoseconds`: how often a kept one's file is checked
    /// for deletion by hand (`KeptFile.isLinked`); `rebuildDelayMilliseconds`:
    /// how long the start-up index rebuild waits before it begins.
    public init(directory: String, limitBytes: Int, lifetimeSeconds: Int? = nil, keptFiles: Int = DiskFiles.defaultKeepLimit(),
                keptFileRecheckNanoseconds: UInt64 = DiskFiles.defaultRecheckNanoseconds, clock: WallClock = WallClock(),
                rebuildDelayMilliseconds: Int = 0, spaceProbe: @escaping DiskSpace.Probe = DiskSpace.statvfsProbe,
                log: @escaping @Sendable (String) -> Void) throws(OpenError) {
        self.clock = clock
        files = DiskFiles(keepLimit: keptFiles, recheckNanoseconds: keptFileRecheckNanoseconds)
        self.directory = directory
        self.limitBytes = limitBytes
        spaceLimit = Atomic(limitBytes)
        self.spaceProbe = spaceProbe
        self.lifetimeSeconds = lifetimeSeconds
        self.log = log
        state = Locked(DiskIndex(files: files))
        do throws(Errno) {
            try DiskIO.makeDirectory(directory)
        } catch {
            throw .unusable("cannot create cache directory \(directory): \(error)")
        }
        let fd: FileDescriptor
        do throws(Errno) {
            fd = try DiskIO.openLockFile(directory + "/lock")
        } catch {
            throw .unusable("cannot open \(directory)/lock: \(error)")
        }
        do throws(Errno) {
            try DiskIO.lockExclusively(fd)
        } catch {
            DiskIO.close(fd)
            if error == .wouldBlock {
                throw .inUse("cache directory \(directory) is in use by another running larder (it holds \(directory)/lock); "
                             + "give each instance its own --cache-dir")
            }
            throw .unusable("cannot lock \(directory)/lock: \(error)")
        }
        lockFD = fd
        do throws(ThreadStartError) {
            try startThread(name: "larder-disk-writer") { [self] in self.writeLoop() }
            try startThread(name: "larder-disk-index") { [self] in
                // Background work: at start the workers (opening listeners,
                // answering the first requests) come first on a busy machine.
                // For its first second SCHED_IDLE (it runs when no other
                // thread wants the CPU), then nice 10: a machine busy for
                // good must not keep the index (and purges) waiting.
                lowerThreadPriority(idle: true)
                if rebuildDelayMilliseconds > 0 { usleep(useconds_t(rebuildDelayMilliseconds) * 1000) }
                self.rebuildIndex()
                lowerThreadPriority(idle: false)
                self.sweepLoop()
            }
        } catch {
            throw .unusable("\(error)")
        }
    }

    // MARK: writing

    /// Queues the entry's disk write (not for a body already in a file).
    @discardableResult
    /// A body left in its file (a disk hit a 304 refreshed) is copied from
    /// that file, which the entry holds open, by the writer thread.
    public func insert(_ entry: CachedResponse, promoted: Bool = false) -> Bool {
        guard entry.bodyLength <= maxObjectBytes else { return false }
        store(DiskRecord(keeping: entry, storedAt: clock.now()))
        return true
    }

    public func whenPiecesJoin(_ forget: @escaping @Sendable (String) -> Void) { piecesJoined.withLock { $0 = forget } }

    public func beginStream(_ head: StoredHead, storedAt: Int64) -> (any TierStream)? {
        var record = DiskRecord(head: head, storedAt: storedAt, body: [])
        record.markedStale = head.lifetime == 0
        return beginStream(record)
    }

    /// Queues `record` to be written. Returns at once.
    public func store(_ record: DiskRecord) {
        let seq = state.withLock { index -> UInt64 in
            index.sequence += 1
            return index.sequence
        }
        if !queue.push(.write(record, seq), bytes: record.body.count) {
            fault("queue", "disk write queue full: not writing \(record.key) to disk")
        }
    }

    /// A response body being written to disk as it streams in (a response
    /// too large for memory). Used from one worker thread; the file work
    /// happens on the writer thread.
    public final class Stream: TierStream, @unchecked Sendable {
        let id: UInt64
        unowned let tier: DiskTier
        public private(set) var failed = false
        public private(set) var bodyBytes = 0
        init(id: UInt64, tier: DiskTier) {
            self.id = id
            self.tier = tier
        }
        func fail() { failed = true }
        func count(_ n: Int) { bodyBytes += n }
        public func append(_ bytes: UnsafeRawBufferPointer) -> Bool { tier.append(self, bytes) }
        public func commit() { tier.finish(self) }
        public func abort() { tier.abort(self) }
        public func pauseIfBacklogged(_ resume: @escaping @Sendable () -> Void) -> Bool {
            !failed && tier.queue.waitIfBacklogged(resume)
        }
    }

    /// Starts writing `record` (its metadata; the body follows with `append`).
    public func beginStream(_ record: DiskRecord) -> Stream? {
        let (id, seq) = state.withLock { index -> (UInt64, UInt64) in
            index.sequence += 1
            return (index.sequence, index.sequence)
        }
        let stream = Stream(id: id, tier: self)
        guard queue.push(.streamOpen(id, record, seq), bytes: 0) else {
            fault("queue", "disk write queue full: not writing \(record.key) to disk")
            return nil
        }
        return stream
    }

    /// Queues body bytes; false (and the stream abandoned) when the queue is full.
    @discardableResult
    public func append(_ stream: Stream, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !stream.failed else { return false }
        guard queue.push(.streamAppend(stream.id, Array(bytes)), bytes: bytes.count) else {
            fault("queue", "disk write queue full: abandoning a streamed write")
            abort(stream)
            return false
        }
        stream.count(bytes.count)
        return true
    }

    /// The body is complete: the file is sealed and renamed into place.
    public func finish(_ stream: Stream) {
        guard !stream.failed else { return }
        if !queue.push(.streamFinish(stream.id), bytes: 0, force: true) { stream.fail() }
    }

    /// The body will not complete: the temporary file goes.
    public func abort(_ stream: Stream) {
        guard !stream.failed else { return }
        stream.fail()
        _ = queue.push(.streamAbort(stream.id), bytes: 0, force: true)
    }

    /// Removes every stored variant of `key` now; queued writes of it are dropped.
    @discardableResult
    public func remove(_ key: String) -> Int {
        let names = state.withLock { index -> [FileName] in
            index.sequence += 1
            index.tombstones[key] = index.sequence
            let names = index.files.variants(of: key)?.names ?? []
            for name in names { index.remove(key: key, name: name) }
            return names
        }
        guard !names.isEmpty else { return 0 }
        // Out of the index now (no lookup finds them). Each file is renamed
        // out of the stored names at once (a crash before its deletion
        // cannot bring it back at the next start: the rebuild deletes such
        // names), and deleted on the writer's thread, after the writes
        // queued before: a removal from a worker, such as an invalidation,
        // does not wait for the disk to free a large file.
        var gone: [String] = []
        for name in names {
            let path = path(of: name), renamed = Self.gonePath(of: path)
            if (try? DiskIO.rename(path, to: renamed)) != nil { gone.append(renamed) }
        }
        if !gone.isEmpty && !queue.push(.unlink(gone), bytes: 0, force: true) {
            for path in gone { try? DiskIO.remove(path) }
        }
        return names.count
    }

    /// Removes (or, `soft`, marks stale) every file `scope` matches, and
    /// makes queued writes of matching responses lose to the purge: the
    /// index now, the files in `finish`. Waits for the start-up index
    /// rebuild first (a purge must see every file).
    public func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge {
        purge(scope, soft: soft, waiting: true)
    }

    /// A hard purge that does not wait for the start-up rebuild: what is
    /// indexed now is unindexed, and what the rebuild (or a lookup before
    /// it is done) finds later that the purge matches is dropped then.
    public func purgeNow(_ scope: PurgeScope) -> TierPurge {
        purge(scope, soft: false, waiting: false)
    }

    private func purge(_ scope: PurgeScope, soft: Bool, waiting: Bool) -> TierPurge {
        let files = purgeIndex(scope, soft: soft, waiting: waiting)
        return TierPurge(counts: files.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }) { [self] in
            applyPurge(files, soft: soft)
        }
    }

    public func removeAll() -> Int {
        let purge = purge(.all, soft: false)
        _ = purge.finish()
        return purge.counts.values.reduce(0, +)
    }

    /// The index half of `purge`: records the purge and unindexes the
    /// files (they can no longer be found). Quick: no file work.
    func purgeIndex(_ scope: PurgeScope, soft: Bool, waiting: Bool = true) -> [(key: String, name: FileName)] {
        if waiting { waitForIndex(timeoutSeconds: 120) }
        return state.withLock { index -> [(key: String, name: FileName)] in
            index.sequence += 1
            index.purges.record(scope, soft: soft, number: index.sequence)
            // (A purge that waited comes after the rebuild, unless its wait ran out: then dropped too, even a soft one.)
            if !index.rebuilt { index.purgedWhileRebuilding.add(scope) }
            let files = index.files(matching: scope)
            for file in files {
                if soft { self.files.dropKept(file.key, file.name) } else { index.remove(key: file.key, name: file.name) }
            }
            return files
        }
    }

    /// The file half of `purge`: deletes the files, or marks them stale.
    /// Returns what failed: such a file would be served again after a
    /// restart, so the purge's caller must hear of it.
    func applyPurge(_ files: [(key: String, name: FileName)], soft: Bool) -> [String] {
        var failures = retryUndeleted()
        for file in files {
            let filePath = path(of: file.name)
            if soft {
                if let failure = markStale(filePath) { failures.append(failure) }
            } else if let failure = delete(filePath) {
                failures.append(failure)
            }
        }
        return failures
    }

    /// Files purged but not deleted: unreachable now, found again after a
    /// restart. Every later purge and the minute sweep try again.
    private let undeleted = Locked<Set<String>>([])

    private func delete(_ path: String) -> String? {
        do throws(Errno) {
            try DiskIO.remove(path)
            return nil
        } catch {
            let failure = "cannot delete \(path): \(error)"
            fault("purge", failure)
            _ = undeleted.withLock { $0.insert(path) }
            return failure
        }
    }

    /// Deletes what earlier purges could not; returns what still fails.
    func retryUndeleted() -> [String] {
        let paths = undeleted.withLock { set -> Set<String> in
            defer { set.removeAll() }
            return set
        }
        return paths.compactMap { delete($0) }
    }

    /// Removes files stored before `cutoff` (wall seconds); returns how many per key.
    public func removeStored(before cutoff: Int64) -> [String: Int] {
        waitForIndex(timeoutSeconds: 120)
        let files = state.withLock { $0.removeStored(before: cutoff) }
        deleteFiles(files)
        return files.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }
    }

    /// Blocks (bounded) until the start-up index rebuild has finished.
    public func waitUntilReady(timeoutSeconds: Double) { waitForIndex(timeoutSeconds: timeoutSeconds) }

    public func waitForIndex(timeoutSeconds: Double) {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while !files.rebuilt.load(ordering: .acquiring) && Date() < deadline { usleep(5_000) }
    }

    /// Waits (at most `timeoutSeconds`) until queued writes are on disk.
    public func flush(timeoutSeconds: Double) {
        queue.waitUntilEmpty(timeoutSeconds: timeoutSeconds)
    }

    /// A quarter of the files hits keep open (at least 16) are closed, and
    /// no more than are left are kept from now on.
    public func releaseDescriptors() -> Int {
        let released = files.releaseKept(max(16, files.kept.value.load(ordering: .relaxed) / 4))
        if released > 0 {
            fault("descriptors", "out of descriptors: closed \(released) files disk hits kept open; "
                  + "at most \(files.keepLimit.load(ordering: .relaxed)) are kept from now on (see disk_open_files)")
        }
        return released
    }

    public var stats: TierStats {
        var stats = state.withLock {
            TierStats(name: name, objects: $0.count, bytes: $0.totalBytes, limitBytes: limitBytes, evictions: $0.evictions,
                      ready: $0.rebuilt)
        }
        stats.queuedBytes = queue.pendingBytes
        stats.writeFailures = writeFailures.load(ordering: .relaxed)
        return stats
    }

}

extension TieredStore {
    /// Memory, then (when there is one) disk.
    public convenience init(memory: MemoryTier, disk: DiskTier?) {
        self.init(tiers: disk.map { [memory, $0] } ?? [memory])
    }
}
