import Clocks
import FoundationEssentials
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Reading: a hit on a file kept open is served as stored; others are read
/// (from the page cache only on a worker's loop), verified once and kept.
extension DiskTier {
    // MARK: reading

    /// Every stored variant of `key`. Files that fail are deleted and count
    /// as misses.
    ///
    /// A file kept open since an earlier hit is served as stored: its
    /// response, decoded then, with the body left in the file. Another
    /// indexed file is one open and one read of the size the index knows
    /// (no stat); its checksum is checked the first time only (a later
    /// corruption that keeps the size is not caught: the price of not
    /// summing every hit), and it is kept while `disk_open_files` allows.
    public func lookup(_ key: String) -> Variants { responses(HashedKey(key))?.variants ?? Variants() }

    public func lookup(_ key: String, hash: Int) -> Variants { responses(HashedKey(key, hash: hash))?.variants ?? Variants() }

    /// The lookup as a worker's loop may make it: nil, having found
    /// nothing, where it would wait for the disk (a small file not wholly in
    /// the page cache, a large file's head, a sub-directory not listed yet
    /// during the start-up rebuild); `lookup` on an I/O thread does it then.
    public func lookupWithoutBlocking(_ key: String, hash: Int) -> Variants? {
        responses(HashedKey(key, hash: hash), mayBlock: false)?.variants
    }

    /// The records behind `lookup` (tests read these).
    func records(_ key: String) -> [DiskRecord] {
        (responses(HashedKey(key))?.variants ?? Variants()).map { found in
            let entry = found.inMemory() ?? found
            var record = DiskRecord(head: entry.storedHead, storedAt: 0, body: Array(entry.body))
            record.bodyFile = entry.bodyFile
            return record
        }
    }

