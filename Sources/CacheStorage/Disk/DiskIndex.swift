import CacheSemantics
import FoundationEssentials
import Synchronization
import SystemPackage
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The disk tier's files by key, in shards by key hash, each behind its
/// own lock: a hit takes only its key's shard (it reads the key's files
/// and notes their use), so workers hitting the disk tier share no lock.
/// Every change goes through `DiskIndex`, under the tier's index lock,
/// which is always taken first (one lock order: index, then shard).
public final class DiskFiles: Sendable {
    typealias Variants = KeyFiles
    private let shards: [Locked<KeyTable<DiskKey>>] = (0..<16).map { _ in Locked(KeyTable()) }
    /// The start-up rebuild has indexed every file.
    let rebuilt = Atomic<Bool>(false)
    /// Descriptors kept open between hits (`KeptFile`), at most `keepLimit`
    /// (lowered for good when the process ran short: `releaseKept`).
    let kept = KeptCount()
    let keepLimit = Atomic<Int>(0)
    /// How long (monotonic nanoseconds) a kept descriptor's file, once seen
    /// still linked under its name, is trusted to be so without asking again.
    let recheckNanoseconds: UInt64

    /// `keepLimit`: by default half the open-file limit (raised to its hard
    /// limit at start), at most 16,384; connections need the rest, and take
    /// kept files back when they run short (`releaseKept`).
    /// `recheckNanoseconds`: see `KeptFile.isLinked(now:recheckNanoseconds:)`.
    init(keepLimit: Int = DiskFiles.defaultKeepLimit(), recheckNanoseconds: UInt64 = DiskFiles.defaultRecheckNanoseconds) {
        self.keepLimit.store(keepLimit, ordering: .relaxed)
        self.recheckNanoseconds = recheckNanoseconds
    }

    /// One second, as nginx's `open_file_cache_valid` (60 s by default).
    public static let defaultRecheckNanoseconds: UInt64 = 1_000_000_000

    public static func defaultKeepLimit() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        return Int(min(limit.rlim_cur / 2, 16_384))
    }

    /// A key's files, changed or read under its shard's lock (the key hashed once).
    func withFiles<T>(of key: String, _ body: (inout Variants?) -> T) -> T { withFiles(of: HashedKey(key), body) }

    func withFiles<T>(of key: HashedKey, _ body: (inout Variants?) -> T) -> T {
        shards[Int(UInt(bitPattern: key.hash) >> 60)].withLock { table in
            if let entry = table.find(key.key, hash: key.hash) {
                // In place: the files stay in the key's block.
                defer { if entry.files == nil { table.remove(key.key, hash: key.hash) } }
                return body(&entry.files)
            }
            var files: Variants?
            defer { if let files { table.insert(DiskKey.make(key.key, files), hash: key.hash) } }
            return body(&files)
        }
    }

    typealias Use = (name: FileName, size: Int?, verified: Bool, id: UInt64, kept: KeptFile?)

    /// A hit: the key's files (name, size on disk, checksum verified, the
    /// entry's id, its descriptor kept open), marked used now; nil when the
    /// index has none.
    func use(_ key: String, overheadBytes: Int) -> Uses? { use(HashedKey(key), overheadBytes: overheadBytes) }

    func use(_ key: HashedKey, overheadBytes: Int, now: UInt64 = DiskIndex.now()) -> Uses? {
        withFiles(of: key) { variants -> Uses? in
            guard variants != nil else { return nil }
            return Self.use(&variants!, overheadBytes: overheadBytes, now: now)
        }
    }

    private static func use(_ variants: inout Variants, overheadBytes: Int, now: UInt64) -> Uses {
        var found = Uses()
        variants.forEachInPlace { name, item in
            item.lastUse = now
            found.append((name, item.bytes - overheadBytes, item.verified, item.id, item.kept))
        }
        return found
    }

    /// What a hit found.
    enum Hit {
        /// The key's one file, kept with its response read once, its name
        /// trusted now: that response, served as stored.
        case asStored(CachedResponse, storedAt: Int64, name: FileName, id: UInt64)
        /// The files to read (as `use`).
        case files(Uses)
    }

    /// `use`, with the common hit answered under the same lock: one file,
    /// kept as stored (no copies of the file list, no descriptor retained).
    func hit(_ key: HashedKey, overheadBytes: Int, now: UInt64) -> Hit? {
        withFiles(of: key) { variants -> Hit? in
            guard variants != nil else { return nil }
            if variants!.isSingle {
                var hit: Hit?
                variants!.forEachInPlace { name, item in
                    guard let kept = item.kept, let head = kept.head, kept.isTrusted(now: now, recheckNanoseconds: recheckNanoseconds)
                    else { return }
                    item.lastUse = now
                    hit = .asStored(head, storedAt: kept.storedAt, name: name, id: item.id)
                }
                if let hit { return hit }
            }
            return .files(Self.use(&variants!, overheadBytes: overheadBytes, now: now))
        }
    }

    /// Keeps a hit's descriptor open on its file's entry for the next hits
    /// (instead of `replacing`, one whose file went), unless the entry
    /// changed meanwhile (`id`: replaced or removed; 0: not indexed yet),
    /// has another, or `keepLimit` is reached: then it is closed.
    func keep(_ stored: StoredFile, head: CachedResponse?, storedAt: Int64, key: String, name: FileName, id: UInt64,
              replacing: KeptFile?, openedAt: UInt64) {
        guard mayKeep(id: id, replacing: replacing) else { return }
        let file = KeptFile(stored, head: head, storedAt: storedAt, count: kept, linkedAt: openedAt)
        withFiles(of: key) { variants in
            guard let item = variants?[name], item.id == id, item.kept === replacing, !item.keepsNothing else { return }
            variants?.modify(name) { $0.kept = file }
        }
        // Not kept: released here, outside the lock.
    }

    /// Whether `keep` would keep a file (asked before it is read, to know
    /// whether to decode it for keeping).
    func mayKeep(id: UInt64, replacing: KeptFile?) -> Bool {
        id != 0 && (replacing != nil || kept.value.load(ordering: .relaxed) < keepLimit.load(ordering: .relaxed))
    }

    /// A soft purge marks the file stale: what is kept of it would serve it
    /// fresh, so it goes, and the entry keeps nothing more (a hit reads the
    /// file, and sees the mark once it is written).
    func dropKept(_ key: String, _ name: FileName) {
        withFiles(of: key) { variants in
            variants?.modify(name) { item in
                item.kept = nil
                item.keepsNothing = true
            }
        }
    }

    func isVerified(_ key: String, _ name: FileName) -> Bool { withFiles(of: key) { $0?[name]?.verified ?? false } }

    func setVerified(_ key: String, _ name: FileName) { withFiles(of: key) { $0?.modify(name) { $0.verified = true } } }

    func variants(of key: String) -> Variants? { withFiles(of: key) { $0 } }

    /// Every key's files, shard by shard (the index's scans: purges, eviction, expiry).
    func forEach(_ body: (_ key: String, _ files: Variants) -> Void) {
        for shard in shards { shard.withLock { $0.forEach { body($0.key, $0.files!) } } }
    }
}

