import EventLoop

/// A connection whose last bytes are written, its sending side shut down
/// (`ByteStream.shutdown`): what the client still sends is read and
/// discarded, bounded in time and bytes, before the close. Closed with
/// unread input, a socket resets the connection, and the client's kernel
/// drops what it had received but not yet handed to the client (an HTTP/2
/// client opening its window as it reads lost the last DATA frames of its
/// streams on SIGTERM).
public struct Lingering: Equatable {
    /// How long it may last, and how much it reads.
    public let milliseconds: UInt64
    public let maxBytes: Int
    public private(set) var bytes = 0

    /// After an HTTP/1.1 answer (an error, or Connection: close) the client
    /// may still be sending a body.
    public static let afterAnswer = Lingering(milliseconds: 5_000, maxBytes: 8 << 20)
    /// After an HTTP/2 session ended: its last frames are read.
    public static let afterSession = Lingering(milliseconds: 2_000, maxBytes: 1 << 20)

    public init(milliseconds: UInt64, maxBytes: Int) {
        self.milliseconds = milliseconds
        self.maxBytes = maxBytes
    }

    /// Reads and discards what has come (as it is on the socket: TLS
    /// records are not opened); true once the connection may close (the
    /// client closed too, an error, or over the bound).
    public mutating func discard(_ stream: ByteStream, into scratch: inout [UInt8]) -> Bool {
        for _ in 0..<4 {
            let n: Int?
            do {
                n = try scratch.withUnsafeMutableBytes { (buffer) throws(SystemError) -> Int? in try Socket.read(stream.fd, into: buffer) }
            } catch {
                return true
            }
            guard let n else { return false }
            bytes += n
            if n == 0 || bytes > maxBytes { return true }
        }
        return false
    }
}
