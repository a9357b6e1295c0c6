#if canImport(Glibc)
import Glibc
#endif
import CEventLoop

/// Whether a file's bytes are in the page cache, so that a read or a
/// sendfile of them does not wait for the disk; and loading them there (on
/// a thread that may wait).
public enum FilePages {
    /// Whether bytes `offset..<offset + count` are all in the page cache
    /// (nil: cannot tell).
    public static func cached(_ fd: Int32, offset: Int, count: Int) -> Bool? {
        switch el_range_cached(fd, Int64(offset), count) {
        case 1: return true
        case 0: return false
        default: return nil
        }
    }

    /// Reads bytes `offset..<offset + count` once, so that they are in the
    /// page cache: waits for the disk (an I/O thread's job, never a loop's).
    /// Returns the bytes read (fewer at the end of the file, or on an error).
    @discardableResult
    public static func load(_ fd: Int32, offset: Int, count: Int) -> Int {
        _ = posix_fadvise(fd, off_t(offset), off_t(count), POSIX_FADV_WILLNEED)
        let piece = 256 << 10
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: piece, alignment: 16)
        defer { buffer.deallocate() }
        var done = 0
        while done < count {
            let n = pread(fd, buffer, min(piece, count - done), off_t(offset + done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        return done
    }
}
