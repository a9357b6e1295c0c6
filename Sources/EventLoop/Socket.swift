import CEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// One Swift function per socket call of the C shim; EINTR is retried there.
public enum Socket {
    /// A nonblocking TCP listener. Returns the fd and the port actually bound
    /// (useful with port 0).
    public static func listen(host: String, port: UInt16, reusePort: Bool, backlog: Int32 = 1024)
        throws(SystemError) -> (fd: Int32, port: UInt16)
    {
        var bound: UInt16 = 0
        let fd = try check(Int(el_listen_tcp(host, port, backlog, reusePort ? 1 : 0, &bound)),
                           "listen on \(host):\(port)")
        return (Int32(fd), bound)
    }

    /// Accepts one connection; nil when none is pending.
    public static func accept(_ listener: Int32) throws(SystemError) -> (fd: Int32, peer: String)? {
        var addr = [CChar](repeating: 0, count: 64)
        let fd = el_accept(listener, &addr, 64)
        if fd < 0 {
            let e = -fd
            if e == EAGAIN || e == EWOULDBLOCK || e == ECONNABORTED { return nil }
            throw SystemError(errno: e, operation: "accept")
        }
        let peer = addr.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return (fd, peer)
    }

    /// Reads into `buffer`; 0 means end of stream, nil means would block.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        let n = el_read(fd, buffer.baseAddress, buffer.count)
        if n < 0 {
            let e = Int32(-n)
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError(errno: e, operation: "read")
        }
        return n
    }

    /// Gathers and writes; nil means would block.
    public static func writev(_ fd: Int32, _ iov: UnsafePointer<iovec>, count: Int32) throws(SystemError) -> Int? {
        let n = el_writev(fd, iov, count)
        if n < 0 {
            let e = Int32(-n)
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError(errno: e, operation: "writev")
        }
        return n
    }

    /// sendfile; nil means would block.
    public static func sendfile(to fd: Int32, from file: Int32, offset: Int, count: Int) throws(SystemError) -> Int? {
        let n = el_sendfile(fd, file, Int64(offset), count)
        if n < 0 {
            let e = Int32(-n)
            if e == EAGAIN || e == EWOULDBLOCK { return nil }
            throw SystemError(errno: e, operation: "sendfile")
        }
        return n
    }

    /// Opens a file for reading.
    public static func openForReading(_ path: String) throws(SystemError) -> Int32 {
        Int32(try check(Int(el_open_read(path)), "open \(path)"))
    }

    public static func close(_ fd: Int32) { _ = el_close(fd) }

    /// Writes a short answer (best effort: a new connection's socket buffer
    /// takes it) and closes: how a listener past its limit refuses.
    public static func refuse(_ fd: Int32, with answer: [UInt8]) {
        answer.withUnsafeBytes { raw in
            var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)
            _ = try? writev(fd, &iov, count: 1)
        }
        close(fd)
    }

    /// The next byte the socket would read, left there: nil when none has
    /// arrived yet, -1 when the peer closed.
    public static func peek(_ fd: Int32) throws(SystemError) -> Int? {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, Int32(MSG_PEEK))
            if n == 1 { return Int(byte) }
            if n == 0 { return -1 }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return nil }
            throw SystemError(errno: errno, operation: "recv")
        }
    }

    /// Stops sending (FIN) while still reading: the first half of a lingering close.
    public static func shutdownWrite(_ fd: Int32) { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// The size of an open file (nil if fstat fails).
    public static func fileSize(_ fd: Int32) -> Int? {
        var info = stat()
        return fstat(fd, &info) == 0 ? Int(info.st_size) : nil
    }

    /// Raises the open-file limit to the hard limit; returns the limit in force.
    @discardableResult
    public static func raiseOpenFileLimit() -> Int { el_raise_nofile_limit() }

}

/// Signals delivered as readable events through a signalfd.
public final class SignalSource {
    public let fd: Int32

    /// Blocks `signals` in the calling thread (call before starting threads).
    public init(_ signals: [Int32]) throws(SystemError) {
        el_ignore_sigpipe()
        let fd = signals.withUnsafeBufferPointer { el_signalfd_open($0.baseAddress, Int32($0.count)) }
        self.fd = Int32(try check(Int(fd), "signalfd"))
    }

    /// The next pending signal, or nil.
    public func next() -> Int32? {
        let s = el_signalfd_read(fd)
        return s > 0 ? s : nil
    }
}