/// A key of the disk index and its files, in one block of its own with
/// the key's bytes after them (no String object beside it): the shard's
/// table holds a 16-byte slot per key, most of them empty as a hash
/// table's are, not the entry itself.
final class DiskKey: ManagedBuffer<DiskKey.Header, UInt8>, KeyTableEntry {
    struct Header {
        /// nil only while a change that removes the last file is under way.
        var files: KeyFiles?
        let keyCount: Int
    }

    static func make(_ key: String, _ files: KeyFiles) -> DiskKey {
        var key = key
        return key.withUTF8 { utf8 in
            let block = unsafeDowncast(create(minimumCapacity: utf8.count) { _ in Header(files: files, keyCount: utf8.count) },
                                       to: DiskKey.self)
            block.withUnsafeMutablePointerToElements { elements in
                if let bytes = utf8.baseAddress { elements.initialize(from: bytes, count: utf8.count) }
            }
            return block
        }
    }

    var files: KeyFiles? {
        _read { yield header.files }
        _modify { yield &header.files }
    }

    /// The key as a string (made on each use: for scans, not for hits).
    var key: String { withKeyBytes { String(decoding: $0, as: UTF8.self) } }

    func withKeyBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        withUnsafeMutablePointerToElements { body(UnsafeRawBufferPointer(start: $0, count: header.keyCount)) }
    }

    func isSame(_ other: DiskKey) -> Bool { self === other }
}

/// The files a hit found: nearly always one, held inline (no array per hit).
struct Uses: Sequence {
    private var one: DiskFiles.Use?
    private var more: [DiskFiles.Use] = []

    init() {}

    init(_ uses: [DiskFiles.Use]) {
        for use in uses { append(use) }
    }

    var isEmpty: Bool { one == nil }
    var first: DiskFiles.Use? { one }

    mutating func append(_ use: DiskFiles.Use) {
        if one == nil { one = use } else { more.append(use) }
    }

    func makeIterator() -> Iterator { Iterator(one: one, more: more.makeIterator()) }

    struct Iterator: IteratorProtocol {
        var one: DiskFiles.Use?
        var more: IndexingIterator<[DiskFiles.Use]>

        mutating func next() -> DiskFiles.Use? {
            if let use = one {
                one = nil
                return use
            }
            return more.next()
        }
    }
}

