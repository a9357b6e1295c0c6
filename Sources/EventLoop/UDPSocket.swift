import CEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// Where a datagram came from or goes to (an address and its length).
public typealias DatagramPeer = el_udp_peer

extension DatagramPeer {
    /// The address as text, without its port ("127.0.0.1", "::1").
    public var text: String {
        var out = [CChar](repeating: 0, count: 64)
        withUnsafePointer(to: self) { el_udp_peer_text($0, &out, 64) }
        return out.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

/// One Swift function per UDP call of the C shim (QUIC listeners).
public enum UDPSocket {
    /// A nonblocking UDP socket bound to host:port, and the port bound.
    public static func bind(host: String, port: UInt16, reusePort: Bool) throws(SystemError) -> (fd: Int32, port: UInt16) {
        var bound: UInt16 = 0
        let fd = el_udp_bind(host, port, reusePort ? 1 : 0, &bound)
        guard fd >= 0 else { throw SystemError(errno: -fd, operation: "bind UDP \(host):\(port)") }
        return (fd, bound)
    }

    /// The socket's own address.
    public static func localAddress(_ fd: Int32) -> DatagramPeer {
        var local = DatagramPeer()
        _ = el_udp_local(fd, &local)
        return local
    }

    /// Up to `count` datagrams into `buffer` (slots of `size` bytes), their
    /// lengths and senders; how many arrived (0: none waiting).
    public static func receive(_ fd: Int32, into buffer: UnsafeMutableRawPointer, size: Int, count: Int,
                               lengths: UnsafeMutablePointer<Int>, peers: UnsafeMutablePointer<DatagramPeer>) throws(SystemError) -> Int {
        let n = lengths.withMemoryRebound(to: size_t.self, capacity: count) {
            el_udp_recv_batch(fd, buffer.assumingMemoryBound(to: UInt8.self), size, Int32(count), $0, peers)
        }
        guard n >= 0 else { throw SystemError(errno: -n, operation: "recvmmsg") }
        return Int(n)
    }

    /// `count` bytes from `buffer` to `peer` as datagrams of `segment`
    /// bytes, in one call where the kernel can (UDP GSO), else one
    /// sendmmsg; false when the socket's buffer is full.
    public static func send(_ fd: Int32, _ buffer: UnsafeRawPointer, count: Int, segment: Int, to peer: DatagramPeer,
                            segmentsWork: inout Bool) throws(SystemError) -> Bool {
        var peer = peer
        if segmentsWork && count > segment {
            let r = el_udp_send_segments(fd, buffer.assumingMemoryBound(to: UInt8.self), count, segment, &peer)
            if r >= 0 { return r == 1 }
            if r != -EIO && r != -EINVAL && r != -ENOPROTOOPT { throw SystemError(errno: -r, operation: "sendmsg") }
            segmentsWork = false  // (no GSO on this socket: one datagram each from now on)
        }
        var pointers: [UnsafeMutablePointer<UInt8>?] = []
        var lengths: [Int] = []
        var offset = 0
        while offset < count {
            pointers.append(UnsafeMutablePointer(mutating: (buffer + offset).assumingMemoryBound(to: UInt8.self)))
            lengths.append(min(segment, count - offset))
            offset += segment
        }
        let peers = [DatagramPeer](repeating: peer, count: pointers.count)
        let sent = lengths.withUnsafeBufferPointer { lens in
            lens.withMemoryRebound(to: size_t.self) { el_udp_send_batch(fd, pointers, $0.baseAddress, peers, Int32(pointers.count)) }
        }
        guard sent >= 0 else { throw SystemError(errno: -sent, operation: "sendmmsg") }
        return Int(sent) == pointers.count
    }
}