    /// Nil only when `mayBlock` is false and the disk would be waited for.
    func responses(_ hashed: HashedKey, mayBlock: Bool = true) -> Variants.Builder? {
        let key = hashed.key
        // Read before the lookup: once the rebuild is done, every file is
        // indexed, so a key the index lacks has none.
        let rebuilt = self.files.rebuilt.load(ordering: .acquiring)
        let now = DiskIndex.now()
        var files = Uses()
        switch self.files.hit(hashed, overheadBytes: Self.overheadBytes, now: now) {
        case .asStored(let head, let storedAt, let name, let id)?:
            var found = Variants.Builder()
            if !expired(key, storedAt: storedAt, name: name, id: id) { found.append(head) }
            return found
        case .files(let uses)?: files = uses
        case nil: break
        }
        let indexed = !files.isEmpty || rebuilt
        if !indexed {
            // Still rebuilding: look at the files themselves.
            let hash = Self.keyHashValue(key)
            let byte = FileName.subdirectory(ofKey: hash)
            guard mayBlock || isListed(byte) else { return nil }
            files = Uses(listedNames(byte).filter { $0.key == hash }.map { ($0, nil, false, 0, nil) })
        }
        var found = Variants.Builder()
        for file in files {
            let name = file.name
            // A kept file whose response was read once: served as stored.
            // (One whose file was deleted or replaced by hand since is not:
            // at most one fstat a second instead of an open and a close per hit.)
            let kept = file.kept.flatMap { $0.isLinked(now: now, recheckNanoseconds: self.files.recheckNanoseconds) ? $0 : nil }
            if let kept, let head = kept.head {
                guard !expired(key, storedAt: kept.storedAt, name: name, id: file.id) else { continue }
                found.append(head)
                continue
            }
            guard mayBlock || file.size != nil else { return nil }
            guard let size = file.size ?? fileSize(path(of: name)) else {
                state.withLock { _ = $0.remove(key: key, name: name, id: file.id) }
                continue
            }
            if size > Self.inlineReadLimit {
                guard mayBlock else { return nil }
                if let entry = openLarge(key: key, name: name, size: size, indexed: indexed, id: file.id, replacing: file.kept, now: now) {
                    found.append(entry)
                }
                continue
            }
            // Newly opened and keepable: decoded as it will be kept (the
            // body left in the file), else whole (and closed after the read).
            let fd: FileDescriptor, stored: StoredFile?
            if let kept {
                (fd, stored) = (kept.fd, nil)
            } else {
                switch openStored(name) {
                case .file(let opened): fd = opened
                case .gone:
                    state.withLock { _ = $0.remove(key: key, name: name, id: file.id) }
                    continue
                case .short: continue
                }
                stored = self.files.mayKeep(id: file.id, replacing: file.kept) ? StoredFile(fd, path: path(of: name)) : nil
            }
            let read = withExtendedLifetime(kept) {
                readFile(named: name, size: size, from: fd, mayBlock: mayBlock) { bytes in
                    Result { () throws(DiskFormat.Failure) in
                        try DiskFormat.decodeEntry(bytes, key: key, verify: !file.verified, bodyIn: stored)
                    }
                }
            }
            if kept == nil && stored == nil { DiskIO.close(fd) }
            let decoded: Result<(storedAt: Int64, entry: CachedResponse)?, DiskFormat.Failure>
            switch read {
            case .read(let result): decoded = result
            case .wouldBlock: return nil
            case .unreadable:
                state.withLock { _ = $0.remove(key: key, name: name, id: file.id) }
                continue
            }
            do {
                guard let (storedAt, entry) = try decoded.get() else { continue }  // a hash collision: another key's file
                guard !expired(key, storedAt: storedAt, name: name, id: file.id) else { continue }
                // Still rebuilding: a file a purge of this run matches is not served (and goes).
                guard indexed || !state.withLock({ $0.purgedSinceStart(key: key, tags: entry.tags) }) else {
                    discard(path(of: name))
                    continue
                }
                if !file.verified {
                    if !indexed {
                        state.withLock {
                            $0.insertIfAbsent(key: key, name: name, bytes: Self.charged(size), storedAt: storedAt, tags: entry.tags)
                        }
                    }
                    self.files.setVerified(key, name)
                }
                if let stored {
                    // Kept for the next hits once the file proved good.
                    self.files.keep(stored, head: entry.bodyFile == nil ? nil : entry, storedAt: storedAt, key: key, name: name,
                                    id: file.id, replacing: file.kept, openedAt: now)
                }
                found.append(entry)
            } catch {
                // (Unless stored again meanwhile: then the file under this name is another.)
                if state.withLock({ $0.remove(key: key, name: name, id: file.id) }) || file.id == 0 {
                    fault("corrupt", "dropping unreadable cache file \(path(of: name)): \(error)")
                    discard(path(of: name))
                }
            }
        }
        return found
    }

    /// Whether a file of `key` stored at `storedAt` is past its disk_ttl;
    /// then it goes (unless stored again meanwhile: then the file is another).
    @inline(__always)
    func expired(_ key: String, storedAt: Int64, name: FileName, id: UInt64) -> Bool {
        guard lifetimeSeconds != nil || !rules.isEmpty else { return false }  // no disk_ttl: the usual case
        return expiredByRule(key, storedAt: storedAt, name: name, id: id)
    }

    private func expiredByRule(_ key: String, storedAt: Int64, name: FileName, id: UInt64) -> Bool {
        guard let lifetime = lifetime(for: key), clock.now().minusSaturating(storedAt) > Int64(lifetime) else { return false }
        // (Deleted by the writer: a lookup on a worker's loop unlinks nothing.)
        if state.withLock({ $0.remove(key: key, name: name, id: id) }) || id == 0 { discard(path(of: name)) }
        return true
    }

    /// Files larger than this are not read into memory: their body is
    /// served from the file (sendfile).
    public static let inlineReadLimit = 1 << 20

    func fileSize(_ path: String) -> Int? { DiskIO.size(atPath: path) }
}