/// A key with its hash (`KeyHash`'s, seeded: clients cannot make URLs
/// collide), computed once: it picks the shard, then the slot.
struct HashedKey {
    let key: String
    let hash: Int

    /// `hash`: `KeyHash.of(key)`, when the caller has it.
    init(_ key: String, hash: Int? = nil) {
        self.key = key
        self.hash = hash ?? KeyHash.of(key)
    }
}

/// The in-memory index of the disk tier: totals, tags, and the numbers
/// that order writes against removals and purges. Guarded by the tier's
/// index lock; the files by key are in `files` (sharded).
struct DiskIndex: ~Copyable {
    struct Item {
        var bytes: Int
        /// When it was last stored or hit (`now()`; 0: found at start, older
        /// than anything used since). A hit writes only its key's shard.
        var lastUse: UInt64
        var storedAt: Int64
        /// A file's checksum was checked since start.
        var verified = false
        var tags: [String] = []
        /// Tells this entry from a later one of the same name.
        var id = DiskIndex.nextID()
        /// The file, kept open since a hit with what it holds (closed with
        /// the entry, once no hit is reading it).
        var kept: KeptFile?
        /// Soft-purged: nothing is kept of it (see `DiskFiles.dropKept`).
        var keepsNothing = false
    }

    private static let ids = Atomic<UInt64>(0)
    static func nextID() -> UInt64 { ids.wrappingAdd(1, ordering: .relaxed).newValue }

    let files: DiskFiles
    var totalBytes = 0
    var count = 0
    var evictions = 0
    /// Sequence numbers: a remove after a queued write wins over it.
    var sequence: UInt64 = 0
    var tombstones: [String: UInt64] = [:]
    /// Purges, numbered from `sequence`: a write queued before one of them
    /// is dropped (or, soft, marked stale).
    var purges = PurgeLog()
    /// Hard purges made without waiting while the start-up rebuild runs
    /// (`purgeNow`): what it, or a lookup before it is done, finds that
    /// they match is dropped. Emptied once rebuilt.
    var purgedWhileRebuilding = PurgedScopes()
    /// tag → keys with a file carrying it.
    var tagged: [String: Set<String>] = [:]

    init(files: DiskFiles) { self.files = files }

    var rebuilt: Bool {
        get { files.rebuilt.load(ordering: .acquiring) }
        nonmutating set { files.rebuilt.store(newValue, ordering: .releasing) }
    }

