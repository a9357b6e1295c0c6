import Clocks
import FoundationEssentials
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// The start-up index rebuild and the minute sweep of expired files.
extension DiskTier {
    // MARK: index rebuild

    func rebuildIndex() {
        var large: [(key: String, name: FileName, path: String)] = []
        let started = ContinuousClock.now
        var idle = true
        for byte in 0..<256 {
            if idle, ContinuousClock.now - started > .seconds(1) {
                lowerThreadPriority(idle: false)
                idle = false
            }
            let sub = Self.subdirectory(byte)
            let (listing, names, before) = listNames(byte)
            rebuildListings.withLock { if $0[byte] == nil { $0[byte] = names } }
            // Recorded for the next start unless this loop changes the directory.
            var removed = false
            defer { if !removed { record(names, of: byte, listedAt: before) } }
            for listed in listing {
                let path = directory + "/" + sub + "/" + listed
                if listed.hasPrefix(".tmp-") {
                    // An interrupted write of an earlier run; ours are in progress.
                    if !listed.hasPrefix(".tmp-" + instanceToken + "-") { try? DiskIO.remove(path); removed = true }
                    continue
                }
                if listed.hasSuffix(".gone") {
                    // Removed, and not yet deleted when an earlier run stopped (or by ours: it goes either way).
                    try? DiskIO.remove(path)
                    removed = true
                    continue
                }
                guard listed.hasSuffix(".lrd") else { continue }
                guard let name = FileName(listed), name.subdirectory == byte else {
                    // Not a name Larder gives: no lookup would ever find it.
                    fault("corrupt", "dropping misnamed cache file \(path)")
                    try? DiskIO.remove(path)
                    removed = true
                    continue
                }
                guard let fd = try? DiskIO.openForReading(path) else { continue }
                defer { DiskIO.close(fd) }
                guard let (size, _, _, record) = readHead(fd) else {
                    fault("corrupt", "dropping unreadable cache file \(path)")
                    try? DiskIO.remove(path)
                    removed = true
                    continue
                }
                let purged = state.withLock { index -> Bool in
                    guard !index.purgedSinceStart(key: record.key, tags: record.tags) else { return true }
                    index.insertIfAbsent(key: record.key, name: name, bytes: Self.charged(size), storedAt: record.storedAt, tags: record.tags)
                    return false
                }
                if purged {
                    try? DiskIO.remove(path)
                    removed = true
                    continue
                }
                BodyKeyedEntries.note(record.key)
                if size > Self.inlineReadLimit { large.append((record.key, name, path)) }
            }
        }
        deleteFiles(state.withLock { index -> [(String, FileName)] in
            index.rebuilt = true
            index.purgedWhileRebuilding = PurgedScopes()
            return index.evict(limit: limitBytes)
        })
        checkSpace()
        rebuildListings.withLock { $0 = [] }
        verifyLargeFiles(large)
    }

    /// A sub-directory's stored files while the rebuild runs, listed once.
    /// Whether sub-directory `byte`'s listing is at hand (no directory read).
    func isListed(_ byte: Int) -> Bool {
        rebuildListings.withLock { $0.indices.contains(byte) && $0[byte] != nil }
    }

    func listedNames(_ byte: Int) -> [FileName] {
        if let listed = rebuildListings.withLock({ $0.indices.contains(byte) ? $0[byte] : nil }) { return listed }
        let names = snapshotNames(byte) ?? listNames(byte).names
        rebuildListings.withLock { if $0.indices.contains(byte), $0[byte] == nil { $0[byte] = names } }
        return names
    }

    /// Large files' checksums, checked here on the rebuild's thread once the
    /// index serves, so that a first hit after a start does not read a
    /// whole large file on a worker's loop first (a hit that comes sooner
    /// still checks it itself). A file that fails is dropped.
    private func verifyLargeFiles(_ large: [(key: String, name: FileName, path: String)]) {
        for file in large where !files.isVerified(file.key, file.name) {
            guard let fd = try? DiskIO.openForReading(file.path) else { continue }  // removed meanwhile
            defer { DiskIO.close(fd) }
            guard let (_, h, meta, _) = readHead(fd) else { continue }
            if let failure = bodyChecksumFailure(fd, header: h, meta: meta) {
                fault("corrupt", "dropping unreadable cache file \(file.path): \(failure)")
                try? DiskIO.remove(file.path)
                state.withLock { _ = $0.remove(key: file.key, name: file.name) }
            } else {
                files.setVerified(file.key, file.name)
            }
        }
    }

    /// Every minute, removes files past their disk_ttl.
    func sweepLoop() {
        while true {
            sleep(60)
            _ = retryUndeleted()
            let now = clock.now()
            let fallback = lifetimeSeconds
            guard !rules.isEmpty || fallback != nil else { continue }
            deleteFiles(state.withLock { $0.removeExpired(now: now) { rules.diskLifetime($0) ?? fallback } })
        }
    }
}
