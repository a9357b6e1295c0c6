import CacheStorage
import EventLoop
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// An open file whose bytes are being sent; closed when the last segment
/// using it is gone.
final class OpenFile {
    /// Kept open by this as long as the bytes wait.
    let file: StoredFile
    var fd: Int32 { file.fd.rawValue }
    /// Bytes up to here were found in the page cache (or loaded there, or
    /// cannot be told): sendfile may send them without waiting for the disk.
    var cachedUntil = 0
    init(_ file: StoredFile) { self.file = file }
}

/// Bytes waiting to go to a client socket. Memory segments point into
/// `Bytes` they keep alive (stored responses are written without copying);
/// file segments are sent with sendfile.
struct OutputQueue {
    private enum Source {
        case memory(Bytes)
        /// Part of a stored response's block (head prefix or body).
        case stored(CachedResponse)
        case file(OpenFile)

        var base: UnsafeRawPointer? {
            switch self {
            case .memory(let bytes): return bytes.pointer
            case .stored(let entry): return entry.blockStart
            case .file: return nil
            }
        }
    }

    private struct Segment {
        let source: Source
        /// `source.base`, read once (the flush reads it without touching the source).
        let base: UnsafeRawPointer?
        var offset: Int
        let end: Int

        init(source: Source, offset: Int, end: Int) {
            self.source = source
            base = source.base
            self.offset = offset
            self.end = end
        }
    }

    private var segments: [Segment] = []
    private var head = 0
    private(set) var pendingBytes = 0

    var isEmpty: Bool { pendingBytes == 0 }

    /// How a flush ended.
    enum Flushed {
        case done, wouldBlock
        /// The next bytes are a file's that are not in the page cache: they
        /// are to be loaded (`FilePages.load`) off the loop, then flushed.
        case waitsForDisk(OpenFile, offset: Int, count: Int)
    }

    /// A file's bytes are checked for the page cache this much at a time
    /// before sendfile sends them (about what a socket takes at once).
    static let cacheWindow = 1 << 20

    mutating func append(_ bytes: Bytes, from offset: Int = 0, to end: Int? = nil) {
        let end = end ?? bytes.count
        guard end > offset else { return }
        segments.append(Segment(source: .memory(bytes), offset: offset, end: end))
        pendingBytes += end - offset
    }

    /// Bytes `offset..<end` of a stored response's block (head prefix, then body).
    mutating func append(_ entry: CachedResponse, from offset: Int, to end: Int) {
        guard end > offset else { return }
        segments.append(Segment(source: .stored(entry), offset: offset, end: end))
        pendingBytes += end - offset
    }

    mutating func append(_ array: [UInt8]) {
        guard !array.isEmpty else { return }
        append(Bytes(array))
    }

    mutating func append(copying buffer: UnsafeRawBufferPointer) {
        guard buffer.count > 0 else { return }
        append(Bytes(buffer))
    }

    /// Bytes `offset..<end` of an open file.
    /// A stored response's bytes: its block's by reference, a file's as a
    /// file segment (sendfile, or read into a TLS or HTTP/2 output).
    @inline(__always)
    mutating func append(_ stored: StoredBytes) {
        switch stored {
        case .block(let entry, let range): append(entry, from: range.lowerBound, to: range.upperBound)
        case .file(let file, let range): append(file: OpenFile(file), from: range.lowerBound, to: range.upperBound)
        }
    }

    mutating func append(file: OpenFile, from offset: Int, to end: Int) {
        guard end > offset else { return }
        segments.append(Segment(source: .file(file), offset: offset, end: end))
        pendingBytes += end - offset
    }

    /// Writes as much as the socket takes. Returns false when it would block
    /// with bytes left (or waits for the disk); throws on a socket error.
    mutating func flush(to fd: Int32) throws(SystemError) -> Bool {
        var sent = 0
        if case .done = try flush(to: fd, sent: &sent) { return true }
        return false
    }

    /// The same, adding the bytes written to `sent`; stops before a file's
    /// bytes that are not in the page cache (sendfile would wait for them).
    mutating func flush(to fd: Int32, sent: inout Int) throws(SystemError) -> Flushed {
        guard head < segments.count else { return .done }
        // The iovec array lives on the stack: a heap array here cost a 1 KiB
        // allocation on every flush, that is, on every request.
        let flushed = try withUnsafeTemporaryAllocation(of: iovec.self, capacity: 64) { (iov) throws(SystemError) -> Flushed in
            try flush(to: fd, using: iov, sent: &sent)
        }
        if case .done = flushed { return flushed }
        keepBlocksWhileWaiting()
        return flushed
    }

    /// Stored responses whose bytes wait for the client hold their blocks
    /// from now on: a hit's response holds its worker's period token
    /// (`CachedResponse.owned()`), which would hold back the memory tier's
    /// freeing of what it drops for as long as the client takes.
    private mutating func keepBlocksWhileWaiting() {
        var i = head
        while i < segments.count {
            if case .stored(let entry) = segments[i].source, !entry.isOwned {  // (a retain each: only while waiting)
                segments[i] = Segment(source: .stored(entry.owned()), offset: segments[i].offset, end: segments[i].end)
            }
            i += 1
        }
    }