    /// Nanoseconds of the monotonic clock (from the vDSO: no system call),
    /// comparable across shards and threads, unlike a counter per shard.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec) + 1
    }

    /// A file stored under `name`, replacing the one indexed there in one
    /// step under the key's shard lock: a hit takes only that lock, and
    /// between a removal and an addition it found the key without files
    /// (a miss that fetched again a response just stored).
    mutating func put(key: String, name: FileName, bytes: Int, storedAt: Int64, tags: [String]) {
        let item = Item(bytes: bytes, lastUse: Self.now(), storedAt: storedAt, tags: tags)
        let replaced = files.withFiles(of: key) { variants -> (item: Item, left: Set<String>)? in
            if variants == nil { variants = KeyFiles() }
            guard let old = variants!.updateValue(item, forKey: name) else { return nil }
            // The tags the key's files carry now, the new one's included.
            return (old, old.tags.isEmpty ? [] : Set(variants!.flatMap(\.item.tags)))
        }
        if let (old, left) = replaced {
            totalBytes -= old.bytes
            count -= 1
            untag(key, old.tags, keeping: left)
        }
        totalBytes += item.bytes
        count += 1
        for tag in item.tags { tagged[tag, default: []].insert(key) }
    }

    /// Whether a file found on disk before the rebuild indexed it (so
    /// stored before any purge of this run) is one a purge made meanwhile
    /// removed: a purge asked for on a worker's loop does not wait for the
    /// rebuild, which then drops what it matches.
    func purgedSinceStart(key: String, tags: [String]) -> Bool {
        purgedWhileRebuilding.matches(key: key, tags: tags)
    }

    mutating func insertIfAbsent(key: String, name: FileName, bytes: Int, storedAt: Int64, tags: [String]) {
        guard (tombstones[key] ?? 0) == 0, files.withFiles(of: key, { $0?[name] == nil }) else { return }
        // Entries found on disk are older than anything used since start.
        add(key: key, name: name, Item(bytes: bytes, lastUse: 0, storedAt: storedAt, tags: tags))
    }

    private mutating func add(key: String, name: FileName, _ item: Item) {
        files.withFiles(of: key) { variants in
            if variants == nil { variants = KeyFiles() }
            variants!.updateValue(item, forKey: name)
        }
        totalBytes += item.bytes
        count += 1
        for tag in item.tags { tagged[tag, default: []].insert(key) }
    }

    /// `id`: only the entry a hit read (0: whichever is there). A hit that
    /// failed to read a file must not drop the entry of a file stored
    /// again under its name meanwhile (one grown past the inline read
    /// limit, say): that file is fine and indexed.
    @discardableResult
    mutating func remove(key: String, name: FileName, id: UInt64 = 0) -> Bool {
        // The removed file, and the tags the key's other variants still carry.
        let removed = files.withFiles(of: key) { variants -> (item: Item, left: Set<String>)? in
            guard id == 0 || variants?[name]?.id == id, let item = variants?.removeValue(forKey: name) else { return nil }
            if variants?.isEmpty == true { variants = nil }
            // (Only a tagged file needs to know: most have no tags.)
            return (item, item.tags.isEmpty ? [] : Set(variants.map { $0.flatMap(\.item.tags) } ?? []))
        }
        guard let (item, left) = removed else { return false }
        totalBytes -= item.bytes
        count -= 1
        untag(key, item.tags, keeping: left)
        return true
    }

    /// Drops `key` from the sets of `tags` that none of its files still carries (`left`).
    private mutating func untag(_ key: String, _ tags: [String], keeping left: Set<String>) {
        for tag in tags where !left.contains(tag) {
            tagged[tag]?.remove(key)
            if tagged[tag]?.isEmpty == true { tagged[tag] = nil }
        }
    }

    /// Whether a write numbered `seq` of `key` with `tags` lost to a later
    /// removal or purge.
    func verdict(key: String, tags: [String], seq: UInt64) -> StoreVerdict {
        if (tombstones[key] ?? 0) > seq { return .refuse }
        return purges.verdict(key: key, tags: tags, since: seq)
    }

    /// The files `scope` matches.
    func files(matching scope: PurgeScope) -> [(key: String, name: FileName)] {
        var found: [(key: String, name: FileName)] = []
        func collect(_ key: String, _ variants: DiskFiles.Variants) {
            for (name, item) in variants where scope.matches(key: key, tags: item.tags) { found.append((key, name)) }
        }
        switch scope {
        case .key(let key):
            if let variants = files.variants(of: key) { collect(key, variants) }
        case .tag(let tag):
            for key in tagged[tag] ?? [] { if let variants = files.variants(of: key) { collect(key, variants) } }
        case .prefix(let prefix):
            files.forEach { key, variants in if key.hasPrefix(prefix) { collect(key, variants) } }
        case .regex(let pattern):
            files.forEach { key, variants in if pattern.matches(key: key) { collect(key, variants) } }
        case .all:
            files.forEach(collect)
        }
        return found
    }

    /// Every file, with its entry (for scans by age or use).
    private func all() -> [(key: String, name: FileName, item: Item)] {
        var all: [(key: String, name: FileName, item: Item)] = []
        all.reserveCapacity(count)
        files.forEach { key, variants in for (name, item) in variants { all.append((key, name, item)) } }
        return all
    }

    /// Removes the files stored before `cutoff` (wall seconds); returns them.
    mutating func removeStored(before cutoff: Int64) -> [(key: String, name: FileName)] {
        let old = all().filter { $0.item.storedAt < cutoff }.map { (key: $0.key, name: $0.name) }
        for file in old { remove(key: file.key, name: file.name) }
        return old
    }

    /// Removes entries older than their key's lifetime; returns their files.
    mutating func removeExpired(now: Int64, lifetime: (String) -> Int?) -> [(String, FileName)] {
        var expired: [(String, FileName)] = []
        for file in all() {
            guard let seconds = lifetime(file.key), now.minusSaturating(file.item.storedAt) > Int64(seconds) else { continue }
            expired.append((file.key, file.name))
        }
        for (key, name) in expired { remove(key: key, name: name) }
        return expired
    }

    /// Past the limit, files go as the `EvictionPolicy` (`RecencyEviction`:
    /// least recently used, then oldest stored) says, until 95 % of the
    /// limit. Returns the files to delete.
    mutating func evict(limit: Int) -> [(String, FileName)] {
        guard totalBytes > limit else { return [] }
        var eviction = RecencyEviction(all().map {
            RecencyEviction.File(key: $0.key, name: $0.name, lastUse: $0.item.lastUse, storedAt: $0.item.storedAt)
        })
        var victims: [(String, FileName)] = []
        let target = limit / 100 * 95
        while totalBytes > target, let victim = eviction.nextVictim() {
            remove(key: victim.key, name: victim.name)
            eviction.left(victim)
            victims.append((victim.key, victim.name))
            evictions += 1
        }
        return victims
    }
}
