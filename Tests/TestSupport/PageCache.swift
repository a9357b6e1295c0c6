#if canImport(Glibc)
import Glibc
#endif
import CEventLoop

/// The kernel's page cache, for tests of reads that must not wait for the
/// disk.
public enum PageCache {
    /// Writes the file back and drops its pages from the page cache; false
    /// when they stay (a tmpfs keeps every page in memory: nothing can be
    /// cold there) or the file cannot be opened. `probe`: the offset whose
    /// page is checked (pages a socket still holds, being sent, stay).
    @discardableResult
    public static func drop(_ path: String, probe: Int = 0) -> Bool {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        _ = fsync(fd)
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        // Asked with cachestat where the kernel has it: a read that misses,
        // even with RWF_NOWAIT, may start the kernel's readahead, and the
        // pages were back before the test read them (a rare failure).
        switch el_range_cached(fd, Int64(probe), 1) {
        case 0: return true
        case 1: return false
        default:
            var byte: UInt8 = 0
            return el_pread_nowait(fd, &byte, 1, Int64(probe)) < 0
        }
    }

    /// Whether a read that may not wait (RWF_NOWAIT) finds a file just
    /// dropped from the page cache still out, here and now: a twin file
    /// (`bytes` long) in `directory` is written, dropped and probed.
    /// Such a read still starts the kernel's readahead, and a virtual disk
    /// backed by the host's page cache can answer it before the read looks
    /// again: then nothing can be shown cold at this moment.
    public static func nowaitReadsFindDroppedPagesOut(in directory: String, bytes: Int = 20_000) -> Bool {
        let path = directory + "/.page-cache-twin"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd); unlink(path) }
        let data = [UInt8](repeating: 0x74, count: bytes)
        guard write(fd, data, data.count) == data.count, drop(path) else { return false }
        var buffer = [UInt8](repeating: 0, count: bytes)
        return el_pread_nowait(fd, &buffer, bytes, 0) < 0
    }
}
