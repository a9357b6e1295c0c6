import Foundation
import Synchronization
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
public final class DiskTier: @unchecked Sendable {
    public let directory: String
    public let limitBytes: Int
    /// How long a file is kept after it was stored (disk_ttl); nil: until evicted.
    public let lifetimeSeconds: Int?
    /// Per-key overrides (routes); nil when there are none.
    private let rules = Locked<(any TierLifetimes)?>(nil)

    /// Installs per-key lifetimes (routes' disk_ttl).
    public func setLifetimeRules(_ lifetimes: (any TierLifetimes)?) {
        rules.withLock { $0 = lifetimes }
    }

    /// The disk lifetime of `key`: its route's, else the tier's.
    func lifetime(for key: String) -> Int? {
        rules.withLock { $0 }?.diskLifetime(key) ?? lifetimeSeconds
    }
    private let state: Locked<DiskIndex>
    private let queue = WriteQueue()
    private let lockFD: Int32
    private let log: @Sendable (String) -> Void
    private let faults = Locked<[String: Int64]>([:])

    /// Marks this instance's temporary files, so the start-up sweep of
    /// leftovers from a crash never deletes a write in progress.
    private let instanceToken = String(UInt64.random(in: 0...UInt64.max), radix: 36)

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
    public init(directory: String, limitBytes: Int, lifetimeSeconds: Int? = nil,
                log: @escaping @Sendable (String) -> Void) throws(OpenError) {
        self.directory = directory
        self.limitBytes = limitBytes
        self.lifetimeSeconds = lifetimeSeconds
        self.log = log
        state = Locked(DiskIndex())
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw .unusable("cannot create cache directory \(directory): \(String(cString: strerror(errno)))")
        }
        let fd = open(directory + "/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .unusable("cannot open \(directory)/lock: \(String(cString: strerror(errno)))")
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let e = errno
            close(fd)
            if e == EWOULDBLOCK {
                throw .inUse("cache directory \(directory) is in use by another running larder (it holds \(directory)/lock); "
                             + "give each instance its own --cache-dir")
            }
            throw .unusable("cannot lock \(directory)/lock: \(String(cString: strerror(e)))")
        }
        lockFD = fd
        let writer = Thread { [self] in self.writeLoop() }
        writer.name = "larder-disk-writer"
        writer.start()
        let rebuild = Thread { [self] in
            self.rebuildIndex()
            self.sweepLoop()
        }
        rebuild.name = "larder-disk-index"
        rebuild.start()
    }

    // MARK: reading

    /// Every stored variant of `key`, read and verified. Files that fail are
    /// deleted and count as misses.
    public func lookup(_ key: String) -> [DiskRecord] {
        let hash = Self.keyHash(key)
        var names: [String] = []
        let indexed = state.withLock { index -> Bool in
            guard let files = index.entries[key] else { return index.rebuilt }
            index.clock += 1
            for name in files.keys {
                names.append(name)
                index.entries[key]![name]!.lastUse = index.clock
            }
            return true
        }
        if !indexed {
            // Still rebuilding: look at the files themselves.
            names = listFiles(subdirectory: Self.subdirectory(hash)).filter { $0.hasPrefix(hash + "-") && $0.hasSuffix(".lrd") }
        }
        var records: [DiskRecord] = []
        for name in names {
            let path = directory + "/" + Self.subdirectory(hash) + "/" + name
            if let size = fileSize(path), size > Self.inlineReadLimit {
                if let record = openLarge(path, key: key, name: name, indexed: indexed) { records.append(record) }
                continue
            }
            guard let bytes = readFile(path) else {
                state.withLock { $0.remove(key: key, name: name) }
                continue
            }
            do {
                let record = try DiskFormat.decode(bytes)
                guard record.key == key else { continue }  // a hash collision: another key's file
                if let lifetime = lifetime(for: key), Int64(time(nil)) - record.storedAt > Int64(lifetime) {
                    unlink(path)  // past disk_ttl
                    state.withLock { $0.remove(key: key, name: name) }
                    continue
                }
                if !indexed {
                    let size = bytes.count
                    state.withLock {
                        $0.insertIfAbsent(key: key, name: name, bytes: Self.charged(size), storedAt: record.storedAt, tags: record.tags)
                    }
                }
                records.append(record)
            } catch {
                fault("corrupt", "dropping unreadable cache file \(path): \(error)")
                unlink(path)
                state.withLock { $0.remove(key: key, name: name) }
            }
        }
        return records
    }

    /// Files larger than this are not read into memory: their body is
    /// served from the file (sendfile).
    public static let inlineReadLimit = 1 << 20

    /// A large file: header and metadata read, the body left in place. Its
    /// checksum is verified (streaming) the first time it is used after start.
    private func openLarge(_ path: String, key: String, name: String, indexed: Bool) -> DiskRecord? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            state.withLock { $0.remove(key: key, name: name) }
            return nil
        }
        defer { close(fd) }
        func drop(_ why: String) -> DiskRecord? {
            fault("corrupt", "dropping unreadable cache file \(path): \(why)")
            unlink(path)
            state.withLock { $0.remove(key: key, name: name) }
            return nil
        }
        var st = stat()
        var fixed = [UInt8](repeating: 0, count: DiskFormat.fixedHeaderBytes)
        guard fstat(fd, &st) == 0, pread(fd, &fixed, fixed.count, 0) == fixed.count,
              let h = try? DiskFormat.header(fixed[...]),
              Int(st.st_size) == DiskFormat.fixedHeaderBytes + h.metaLength + h.bodyLength
        else { return drop("bad header") }
        var meta = [UInt8](repeating: 0, count: h.metaLength)
        guard pread(fd, &meta, meta.count, off_t(DiskFormat.fixedHeaderBytes)) == meta.count,
              var record = try? DiskFormat.decodeMeta(meta[...], header: h)
        else { return drop("bad metadata") }
        guard record.key == key else { return nil }  // a hash collision
        if let lifetime = lifetime(for: key), Int64(time(nil)) - record.storedAt > Int64(lifetime) {
            unlink(path)
            state.withLock { $0.remove(key: key, name: name) }
            return nil
        }
        let verified = state.withLock { $0.entries[key]?[name]?.verified ?? false }
        if !verified {
            var sum = Checksum()
            sum.add(meta)
            var chunk = [UInt8](repeating: 0, count: 1 << 20)
            var offset = DiskFormat.fixedHeaderBytes + h.metaLength
            while offset < Int(st.st_size) {
                let n = chunk.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
                if n <= 0 { return drop("short read") }
                chunk.withUnsafeBytes { sum.add(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                offset += n
            }
            guard sum.value == h.checksum else { return drop("checksum mismatch") }
            state.withLock { index in
                if !indexed {
                    index.insertIfAbsent(key: key, name: name, bytes: Self.charged(Int(st.st_size)), storedAt: record.storedAt,
                                         tags: record.tags)
                }
                index.entries[key]?[name]?.verified = true
            }
        }
        record.bodyFile = FileBody(path: path, offset: DiskFormat.fixedHeaderBytes + h.metaLength, length: h.bodyLength)
        return record
    }

    private func fileSize(_ path: String) -> Int? {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : nil
    }

    // MARK: writing

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
    public final class Stream: @unchecked Sendable {
        let id: UInt64
        public private(set) var failed = false
        public private(set) var bodyBytes = 0
        fileprivate init(id: UInt64) { self.id = id }
        fileprivate func fail() { failed = true }
        fileprivate func count(_ n: Int) { bodyBytes += n }
    }

    /// Starts writing `record` (its metadata; the body follows with `append`).
    public func beginStream(_ record: DiskRecord) -> Stream? {
        let (id, seq) = state.withLock { index -> (UInt64, UInt64) in
            index.sequence += 1
            return (index.sequence, index.sequence)
        }
        let stream = Stream(id: id)
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
        let hash = Self.keyHash(key)
        let names = state.withLock { index -> [String] in
            index.sequence += 1
            index.tombstones[key] = index.sequence
            let names = index.entries[key].map { Array($0.keys) } ?? []
            for name in names { index.remove(key: key, name: name) }
            return names
        }
        for name in names { unlink(directory + "/" + Self.subdirectory(hash) + "/" + name) }
        return names.count
    }

    /// Removes (or, `soft`, marks stale) every file `scope` matches, and
    /// makes queued writes of matching responses lose to the purge. Waits
    /// for the start-up index rebuild first (a purge must see every file).
    /// Returns the number of files per key.
    public func purge(_ scope: PurgeScope, soft: Bool) -> [String: Int] {
        let files = purgeIndex(scope, soft: soft)
        _ = applyPurge(files, soft: soft)
        return files.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }
    }

    /// The index half of `purge`: records the purge and unindexes the
    /// files (they can no longer be found). Quick: no file work.
    func purgeIndex(_ scope: PurgeScope, soft: Bool) -> [(key: String, name: String)] {
        waitForIndex(timeoutSeconds: 120)
        return state.withLock { index -> [(key: String, name: String)] in
            index.sequence += 1
            index.purges.record(scope, soft: soft, number: index.sequence)
            let files = index.files(matching: scope)
            if !soft { for file in files { index.remove(key: file.key, name: file.name) } }
            return files
        }
    }

    /// The file half of `purge`: deletes the files, or marks them stale.
    /// Returns what failed: such a file would be served again after a
    /// restart, so the purge's caller must hear of it.
    func applyPurge(_ files: [(key: String, name: String)], soft: Bool) -> [String] {
        var failures = retryUndeleted()
        for file in files {
            let path = directory + "/" + Self.subdirectory(Self.keyHash(file.key)) + "/" + file.name
            if soft {
                if let failure = markStale(path) { failures.append(failure) }
            } else if let failure = delete(path) {
                failures.append(failure)
            }
        }
        return failures
    }

    /// Files purged but not deleted: unreachable now, found again after a
    /// restart. Every later purge and the minute sweep try again.
    private let undeleted = Locked<Set<String>>([])

    private func delete(_ path: String) -> String? {
        guard unlink(path) != 0 && errno != ENOENT else { return nil }
        let failure = "cannot delete \(path): \(String(cString: strerror(errno)))"
        fault("purge", failure)
        _ = undeleted.withLock { $0.insert(path) }
        return failure
    }

    /// Deletes what earlier purges could not; returns what still fails.
    private func retryUndeleted() -> [String] {
        let paths = undeleted.withLock { set -> Set<String> in
            defer { set.removeAll() }
            return set
        }
        return paths.compactMap { delete($0) }
    }

    /// Removes files stored before `cutoff` (wall seconds); returns how many per key.
    public func removeStored(before cutoff: Int64) -> [String: Int] {
        waitForIndex(timeoutSeconds: 120)
        let files = state.withLock { index -> [(key: String, name: String)] in
            var old: [(key: String, name: String)] = []
            for (key, files) in index.entries { for (name, item) in files where item.storedAt < cutoff { old.append((key, name)) } }
            for file in old { index.remove(key: file.key, name: file.name) }
            return old
        }
        deleteFiles(files)
        return files.reduce(into: [:]) { $0[$1.key, default: 0] += 1 }
    }

    /// Blocks (bounded) until the start-up index rebuild has finished.
    public func waitForIndex(timeoutSeconds: Double) {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while !state.withLock({ $0.rebuilt }) && Date() < deadline { usleep(5_000) }
    }

    /// Waits (at most `timeoutSeconds`) until queued writes are on disk.
    public func flush(timeoutSeconds: Double) {
        queue.waitUntilEmpty(timeoutSeconds: timeoutSeconds)
    }

    public var stats: (objects: Int, bytes: Int, indexComplete: Bool) {
        state.withLock { ($0.count, $0.totalBytes, $0.rebuilt) }
    }

    private func writeLoop() {
        while true {
            let op = queue.pop()
            switch op {
            case .write(let record, let seq):
                write(record, seq: seq)
            case .streamOpen(let id, let record, let seq):
                streamOpen(id, record, seq: seq)
            case .streamAppend(let id, let bytes):
                streamAppend(id, bytes)
            case .streamFinish(let id):
                streamFinish(id)
            case .streamAbort(let id):
                if let s = streams.removeValue(forKey: id) {
                    close(s.fd)
                    unlink(s.tmpPath)
                }
            }
            // Tombstones and purges only matter while older writes are queued.
            if queue.done() && streams.isEmpty {
                state.withLock { index in
                    guard index.rebuilt else { return }
                    index.tombstones.removeAll()
                    index.purges.removeAll()
                }
            }
        }
    }

    /// Streams being written; touched only on the writer thread.
    private var streams: [UInt64: OpenStream] = [:]

    private struct OpenStream {
        var fd: Int32
        var tmpPath: String
        var directory: String
        var name: String
        var key: String
        var storedAt: Int64
        var tags: [String]
        var seq: UInt64
        var metaLength: Int
        var bodyLength = 0
        var checksum = Checksum()
    }

    private func streamOpen(_ id: UInt64, _ record: DiskRecord, seq: UInt64) {
        let hash = Self.keyHash(record.key)
        let dir = directory + "/" + Self.subdirectory(hash)
        let name = hash + "-" + Self.variantHash(record.varyValues) + ".lrd"
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            fault("write", "cannot create \(dir): \(String(cString: strerror(errno))); serving from memory and upstream")
            return
        }
        let meta = DiskFormat.encodeMeta(record)
        let tmp = dir + "/.tmp-" + instanceToken + "-" + name + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        guard let fd = createTemporary(tmp) else { return }
        var stream = OpenStream(fd: fd, tmpPath: tmp, directory: dir, name: name, key: record.key, storedAt: record.storedAt,
                                tags: record.tags, seq: seq, metaLength: meta.count)
        stream.checksum.add(meta)
        // The fixed header is written last, once the length and checksum are known.
        let placeholder = [UInt8](repeating: 0, count: DiskFormat.fixedHeaderBytes)
        guard writeAll(fd, placeholder, path: tmp), writeAll(fd, meta, path: tmp) else {
            close(fd)
            unlink(tmp)
            return
        }
        streams[id] = stream
    }

    private func streamAppend(_ id: UInt64, _ bytes: [UInt8]) {
        guard var stream = streams[id] else { return }
        guard writeAll(stream.fd, bytes, path: stream.tmpPath) else {
            close(stream.fd)
            unlink(stream.tmpPath)
            streams[id] = nil
            return
        }
        stream.checksum.add(bytes)
        stream.bodyLength += bytes.count
        streams[id] = stream
    }

    private func streamFinish(_ id: UInt64) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        let header = DiskFormat.fixedHeader(metaLength: stream.metaLength, bodyLength: stream.bodyLength,
                                            checksum: stream.checksum.value)
        let written = header.withUnsafeBytes { pwrite(stream.fd, $0.baseAddress, $0.count, 0) }
        close(stream.fd)
        let final = stream.directory + "/" + stream.name
        guard written == header.count, rename(stream.tmpPath, final) == 0 else {
            fault("write", "cannot seal \(stream.tmpPath): \(String(cString: strerror(errno)))")
            unlink(stream.tmpPath)
            return
        }
        // Summed as it was written: no need to verify it on first use.
        indexSealed(key: stream.key, name: stream.name, fileBytes: DiskFormat.fixedHeaderBytes + stream.metaLength + stream.bodyLength,
                    storedAt: stream.storedAt, tags: stream.tags, seq: stream.seq, verified: true)
    }

    /// Indexes a file just renamed into place (unless its key was removed
    /// or purged since the write was queued) and evicts past the limit.
    private func indexSealed(key: String, name: String, fileBytes: Int, storedAt: Int64, tags: [String], seq: UInt64,
                             verified: Bool) {
        let victims = state.withLock { index -> [(String, String)] in
            switch index.verdict(key: key, tags: tags, seq: seq) {
            case .refuse: return [(key, name)]  // removed meanwhile
            case .storeStale: _ = markStale(directory + "/" + Self.subdirectory(Self.keyHash(key)) + "/" + name)
            case .store: break
            }
            index.put(key: key, name: name, bytes: Self.charged(fileBytes), storedAt: storedAt, tags: tags)
            if verified { index.entries[key]?[name]?.verified = true }
            return index.evict(limit: limitBytes)
        }
        deleteFiles(victims)
    }

    /// Sets a file's stale flag (a soft purge): one 4-byte write in place.
    private func markStale(_ path: String) -> String? {
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            let failure = "cannot mark \(path) stale: \(String(cString: strerror(errno)))"
            fault("purge", failure)
            return failure
        }
        defer { close(fd) }
        var flags = DiskFormat.staleFlag.littleEndian
        if pwrite(fd, &flags, 4, off_t(DiskFormat.flagsOffset)) != 4 {
            let failure = "cannot mark \(path) stale: \(String(cString: strerror(errno)))"
            fault("purge", failure)
            return failure
        }
        return nil
    }

    private func deleteFiles(_ files: [(key: String, name: String)]) {
        for (key, name) in files { unlink(directory + "/" + Self.subdirectory(Self.keyHash(key)) + "/" + name) }
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                fault("write", "cannot write \(path): \(String(cString: strerror(errno))); serving from memory and upstream")
                return false
            }
            done += n
        }
        return true
    }

    private func write(_ record: DiskRecord, seq: UInt64) {
        var record = record
        switch state.withLock({ $0.verdict(key: record.key, tags: record.tags, seq: seq) }) {
        case .refuse: return  // removed since it was queued
        case .storeStale: record.markedStale = true
        case .store: break
        }
        let hash = Self.keyHash(record.key)
        let sub = Self.subdirectory(hash)
        let name = hash + "-" + Self.variantHash(record.varyValues) + ".lrd"
        let dir = directory + "/" + sub
        if mkdir(dir, 0o700) != 0 && errno != EEXIST {
            fault("write", "cannot create \(dir): \(String(cString: strerror(errno))); serving from memory and upstream")
            return
        }
        let bytes = DiskFormat.encode(record)
        let tmp = dir + "/.tmp-" + instanceToken + "-" + name + "-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        guard writeFile(tmp, bytes) else { return }
        guard rename(tmp, dir + "/" + name) == 0 else {
            fault("write", "cannot rename \(tmp): \(String(cString: strerror(errno)))")
            unlink(tmp)
            return
        }
        indexSealed(key: record.key, name: name, fileBytes: bytes.count, storedAt: record.storedAt, tags: record.tags, seq: seq,
                    verified: false)
    }

    // MARK: index rebuild

    private func rebuildIndex() {
        var header = [UInt8](repeating: 0, count: DiskFormat.fixedHeaderBytes)
        for byte in 0..<256 {
            let sub = String(format: "%02x", byte)
            for name in listFiles(subdirectory: sub) {
                let path = directory + "/" + sub + "/" + name
                if name.hasPrefix(".tmp-") {
                    // An interrupted write of an earlier run; ours are in progress.
                    if !name.hasPrefix(".tmp-" + instanceToken + "-") { unlink(path) }
                    continue
                }
                guard name.hasSuffix(".lrd") else { continue }
                let fd = open(path, O_RDONLY | O_CLOEXEC)
                guard fd >= 0 else { continue }
                defer { close(fd) }
                var st = stat()
                guard fstat(fd, &st) == 0,
                      read(fd, &header, header.count) == header.count,
                      let h = try? DiskFormat.header(header[...]),
                      Int(st.st_size) == DiskFormat.fixedHeaderBytes + h.metaLength + h.bodyLength
                else {
                    fault("corrupt", "dropping unreadable cache file \(path)")
                    unlink(path)
                    continue
                }
                var meta = [UInt8](repeating: 0, count: h.metaLength)
                guard read(fd, &meta, meta.count) == meta.count, let record = try? DiskFormat.decodeMeta(meta[...], header: h) else {
                    fault("corrupt", "dropping unreadable cache file \(path)")
                    unlink(path)
                    continue
                }
                state.withLock {
                    $0.insertIfAbsent(key: record.key, name: name, bytes: Self.charged(Int(st.st_size)), storedAt: record.storedAt,
                                      tags: record.tags)
                }
            }
        }
        deleteFiles(state.withLock { index -> [(String, String)] in
            index.rebuilt = true
            return index.evict(limit: limitBytes)
        })
    }

    /// Every minute, removes files past their disk_ttl.
    private func sweepLoop() {
        while true {
            sleep(60)
            _ = retryUndeleted()
            let now = Int64(time(nil))
            let overrides = rules.withLock { $0 }
            let fallback = lifetimeSeconds
            guard overrides != nil || fallback != nil else { continue }
            deleteFiles(state.withLock { $0.removeExpired(now: now) { overrides?.diskLifetime($0) ?? fallback } })
        }
    }

    // MARK: files

    private func listFiles(subdirectory: String) -> [String] {
        guard let dir = opendir(directory + "/" + subdirectory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    private func readFile(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size >= 0, st.st_size < (1 << 40) else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                fault("read", "cannot read \(path): \(n < 0 ? String(cString: strerror(errno)) : "short file")")
                return nil
            }
            done += n
        }
        return bytes
    }

    private func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        guard let fd = createTemporary(path) else { return false }
        let written = writeAll(fd, bytes, path: path)
        close(fd)
        if !written { unlink(path) }
        return written
    }

    /// A new temporary file, or nil (logged) when the directory refuses it.
    private func createTemporary(_ path: String) -> Int32? {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            fault("write", "cannot write to the cache directory (\(String(cString: strerror(errno)))); serving from memory and upstream")
            return nil
        }
        return fd
    }

    /// Logs a fault, at most once per kind every 10 seconds.
    private func fault(_ kind: String, _ message: String) {
        let now = Int64(time(nil))
        let due = faults.withLock { last -> Bool in
            if let previous = last[kind], now - previous < 10 { return false }
            last[kind] = now
            return true
        }
        if due { log(message) }
    }

    // MARK: names

    static func keyHash(_ key: String) -> String {
        var sum = Checksum()
        sum.add(Array(key.utf8))
        return hex(sum.value)
    }

    static func variantHash(_ values: [String?]) -> String {
        var sum = Checksum()
        for value in values {
            sum.add(value.map { Array($0.utf8) + [0] } ?? [1])
        }
        return hex(sum.value)
    }

    static func subdirectory(_ keyHash: String) -> String { String(keyHash.prefix(2)) }

    static func charged(_ fileBytes: Int) -> Int { fileBytes + overheadBytes }

    private static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}

