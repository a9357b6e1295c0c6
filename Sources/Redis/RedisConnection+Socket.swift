import CHiredis
import EventLoop
import TLS
#if canImport(Glibc)
import Glibc
#endif

/// The connection's socket: a non-blocking connect, then (with `rediss://`)
/// the TLS handshake, then encoded commands out and replies in, each as
/// far as the socket takes or gives without waiting.
extension RedisConnection {
    struct SocketFailure: Error {
        let message: String
        init(_ message: String) { self.message = message }
        init(errno code: Int32, _ what: String) { message = "\(what): \(String(cString: strerror(code)))" }
    }

    /// Opens the socket and starts connecting. Out of descriptors, the
    /// disk tier's kept files are given back (`descriptorRelief`) and the
    /// socket tried once more, as libcurl's are.
    func connectSocket() throws(SocketFailure) {
        var storage = sockaddr_storage()
        var length: socklen_t = 0
        switch address.endpoint {
        case .tcp(let host, let port):
            var hints = addrinfo()
            hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var found: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, String(port), &hints, &found) == 0, let first = found else {
                throw SocketFailure("\(host) is not a numeric address")
            }
            defer { freeaddrinfo(found) }
            length = first.pointee.ai_addrlen
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(length))) }
        case .unix(let path):
            var unix = sockaddr_un()
            unix.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: unix.sun_path) else { throw SocketFailure("the socket path is too long") }
            withUnsafeMutableBytes(of: &unix.sun_path) { $0.copyBytes(from: bytes) }
            length = socklen_t(MemoryLayout<sockaddr_un>.size)
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: withUnsafeBytes(of: unix) { $0 }) }
        }
        let family = Int32(storage.ss_family)
        var made = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if made < 0, errno == EMFILE || errno == ENFILE, Self.relieveDescriptors() > 0 {
            made = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        guard made >= 0 else { throw SocketFailure(errno: errno, "Can't create socket") }
        fd = made
        if family != AF_UNIX {
            var on: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        let result = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) } }
        guard result == 0 || errno == EINPROGRESS else { throw SocketFailure(errno: errno, "connect") }
        do {
            try loop.watch(fd, [.write], self)
        } catch {
            throw SocketFailure("cannot watch the socket: \(error)")
        }
        watched = true
        interest = [.write]
    }

    public func ready(_ events: IOEvents) {
        guard failure == nil else { return }
        if !open { return opening(events) }
        if !events.isDisjoint(with: [.read, .error, .hangup]) || tls?.wantsWrite == true { readAvailable() }
        if failure == nil, !events.isDisjoint(with: [.write, .error]) { flush() }
    }

    /// The connect's outcome, then the TLS handshake's steps.
    private func opening(_ events: IOEvents) {
        if tls == nil {
            var code: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size)
            if code == EINPROGRESS { return }
            guard code == 0 else { return close(RedisError("cannot connect to \(address): \(String(cString: strerror(code)))")) }
            guard address.tls else { return opened() }
            do {
                guard let session = TLSSession(client: try tlsContext ?? TLSClientContext.verifying(caFile: nil), fd: fd,
                                               host: address.serverName) else {
                    return close(RedisError("cannot start TLS to \(address)"))
                }
                tls = session
            } catch {
                return close(RedisError("cannot start TLS to \(address): \(error)"))
            }
        }
        guard let tls else { return }
        switch tls.handshake() {
        case .done: opened()
        case .wantRead: want([.read])
        case .wantWrite: want([.write])
        case .failed(let why): close(RedisError("cannot connect to \(address): TLS: \(why)"))
        }
    }

    private func opened() {
        open = true
        want([.read])
        flush()
    }

    private func want(_ events: IOEvents) {
        guard watched, events != interest else { return }
        interest = events
        loop.setInterest(fd, events)
    }

    /// Writes what is queued, as far as the socket takes it; watches for
    /// writability while some is left.
    func flush() {
        while outputSent < output.count {
            let taken: Int?
            do {
                taken = try output.withUnsafeBytes { bytes throws(SystemError) -> Int? in
                    let rest = UnsafeRawBufferPointer(rebasing: bytes[outputSent...])
                    if let tls {
                        do { return try tls.write(rest) } catch { throw SystemError(errno: EPROTO, operation: "TLS write (\(error))") }
                    }
                    var iov = iovec(iov_base: UnsafeMutableRawPointer(mutating: rest.baseAddress), iov_len: rest.count)
                    return try Socket.writev(fd, &iov, count: 1)
                }
            } catch {
                return close(RedisError("cannot send to Redis: \(error)"))
            }
            guard let taken else { break }
            outputSent += taken
        }
        if outputSent == output.count {
            output.removeAll(keepingCapacity: output.count <= 1 << 16)
            outputSent = 0
        } else if outputSent > 1 << 16 {
            output.removeFirst(outputSent)
            outputSent = 0
        }
        want(outputSent < output.count || tls?.wantsWrite == true ? [.read, .write] : [.read])
    }

    /// Reads what the socket has, feeds the reader, delivers the replies.
    func readAvailable() {
        let tls = self.tls, fd = self.fd
        while failure == nil {
            let count: Int?
            do {
                count = try readBuffer.withUnsafeMutableBytes { bytes throws(SystemError) -> Int? in
                    if let tls {
                        do { return try tls.read(into: bytes) } catch { throw SystemError(errno: EPROTO, operation: "TLS read (\(error))") }
                    }
                    return try Socket.read(fd, into: bytes)
                }
            } catch {
                return close(RedisError("the connection to Redis closed: \(error)"))
            }
            guard let count else { break }
            guard count > 0 else { return close(RedisError("the connection to Redis closed")) }
            _ = readBuffer.withUnsafeBytes { redisReaderFeed(reader, $0.baseAddress!.assumingMemoryBound(to: CChar.self), count) }
            deliverReplies()
            if tls == nil && count < readBuffer.count { break }
        }
    }

    /// The socket goes (the loop's reference to this object with it, at
    /// the end of this turn).
    func closeSocket() {
        if watched { loop.unwatch(fd) }
        watched = false
        if fd >= 0 {
            tls?.shutdown()
            Socket.close(fd)
            fd = -1
        }
        tls = nil
        loop.execute { withExtendedLifetime(self) {} }
    }
}
