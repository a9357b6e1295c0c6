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
