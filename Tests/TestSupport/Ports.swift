#if canImport(Glibc)
import Glibc
#endif

/// A port nothing listens on: bind an ephemeral port, then close it.
public func unusedPort() -> Int {
    withLoopbackSocket(port: 0) { fd, address, length in
        bind(fd, address, length) == 0 && getsockname(fd, address, &length) == 0
    }.port
}

/// Whether something accepts connections on a loopback port.
public func canConnect(port: Int) -> Bool {
    withLoopbackSocket(port: port) { fd, address, length in connect(fd, address, length) == 0 }.result
}

/// A TCP socket and 127.0.0.1:`port` for `body`, closed after it; the
/// port the address holds afterwards.
private func withLoopbackSocket(port: Int, _ body: (Int32, UnsafeMutablePointer<sockaddr>, inout socklen_t) -> Bool)
    -> (result: Bool, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let result = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(fd, $0, &length) }
    }
    return (result, Int(UInt16(bigEndian: addr.sin_port)))
}

/// A server that takes connections and never answers (a hung upstream):
/// the kernel completes each handshake from its backlog; nothing is read
/// or written. Closed by `stop` (or when released).
public final class SilentServer {
    private var fd: Int32
    public let port: Int

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && listen(fd, 128) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard listening else {
            close(fd)
            throw TestFailure("cannot listen for a silent server: errno \(errno)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    public func stop() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { stop() }
}
