import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The start-up index rebuild and the minute sweep of expired files.
extension DiskTier {
    // MARK: index rebuild

    func rebuildIndex() {
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
