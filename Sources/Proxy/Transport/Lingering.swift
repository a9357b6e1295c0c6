import EventLoop

/// A connection whose last bytes are written, its sending side shut down:
/// what the client still sends is read and discarded, bounded in time and
/// bytes, before the close. Closed with unread input, a socket resets the
/// connection, and the client's kernel drops what it had received but not
/// yet handed to the client (an HTTP/2 client opening its window as it
/// reads lost the last DATA frames of its streams on SIGTERM).
struct Lingering {
    static let milliseconds: UInt64 = 2_000
    static let maxBytes = 1 << 20
    private(set) var bytes = 0

    /// Reads and discards what has come; true once the connection may
    /// close (the client closed too, an error, or over the bound).
    mutating func discard(_ fd: Int32, into scratch: inout [UInt8]) -> Bool {
        for _ in 0..<4 {
            let n: Int?
            do {
                n = try scratch.withUnsafeMutableBytes { (buffer) throws(SystemError) -> Int? in try Socket.read(fd, into: buffer) }
            } catch {
                return true
            }
            guard let n else { return false }
            bytes += n
            if n == 0 || bytes > Self.maxBytes { return true }
        }
        return false
    }
}
