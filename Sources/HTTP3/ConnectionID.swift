import CQUIC

/// A QUIC connection ID (RFC 9000 section 5.1: up to 20 bytes) as a
/// dictionary key: held inline, no allocation per datagram looked up.
public struct ConnectionID: Hashable, CustomStringConvertible {
    private var words: (UInt64, UInt64, UInt32) = (0, 0, 0)
    public private(set) var count: Int = 0

    public init(_ bytes: UnsafeRawBufferPointer) {
        count = min(bytes.count, 20)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(count))) }
    }

    public init(_ cid: ngtcp2_cid) {
        var cid = cid
        let length = cid.datalen
        self = withUnsafeBytes(of: &cid.data) { ConnectionID(UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }

    /// A new random ID of `length` bytes.
    public static func random(length: Int = 18) -> ConnectionID {
        var bytes = [UInt8](repeating: 0, count: length)
        _ = gnutls_rnd(GNUTLS_RND_RANDOM, &bytes, length)
        return bytes.withUnsafeBytes { ConnectionID($0) }
    }

    public func withBytes<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        withUnsafeBytes(of: words) { body(UnsafeRawBufferPointer(rebasing: $0.prefix(count))) }
    }

    /// As ngtcp2 takes it.
    public var cid: ngtcp2_cid {
        var cid = ngtcp2_cid()
        withBytes { bytes in ngtcp2_cid_init(&cid, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count) }
        return cid
    }

    public static func == (a: ConnectionID, b: ConnectionID) -> Bool {
        a.count == b.count && a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
    }

    public var description: String { withBytes { $0.map { String($0, radix: 16) }.joined() } }
}