/// The in-memory index of the disk tier. Guarded by the tier's mutex.
struct DiskIndex: ~Copyable {
    struct Item {
        var bytes: Int
        var lastUse: UInt64
        var storedAt: Int64
        /// A large file's checksum was checked since start.
        var verified = false
        var tags: [String] = []
    }

    var entries: [String: [String: Item]] = [:]
    var totalBytes = 0
    var count = 0
    var clock: UInt64 = 0
    var rebuilt = false
    /// Sequence numbers: a remove after a queued write wins over it.
    var sequence: UInt64 = 0
    var tombstones: [String: UInt64] = [:]
    /// Purges, numbered from `sequence`: a write queued before one of them
    /// is dropped (or, soft, marked stale).
    var purges = PurgeLog()
    /// tag → keys with a file carrying it.
    var tagged: [String: Set<String>] = [:]

    init() {}

    mutating func put(key: String, name: String, bytes: Int, storedAt: Int64, tags: [String]) {
        remove(key: key, name: name)
        clock += 1
        add(key: key, name: name, Item(bytes: bytes, lastUse: clock, storedAt: storedAt, tags: tags))
    }

    mutating func insertIfAbsent(key: String, name: String, bytes: Int, storedAt: Int64, tags: [String]) {
        guard entries[key]?[name] == nil, (tombstones[key] ?? 0) == 0 else { return }
        // Entries found on disk are older than anything used since start.
        add(key: key, name: name, Item(bytes: bytes, lastUse: 0, storedAt: storedAt, tags: tags))
    }