    private mutating func flush(to fd: Int32, using iov: UnsafeMutableBufferPointer<iovec>,
                                sent: inout Int) throws(SystemError) -> Flushed {
        while head < segments.count {
            let written: Int?
            if case .file(let file) = segments[head].source {
                let s = segments[head]
                if let wait = checkCached(file, s) { return wait }
                written = try Socket.sendfile(to: fd, from: file.fd, offset: s.offset,
                                              count: min(min(s.end, file.cachedUntil) - s.offset, 1 << 30))
                if written == 0 { throw SystemError(errno: EIO, operation: "sendfile (file shorter than expected)") }
            } else {
                // Gather memory segments up to the next file segment.
                var n = 0
                var i = head
                while i < segments.count && n < iov.count, let base = segments[i].base {
                    let s = segments[i]
                    iov[n] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + s.offset), iov_len: s.end - s.offset)
                    n += 1
                    i += 1
                }
                written = try Socket.writev(fd, iov.baseAddress!, count: Int32(n))
            }
            guard let written else { return .wouldBlock }
            consume(written, sent: &sent)
        }
        return .done
    }

    /// `written` bytes from the front have left.
    private mutating func consume(_ written: Int, sent: inout Int) {
        var remaining = written
        pendingBytes -= remaining
        sent += remaining
        while remaining > 0 && head < segments.count {
            let available = segments[head].end - segments[head].offset
            if remaining >= available {
                remaining -= available
                head += 1
            } else {
                segments[head].offset += remaining
                remaining = 0
            }
        }
        if head == segments.count {
            segments.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 64 {
            segments.removeFirst(head)
            head = 0
        }
    }

    /// Whether a file's bytes at `offset` may be read without waiting for
    /// the disk; nil when they can (the window is then marked), else what
    /// to load first.
    private func checkCached(_ file: OpenFile, _ s: Segment) -> Flushed? {
        guard s.offset >= file.cachedUntil else { return nil }
        let window = min(s.end - s.offset, Self.cacheWindow)
        switch FilePages.cached(file.fd, offset: s.offset, count: window) {
        case false?: return .waitsForDisk(file, offset: s.offset, count: window)
        case true?: file.cachedUntil = s.offset + window
        case nil: file.cachedUntil = Int.max  // cannot tell: sent as it comes
        }
        return nil
    }

    /// Writes as much as `stream` takes: to a plain socket gathered
    /// (writev, sendfile); through TLS the front bytes are gathered into
    /// `scratch` and encrypted from there. After a TLS write that would
    /// block, the next call gathers the same bytes again, as OpenSSL
    /// requires of a retried write.
    @inline(__always)  // (a plain stream's copy and its TLS reference's retain cost every hit's write)
    mutating func flush(to stream: ByteStream, scratch: inout [UInt8], sent: inout Int) throws(SystemError) -> Flushed {
        guard stream.isEncrypted else { return try flush(to: stream.fd, sent: &sent) }
        var flushed = Result<Flushed, SystemError>.success(.done)
        scratch.withUnsafeMutableBytes { buffer in
            flushed = Result { () throws(SystemError) -> Flushed in try flush(through: stream, buffer: buffer, sent: &sent) }
        }
        return try flushed.get()
    }

    private mutating func flush(through stream: ByteStream, buffer: UnsafeMutableRawBufferPointer,
                                sent: inout Int) throws(SystemError) -> Flushed {
        while head < segments.count {
            let n: Int
            switch try gather(into: buffer) {
            case .bytes(let count): n = count
            case .waits(let wait):
                keepBlocksWhileWaiting()
                return wait
            }
            guard let written = try stream.write(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) else {
                keepBlocksWhileWaiting()
                return .wouldBlock
            }
            consume(written, sent: &sent)
        }
        return .done
    }

    /// Takes up to `buffer.count` front bytes into `buffer` (an HTTP/2
    /// stream's DATA): how many, or what to load from the disk first.
    mutating func take(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Gathered {
        guard head < segments.count else { return .bytes(0) }
        let gathered = try gather(into: buffer)
        if case .bytes(let n) = gathered {
            var sent = 0
            consume(n, sent: &sent)
        }
        if head < segments.count { keepBlocksWhileWaiting() }
        return gathered
    }

    enum Gathered {
        case bytes(Int)
        case waits(Flushed)
    }

    /// Copies the front bytes into `buffer` without consuming them: memory
    /// copied, a file's read (up to the bytes known to be in the page
    /// cache; a window that is not stops it before it is read).
    private func gather(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Gathered {
        var n = 0
        var i = head
        while i < segments.count && n < buffer.count {
            let s = segments[i]
            let take = min(s.end - s.offset, buffer.count - n)
            if case .file(let file) = s.source {
                if s.offset >= file.cachedUntil {
                    if n > 0 { break }  // what is gathered goes first
                    if let wait = checkCached(file, s) { return .waits(wait) }
                }
                let want = min(take, file.cachedUntil - s.offset)
                let got = pread(file.fd, buffer.baseAddress! + n, want, off_t(s.offset))
                guard got > 0 else {
                    throw SystemError(errno: got < 0 ? errno : EIO, operation: "read (file shorter than expected)")
                }
                n += got
                if got < s.end - s.offset { break }
            } else {
                (buffer.baseAddress! + n).copyMemory(from: s.base! + s.offset, byteCount: take)
                n += take
                if take < s.end - s.offset { break }
            }
            i += 1
        }
        return .bytes(n)
    }

    mutating func removeAll() {
        segments.removeAll()
        head = 0
        pendingBytes = 0
    }
}
