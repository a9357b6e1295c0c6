import CacheStorage
import EventLoop
#if canImport(Glibc)
import Glibc
#endif

/// Bytes waiting to go to a client socket. Segments point into `Bytes`
/// they keep alive (stored responses are written without copying).
struct OutputQueue {
    private struct Segment {
        let owner: Bytes
        var offset: Int
        let end: Int
    }

    private var segments: [Segment] = []
    private var head = 0
    private(set) var pendingBytes = 0

    var isEmpty: Bool { pendingBytes == 0 }

    mutating func append(_ bytes: Bytes, from offset: Int = 0, to end: Int? = nil) {
        let end = end ?? bytes.count
        guard end > offset else { return }
        segments.append(Segment(owner: bytes, offset: offset, end: end))
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

    /// Writes as much as the socket takes. Returns false when it would block
    /// with bytes left; throws on a socket error.
    mutating func flush(to fd: Int32) throws(SystemError) -> Bool {
        let maxIov = 64
        var iov = [iovec](repeating: iovec(), count: maxIov)
        while head < segments.count {
            var n = 0
            var i = head
            while i < segments.count && n < maxIov {
                let s = segments[i]
                iov[n] = iovec(iov_base: UnsafeMutableRawPointer(mutating: s.owner.pointer + s.offset),
                               iov_len: s.end - s.offset)
                n += 1
                i += 1
            }
            let written = try iov.withUnsafeBufferPointer { (p) throws(SystemError) -> Int? in
                try Socket.writev(fd, p.baseAddress!, count: Int32(n))
            }
            guard var remaining = written else { return false }
            pendingBytes -= remaining
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
            if head == segments.count || head > 64 {
                segments.removeFirst(head)
                head = 0
            }
        }
        return true
    }

    mutating func removeAll() {
        segments.removeAll()
        head = 0
        pendingBytes = 0
    }
}
