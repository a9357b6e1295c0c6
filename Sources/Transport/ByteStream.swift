import EventLoop
#if canImport(Glibc)
import Glibc
#endif
import TLS

/// The bytes of one client connection, as they come or through TLS: the
/// one read, write, handshake and shutdown under every protocol (HTTP/1.1,
/// HTTP/2, the admin API). Nothing above it knows whether a connection is
/// encrypted, except to log or count it. A value: its TLS session is the
/// one shared state, and it is used on its connection's loop only.
public struct ByteStream {
    public let fd: Int32
    /// The TLS session, while the connection speaks TLS.
    public private(set) var tls: TLSSession?
    /// TLS: whether the first byte was looked at (a handshake record, or plain text).
    private var sniffed = false

    public init(fd: Int32, tls: TLSSession? = nil) {
        self.fd = fd
        self.tls = tls
    }

    /// Whether the bytes go through TLS.
    public var isEncrypted: Bool { tls != nil }
    /// Plain, or TLS with its handshake done.
    public var isOpen: Bool { tls?.established ?? true }
    /// The last TLS read or write waits for the socket to take bytes: the
    /// connection wants write readiness even with nothing of its own to send.
    public var wantsWrite: Bool { tls?.wantsWrite == true }

    /// How the opening of a stream (the TLS handshake) went.
    public enum Opening: Equatable {
        /// Bytes may be read and written (the handshake is done, or none is needed).
        case open
        /// The handshake waits for the socket to be readable (or writable).
        case wantRead, wantWrite
        /// The client spoke plain text to a TLS port: the stream is plain
        /// from now on, for the answer that says so.
        case plainText
        /// The client closed, or the handshake failed (why).
        case closed
        case failed(String)
    }

    /// The next step of the opening. A TLS connection starts with a
    /// handshake record (0x16): anything else is plain text, reported once.
    public mutating func open() -> Opening {
        guard let tls, !tls.established else { return .open }
        if !sniffed {
            let first: Int?
            do { first = try Socket.peek(fd) } catch { return .closed }
            guard let first else { return .wantRead }
            if first < 0 { return .closed }
            guard first == 0x16 else {
                self.tls = nil
                return .plainText
            }
            sniffed = true
        }
        switch tls.handshake() {
        case .done: return .open
        case .wantRead: return .wantRead
        case .wantWrite: return .wantWrite
        case .failed(let why): return .failed(why)
        }
    }

    /// Bytes read into `buffer`: a count (0: the client closed), or nil
    /// when there are none for now.
    @inlinable
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        guard let tls else { return try Socket.read(fd, into: buffer) }
        do {
            return try tls.read(into: buffer)
        } catch {
            throw SystemError(errno: EPROTO, operation: "TLS read (\(error))")
        }
    }

    /// Writes bytes: how many were taken, or nil when the socket takes no
    /// more (through TLS, call again with the same bytes).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(SystemError) -> Int? {
        guard let tls else {
            var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count)
            return try Socket.writev(fd, &iov, count: 1)
        }
        do {
            return try tls.write(bytes)
        } catch {
            throw SystemError(errno: EPROTO, operation: "TLS write (\(error))")
        }
    }

    /// Writes gathered pieces (`iov`): how many bytes were taken, or nil
    /// when the socket takes no more. Through TLS the first piece alone is
    /// written (a count short of the whole, as a partial writev is).
    public func write(gathering iov: UnsafeMutableBufferPointer<iovec>) throws(SystemError) -> Int? {
        guard tls != nil else { return try Socket.writev(fd, iov.baseAddress!, count: Int32(iov.count)) }
        guard let first = iov.first(where: { $0.iov_len > 0 }) else { return 0 }
        return try write(UnsafeRawBufferPointer(start: first.iov_base, count: first.iov_len))
    }

    /// How a round of reads ended.
    public enum Reads: Equatable {
        /// Nothing more for now (or the round's bound was reached, or `deliver` stopped it).
        case waiting
        /// The client closed its side.
        case ended
        case failed(SystemError)
    }

    /// The one read loop: up to `rounds` reads into `scratch`, each handed
    /// to `deliver`; `readMore` is asked before each read after the first
    /// (false: stop). A short plain read took all the socket had: the next
    /// would only say EAGAIN (one syscall per request saved; epoll is
    /// level-triggered, so later bytes are reported again); a TLS read
    /// returns one record, so it reads on until it would block. `received`
    /// counts the bytes.
    @inlinable
    public func readAvailable(into scratch: inout [UInt8], rounds: Int, received: inout Int,
                              readMore: () -> Bool = { true }, _ deliver: (UnsafeRawBufferPointer) -> Void) -> Reads {
        for round in 0..<rounds {
            if round > 0 && !readMore() { return .waiting }
            let n: Int?
            do {
                n = try scratch.withUnsafeMutableBytes { (buffer) throws(SystemError) -> Int? in try read(into: buffer) }
            } catch {
                return .failed(error as? SystemError ?? SystemError(errno: EIO, operation: "read"))
            }
            guard let n else { return .waiting }
            if n == 0 { return .ended }
            received += n
            scratch.withUnsafeBytes { deliver(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            if n < scratch.count && tls == nil { return .waiting }
        }
        return .waiting
    }

    /// The sending side ends: close_notify (once the handshake is done),
    /// then FIN; reads go on (a lingering close).
    public func shutdown() {
        if let tls, tls.established { tls.shutdown() }
        Socket.shutdownWrite(fd)
    }

    /// Closes the socket; `notify`: close_notify first (not after a shutdown).
    public func close(notify: Bool) {
        if notify, let tls, tls.established { tls.shutdown() }
        Socket.close(fd)
    }
}
