import CEventLoop
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A stored file open for reading, shared by whatever holds its body
/// (`FileBody`): the disk tier's index while it keeps the file open for
/// hits, and each client still being sent it. Closed when the last lets go.
public final class StoredFile: Sendable {
    public let fd: FileDescriptor
    /// Where it was opened (for messages: it may have been replaced since).
    public let path: String

    /// Takes `fd` over: it is closed with this object.
    public init(_ fd: FileDescriptor, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Opens `path` (tests, tools); nil when it cannot.
    public convenience init?(opening path: String) {
        guard let fd = try? DiskIO.openForReading(path) else { return nil }
        self.init(fd, path: path)
    }

    /// The file's size now (nil on an error).
    public var size: Int? { try? DiskIO.size(fd) }

    deinit { DiskIO.close(fd) }
}

extension FileBody {
    /// A body in `path` (tests, tools); nil when it cannot be opened.
    public init?(opening path: String, offset: Int, length: Int) {
        guard let file = StoredFile(opening: path) else { return nil }
        self.init(file: file, offset: offset, length: length)
    }

    /// What became of reading a body whole into memory.
    public enum Read {
        case bytes(Bytes)
        /// Asked not to wait for the disk, and the bytes are not all in the page cache.
        case wouldBlock
        /// The file is shorter than recorded, or cannot be read.
        case failed
    }

    /// The body read whole into one block (a small body goes into memory
    /// so); `cachedOnly`: only from the page cache (a worker's loop), else
    /// `.wouldBlock`.
    public func read(cachedOnly: Bool) -> Read {
        var outcome = Read.failed
        let bytes = Bytes(count: length) { buffer -> Bool in
            switch read(into: buffer, cachedOnly: cachedOnly) {
            case .read: return true
            case .wouldBlock: outcome = .wouldBlock
            case .failed: break
            }
            return false
        }
        return bytes.map { .bytes($0) } ?? outcome
    }

    public enum ReadInto { case read, wouldBlock, failed }

    /// The body read whole into `buffer` (`length` bytes), as `read(cachedOnly:)`
    /// (a disk hit's small body, straight into a client's output).
    public func read(into buffer: UnsafeMutableRawBufferPointer, cachedOnly: Bool) -> ReadInto {
        precondition(buffer.count == length, "a body is read whole")
        do throws(Errno) {
            guard cachedOnly else { return try DiskIO.read(file.fd, into: buffer, at: offset) == length ? .read : .failed }
            guard let n = try DiskIO.readCached(file.fd, into: buffer, at: offset) else { return .wouldBlock }
            if n == length { return .read }
            // Part of it cached, or a file cut short behind Larder's back.
            return isReadable ? .wouldBlock : .failed
        } catch {
            return .failed
        }
    }

    /// Whether the file still holds the whole body (one fstat).
    public var isReadable: Bool { (file.size ?? 0) >= offset + length }
}

/// A body stored in a file, read piece by piece (a stored gzip body decoded
/// for a client as it drains); the file stays open while this lives.
public final class FileBodyReader {
    public let body: FileBody
    private var fd: FileDescriptor { body.file.fd }

    /// nil when the file is shorter than recorded.
    public init?(_ body: FileBody) {
        guard body.isReadable else { return nil }
        self.body = body
    }

    /// Up to `buffer.count` bytes of the body from `position` (0 is its
    /// first byte): how many were read (0 at its end); nil on a read error.
    public func read(from position: Int, into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let count = min(buffer.count, body.length - position)
        guard count > 0 else { return 0 }
        return try? DiskIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]), at: body.offset + position)
    }

    /// Whether `count` bytes of the body from `position` are in the page
    /// cache, so that reading them does not wait for the disk (true when
    /// that cannot be told).
    public func isCached(from position: Int, count: Int) -> Bool {
        let position = max(0, position), count = min(count, body.length - max(0, position))
        guard count > 0 else { return true }
        return el_range_cached(fd.rawValue, Int64(body.offset + position), count) != 0
    }

    /// The same, from the page cache only: `.wouldBlock` when the bytes at
    /// `position` are not there (the caller reads them where it may wait).
    public func readCached(from position: Int, into buffer: UnsafeMutableRawBufferPointer) -> CachedRead {
        let count = min(buffer.count, body.length - position)
        guard count > 0 else { return .read(0) }
        do throws(Errno) {
            guard let n = try DiskIO.readCached(fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]),
                                                at: body.offset + position) else { return .wouldBlock }
            return n > 0 ? .read(n) : .failed
        } catch {
            return .failed
        }
    }

    public enum CachedRead: Equatable {
        case read(Int)
        case wouldBlock
        case failed
    }
}

extension CachedResponse {
    /// The same response with its body in memory when that is in a file of
    /// at most `DiskTier.inlineReadLimit` bytes (a disk hit kept as stored,
    /// going into the memory tier, the fleet or a new file); a larger one
    /// stays in its file, and one without a file is itself. nil when the
    /// file cannot be read now (`mayBlock` false: not in the page cache).
    public func inMemory(mayBlock: Bool = true) -> CachedResponse? {
        guard let file = bodyFile, file.length <= DiskTier.inlineReadLimit else { return self }
        guard case .bytes(let bytes) = file.read(cachedOnly: !mayBlock) else { return nil }
        return CachedResponse.make(head: storedHead, body: bytes.buffer)
    }

    /// The body's bytes as memory would hold them: in memory, or a small
    /// file's (read in when stored there); nil for a body that stays in its file.
    var residentBodyBytes: Int? {
        let length = bodyLength
        return !hasBodyFile || length <= DiskTier.inlineReadLimit ? length : nil
    }
}
