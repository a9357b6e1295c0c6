import CacheSemantics
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The room the file system under the cache directory has left. A
/// `disk_limit` larger than the file system (or a file system other data
/// fills) would make every store fail once it is full; instead the tier
/// keeps below what the file system can hold, evicting its least recently
/// used files to make room, as nginx's `min_free` does.
public struct DiskSpace: Sendable {
    /// The file system's bytes free to unprivileged users; nil when it
    /// cannot tell (then only `disk_limit` applies).
    public typealias Probe = @Sendable (String) -> Int?

    public static let statvfsProbe: Probe = { path in
        var figures = statvfs()
        guard statvfs(path, &figures) == 0 else { return nil }
        let (bytes, overflow) = Int(figures.f_bavail).multipliedReportingOverflow(by: Int(figures.f_frsize))
        return overflow ? .max : bytes
    }

    /// The most the tier may hold: what it holds plus what is still free,
    /// never above `limit`. No reserve of its own: eviction goes to 95 % of
    /// this, which leaves a twentieth free, and a file system that other
    /// data fills makes it smaller (below what the tier holds, so it
    /// shrinks) only once it is full.
    static func ceiling(limit: Int, storedBytes: Int, available: Int) -> Int {
        max(0, min(limit, storedBytes.plusSaturating(max(0, available))))
    }
}

extension DiskTier {
    /// The limit the tier keeps to now: `limitBytes`, or less while the file
    /// system has less room (`DiskSpace`).
    var keptLimit: Int { spaceLimit.load(ordering: .relaxed) }

    /// Asks the file system how much room is left and evicts down to it
    /// (writer thread, after each write is indexed; a statvfs is about a
    /// microsecond beside the write's own calls). Only once the index is
    /// complete: before, what it holds is less than the directory holds,
    /// and files would go that need not (a write that fails then is logged).
    func checkSpace(afterFailure: Bool = false) {
        guard let room = spaceProbe(directory),
              let (limit, victims) = state.withLock({ index -> (Int, [(String, FileName)])? in
                  guard index.rebuilt else { return nil }
                  var limit = DiskSpace.ceiling(limit: limitBytes, storedBytes: index.totalBytes, available: room)
                  // A write failed for want of space: less than what is held, so some goes.
                  if afterFailure { limit = min(limit, index.totalBytes - 1) }
                  return (limit, index.evict(limit: limit))
              })
        else { return }
        let previous = spaceLimit.exchange(limit, ordering: .relaxed)
        deleteFiles(victims)
        if limit < limitBytes && (previous == limitBytes || afterFailure) {
            fault("space", "the file system under \(directory) has room for about \(limit) bytes of responses, "
                  + "below disk_limit (\(limitBytes)): keeping to that, the least recently used files make room")
        }
    }

    /// Before a write of `bytes`: when the file system has less room than
    /// that (eviction leaves only a twentieth of the limit free), the least
    /// recently used files go first, so the write at hand, the newest
    /// response, is not the one ENOSPC loses.
    func makeRoom(for bytes: Int) {
        guard let room = spaceProbe(directory), room < bytes else { return }
        let victims = state.withLock { index -> [(String, FileName)] in
            guard index.rebuilt else { return [] }
            return index.evict(limit: max(0, index.totalBytes - (bytes - room)))
        }
        deleteFiles(victims)
    }

    /// A write failed with ENOSPC (what the file system said free was not
    /// free to this file): make room now, a twentieth of what is held.
    func ranOutOfSpace(_ error: Errno) {
        if error == .noSpace { checkSpace(afterFailure: true) }
    }
}