    private mutating func add(key: String, name: String, _ item: Item) {
        entries[key, default: [:]][name] = item
        totalBytes += item.bytes
        count += 1
        for tag in item.tags { tagged[tag, default: []].insert(key) }
    }

    mutating func remove(key: String, name: String) {
        guard let item = entries[key]?.removeValue(forKey: name) else { return }
        let keyGone = entries[key]?.isEmpty == true
        if keyGone { entries[key] = nil }
        totalBytes -= item.bytes
        count -= 1
        for tag in item.tags {
            // Another variant of the key may still carry the tag.
            if !keyGone, entries[key]!.values.contains(where: { $0.tags.contains(tag) }) { continue }
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
    func files(matching scope: PurgeScope) -> [(key: String, name: String)] {
        let keys: [String]
        switch scope {
        case .key(let key): keys = entries[key] == nil ? [] : [key]
        case .tag(let tag): keys = tagged[tag].map(Array.init) ?? []
        case .prefix(let prefix): keys = entries.keys.filter { $0.hasPrefix(prefix) }
        case .all: keys = Array(entries.keys)
        }
        var files: [(key: String, name: String)] = []
        for key in keys {
            for (name, item) in entries[key] ?? [:] where scope.matches(key: key, tags: item.tags) { files.append((key, name)) }
        }
        return files
    }

    /// Removes entries older than their key's lifetime; returns their files.
    mutating func removeExpired(now: Int64, lifetime: (String) -> Int?) -> [(String, String)] {
        var expired: [(String, String)] = []
        for (key, files) in entries {
            guard let seconds = lifetime(key) else { continue }
            for (name, item) in files where now - item.storedAt > Int64(seconds) { expired.append((key, name)) }
        }
        for (key, name) in expired { remove(key: key, name: name) }
        return expired
    }

    /// Approximate LRU: past the limit, drop the least recently used (then
    /// oldest stored) until 95 % of the limit. Returns the files to delete.
    mutating func evict(limit: Int) -> [(String, String)] {
        guard totalBytes > limit else { return [] }
        var all: [(key: String, name: String, item: Item)] = []
        all.reserveCapacity(count)
        for (key, files) in entries { for (name, item) in files { all.append((key, name, item)) } }
        all.sort { ($0.item.lastUse, $0.item.storedAt) < ($1.item.lastUse, $1.item.storedAt) }
        var victims: [(String, String)] = []
        let target = limit / 100 * 95
        for victim in all where totalBytes > target {
            remove(key: victim.key, name: victim.name)
            victims.append((victim.key, victim.name))
        }
        return victims
    }
}

/// A bounded queue of disk operations for the writer thread.
final class WriteQueue: @unchecked Sendable {
    enum Op {
        case write(DiskRecord, UInt64)
        case streamOpen(UInt64, DiskRecord, UInt64)
        case streamAppend(UInt64, [UInt8])
        case streamFinish(UInt64)
        case streamAbort(UInt64)
    }

    private let condition = NSCondition()
    private var ops: [Op] = []
    private var head = 0
    private var queuedBytes = 0
    private var busy = false
    static let maxOps = 10_000
    static let maxBytes = 64 << 20

    /// `force`: queued even when full (small control ops that must not be lost).
    func push(_ op: Op, bytes: Int, force: Bool = false) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard force || (ops.count - head < Self.maxOps && queuedBytes + bytes <= Self.maxBytes) else { return false }
        ops.append(op)
        queuedBytes += bytes
        condition.broadcast()
        return true
    }

    func pop() -> Op {
        condition.lock()
        defer { condition.unlock() }
        while head == ops.count { condition.wait() }
        let op = ops[head]
        head += 1
        if head > 1024 { ops.removeFirst(head); head = 0 }
        switch op {
        case .write(let record, _): queuedBytes -= record.body.count
        case .streamAppend(_, let bytes): queuedBytes -= bytes.count
        default: break
        }
        busy = true
        return op
    }

    /// Marks the popped op finished; returns whether the queue is now empty.
    func done() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        busy = false
        condition.broadcast()
        return head == ops.count
    }

    func waitUntilEmpty(timeoutSeconds: Double) {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        while (head < ops.count || busy) && condition.wait(until: deadline) {}
    }
}
