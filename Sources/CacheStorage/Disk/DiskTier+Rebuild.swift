import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The start-up index rebuild and the minute sweep of expired files.
extension DiskTier {
    // MARK: index rebuild

    func rebuildIndex() {
        for byte in 0..<256 {
            let sub = Self.subdirectory(byte)
            for listed in listFiles(subdirectory: sub) {
                let path = directory + "/" + sub + "/" + listed
                if listed.hasPrefix(".tmp-") {
                    // An interrupted write of an earlier run; ours are in progress.
                    if !listed.hasPrefix(".tmp-" + instanceToken + "-") { try? DiskIO.remove(path) }
                    continue
                }
                guard listed.hasSuffix(".lrd") else { continue }
                guard let name = FileName(listed), name.subdirectory == byte else {
                    // Not a name Larder gives: no lookup would ever find it.
                    fault("corrupt", "dropping misnamed cache file \(path)")
                    try? DiskIO.remove(path)
                    continue
                }
                guard let fd = try? DiskIO.openForReading(path) else { continue }
                defer { DiskIO.close(fd) }
                guard let (size, _, _, record) = readHead(fd) else {
                    fault("corrupt", "dropping unreadable cache file \(path)")
                    try? DiskIO.remove(path)
                    continue
                }
                state.withLock {
                    $0.insertIfAbsent(key: record.key, name: name, bytes: Self.charged(size), storedAt: record.storedAt, tags: record.tags)
                }
            }
        }
        deleteFiles(state.withLock { index -> [(String, FileName)] in
            index.rebuilt = true
            return index.evict(limit: limitBytes)
        })
    }

    /// Every minute, removes files past their disk_ttl.
    func sweepLoop() {
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
}
