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
    /// The file system's bytes free to unprivileged users and its size;
    /// nil when it cannot tell (then only `disk_limit` applies).
    public typealias Probe = @Sendable (String) -> (available: Int, size: Int)?

    public static let statvfsProbe: Probe = { path in
        var figures = statvfs()
        guard statvfs(path, &figures) == 0 else { return nil }
        let unit = Int(figures.f_frsize)
        return (Int(figures.f_bavail).multipliedReportingOverflow(by: unit).partialValue,
                Int(figures.f_blocks).multipliedReportingOverflow(by: unit).partialValue)
    }

    /// The most the tier may hold: what it holds plus what is free beyond a
    /// reserve (a 32nd of the file system, at most 64 MiB, so writes
    /// under way and other users are not starved), never above `limit`. Below
    /// what it holds when the file system is fuller than the reserve allows.
    static func ceiling(limit: Int, storedBytes: Int, available: Int, size: Int) -> Int {
        let reserve = min(size / 32, 64 << 20)
        return max(0, min(limit, storedBytes.plusSaturating(available.minusSaturating(reserve))))
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
                  let limit = DiskSpace.ceiling(limit: limitBytes, storedBytes: index.totalBytes, available: room.available,
                                                size: room.size)
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

    /// A write failed with ENOSPC: make room now rather than at the next write.
    func ranOutOfSpace(_ error: Errno) {
        if error == .noSpace { checkSpace(afterFailure: true) }
    }
}
