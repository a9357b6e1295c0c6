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
            let sub = byte < 16 ? "0" + String(byte, radix: 16) : String(byte, radix: 16)
            for name in listFiles(subdirectory: sub) {
                let path = directory + "/" + sub + "/" + name
                if name.hasPrefix(".tmp-") {
                    // An interrupted write of an earlier run; ours are in progress.
                    if !name.hasPrefix(".tmp-" + instanceToken + "-") { try? DiskIO.remove(path) }
                    continue
                }
                guard name.hasSuffix(".lrd"), let fd = try? DiskIO.openForReading(path) else { continue }
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
        deleteFiles(state.withLock { index -> [(String, String)] in
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
