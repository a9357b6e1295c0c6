import Synchronization
import SystemPackage

/// A stored file kept open between hits, with the response it holds
/// read once: a later hit is served as stored (the head as it lies in the
/// file, decoded once; the body from the descriptor), with no path walk,
/// open, read, decode or allocation. It hangs on the file's index entry
/// and goes with it (removed or replaced by a newer file); the descriptor
/// closes when the last holder lets go, a client still being sent the body
/// included. An open descriptor reads the file it was opened on, so a
/// newer file under the same name is a new entry with its own.
final class KeptFile: Sendable {
    let file: StoredFile
    /// The response with its body in `file` (nil: read the file each hit,
    /// as for a stored piece of a range, whose body must be in memory).
    let head: CachedResponse?
    /// When the response was stored (wall seconds: disk_ttl).
    let storedAt: Int64
    private let count: KeptCount
    /// When its file was last seen still under its name (`DiskIndex.now()`).
    private let linkedAt: Atomic<UInt64>

    var fd: FileDescriptor { file.fd }

    /// `linkedAt`: when it was opened by its name.
    init(_ file: StoredFile, head: CachedResponse? = nil, storedAt: Int64 = 0, count: KeptCount, linkedAt: UInt64) {
        self.file = file
        self.head = head
        self.storedAt = storedAt
        self.count = count
        self.linkedAt = Atomic(linkedAt)
        count.value.wrappingAdd(1, ordering: .relaxed)
    }

    /// Whether its file is still under its name (not deleted nor replaced
    /// by hand: Larder's own removals and writes drop the entry first).
    /// Asked of the file system (one `fstat`, ~0.5 µs, a tenth of a memory
    /// hit) at most once per `recheckNanoseconds`; in between, the last
    /// answer stands, as nginx's `open_file_cache_valid` lets it.
    func isLinked(now: UInt64, recheckNanoseconds: UInt64) -> Bool {
        if isTrusted(now: now, recheckNanoseconds: recheckNanoseconds) { return true }
        guard DiskIO.isLinked(file.fd) else { return false }
        linkedAt.store(now, ordering: .relaxed)
        return true
    }

    /// Seen linked within the window: no need to ask (and no system call).
    @inline(__always)
    func isTrusted(now: UInt64, recheckNanoseconds: UInt64) -> Bool {
        now &- linkedAt.load(ordering: .relaxed) < recheckNanoseconds
    }

    deinit { count.value.wrappingSubtract(1, ordering: .relaxed) }
}

/// How many descriptors a tier keeps open.
final class KeptCount: Sendable {
    let value = Atomic<Int>(0)
}
