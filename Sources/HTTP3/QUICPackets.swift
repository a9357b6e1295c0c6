import CQUIC
import EventLoop

/// What a listener does with a datagram before any connection has it:
/// its IDs read, a client's first Initial accepted, and the answers that
/// need no connection (Version Negotiation, Stateless Reset, Retry).
/// Pure functions of the datagram and the listener's secret.
public enum QUICPackets {
    /// The datagram's version and IDs (`dcidLength`: the length of ours in
    /// short headers). Nil: not a QUIC packet (garbage is dropped).
    public enum Header {
        case long(version: UInt32, dcid: ConnectionID, scid: ConnectionID)
        case short(dcid: ConnectionID)
        /// A version this server does not speak: answered with the ones it does.
        case unsupportedVersion(dcid: ConnectionID, scid: ConnectionID)
    }

    public static let idLength = 18

    public static func header(_ datagram: UnsafeRawBufferPointer) -> Header? {
        guard datagram.count > 0, let base = datagram.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        var decoded = ngtcp2_version_cid()
        let r = ngtcp2_pkt_decode_version_cid(&decoded, base, datagram.count, idLength)
        guard r == 0 || r == NGTCP2_ERR_VERSION_NEGOTIATION else { return nil }
        let dcid = ConnectionID(UnsafeRawBufferPointer(start: decoded.dcid, count: decoded.dcidlen))
        if datagram[0] & 0x80 == 0 { return .short(dcid: dcid) }
        let scid = ConnectionID(UnsafeRawBufferPointer(start: decoded.scid, count: decoded.scidlen))
        if r == NGTCP2_ERR_VERSION_NEGOTIATION { return .unsupportedVersion(dcid: dcid, scid: scid) }
        return .long(version: decoded.version, dcid: dcid, scid: scid)
    }

    /// A client's first packet, if it may begin a connection (an Initial
    /// of a version spoken, in a datagram of at least 1200 bytes).
    public static func accept(_ datagram: UnsafeRawBufferPointer) -> ngtcp2_pkt_hd? {
        var header = ngtcp2_pkt_hd()
        guard ngtcp2_accept(&header, datagram.baseAddress!.assumingMemoryBound(to: UInt8.self), datagram.count) == 0 else { return nil }
        return header
    }

    /// Version Negotiation (RFC 9000 section 6) for a client of an unknown version.
    public static func versionNegotiation(dcid: ConnectionID, scid: ConnectionID, into out: UnsafeMutableRawBufferPointer) -> Int {
        var versions: [UInt32] = [NGTCP2_PROTO_VER_V1]
        var random: UInt8 = 0
        _ = gnutls_rnd(GNUTLS_RND_NONCE, &random, 1)
        let n = scid.withBytes { s in
            dcid.withBytes { d in
                // (Its destination is the client's source, and the other way round.)
                ngtcp2_pkt_write_version_negotiation(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, random,
                                                     s.baseAddress?.assumingMemoryBound(to: UInt8.self), s.count,
                                                     d.baseAddress?.assumingMemoryBound(to: UInt8.self), d.count, &versions, 1)
            }
        }
        return max(0, Int(n))
    }

    /// A Stateless Reset (RFC 9000 section 10.3) for a packet of a
    /// connection this listener does not have: shorter than what it
    /// answers (never an amplifier, and never a loop of two resets).
    public static func statelessReset(for dcid: ConnectionID, received: Int, secret: [UInt8],
                                      into out: UnsafeMutableRawBufferPointer) -> Int {
        let length = min(received - 1, 43)
        guard length >= 21 else { return 0 }
        var token = [UInt8](repeating: 0, count: Int(NGTCP2_STATELESS_RESET_TOKENLEN))
        var cid = dcid.cid
        let made = secret.withUnsafeBytes { s in
            ngtcp2_crypto_generate_stateless_reset_token(&token, s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count, &cid)
        }
        guard made == 0 else { return 0 }
        var random = [UInt8](repeating: 0, count: length - Int(NGTCP2_STATELESS_RESET_TOKENLEN))
        _ = gnutls_rnd(GNUTLS_RND_NONCE, &random, random.count)
        let n = ngtcp2_pkt_write_stateless_reset(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, token,
                                                 random, random.count)
        return max(0, Int(n))
    }

    /// A Retry (RFC 9000 section 8.1.2): the client must come back with
    /// the token, proving its address, before any state is kept for it.
    public static func retry(for header: ngtcp2_pkt_hd, from peer: DatagramPeer, secret: [UInt8], now: UInt64,
                             into out: UnsafeMutableRawBufferPointer) -> Int {
        var header = header
        let retryID = ConnectionID.random(length: idLength)
        var retryCID = retryID.cid
        let token = retryToken(for: header, retryID: retryID, from: peer, secret: secret, now: now)
        guard !token.isEmpty else { return 0 }
        let n = ngtcp2_crypto_write_retry(out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, header.version,
                                          &header.scid, &retryCID, &header.dcid, token, token.count)
        return max(0, Int(n))
    }

    /// The token a Retry carries: the client's original destination ID,
    /// sealed with the secret for its address and the time (empty: failed).
    public static func retryToken(for header: ngtcp2_pkt_hd, retryID: ConnectionID, from peer: DatagramPeer, secret: [UInt8],
                                  now: UInt64) -> [UInt8] {
        var header = header, peer = peer, retryCID = retryID.cid
        var token = [UInt8](repeating: 0, count: 256)
        let length = withUnsafePointer(to: &peer.addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { a in
                secret.withUnsafeBytes { s in
                    ngtcp2_crypto_generate_retry_token(&token, s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count,
                                                       header.version, a, peer.len, &retryCID, &header.dcid, now)
                }
            }
        }
        return length > 0 ? Array(token.prefix(Int(length))) : []
    }

    /// The original destination ID a Retry token carried, when the token
    /// is one of ours, for this address, and recent; nil otherwise.
    public static func verifyRetry(_ header: ngtcp2_pkt_hd, from peer: DatagramPeer, secret: [UInt8], now: UInt64,
                                   lifetimeNanoseconds: UInt64 = 10_000_000_000) -> ConnectionID? {
        var header = header, peer = peer
        guard header.token.len > 0, header.token.base.pointee == UInt8(NGTCP2_CRYPTO_TOKEN_MAGIC_RETRY) else { return nil }
        var original = ngtcp2_cid()
        let r = withUnsafePointer(to: &peer.addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { a in
                secret.withUnsafeBytes { s in
                    ngtcp2_crypto_verify_retry_token(&original, header.token.base, header.token.len,
                                                     s.baseAddress!.assumingMemoryBound(to: UInt8.self), s.count, header.version,
                                                     a, peer.len, &header.dcid, lifetimeNanoseconds, now)
                }
            }
        }
        return r == 0 ? ConnectionID(original) : nil
    }

    /// A CONNECTION_CLOSE (CONNECTION_REFUSED) in an Initial packet, for
    /// a client that cannot be taken now (max_connections, draining): it
    /// learns at once instead of waiting out its timeout.
    public static func refusal(for header: ngtcp2_pkt_hd, into out: UnsafeMutableRawBufferPointer) -> Int {
        var header = header
        // (Its destination is the client's source ID; its keys come from the client's destination ID.)
        let n = ngtcp2_crypto_write_connection_close(out.baseAddress!.assumingMemoryBound(to: UInt8.self), min(out.count, 1200),
                                                     header.version, &header.scid, &header.dcid,
                                                     UInt64(NGTCP2_CONNECTION_REFUSED), nil, 0)
        return max(0, Int(n))
    }

    /// Whether an Initial carries a token (a Retry's, or one we cannot read).
    public static func hasToken(_ header: ngtcp2_pkt_hd) -> Bool { header.token.len > 0 }
}

/// A client's first Initial, as `QUICPackets.accept` read it.
public typealias InitialPacket = ngtcp2_pkt_hd

/// HTTP/3's error codes a server sends (RFC 9114 section 8.1).
public enum HTTP3Code {
    public static let noError = UInt64(NGHTTP3_H3_NO_ERROR)
    public static let internalError = UInt64(NGHTTP3_H3_INTERNAL_ERROR)
    public static let requestRejected = UInt64(NGHTTP3_H3_REQUEST_REJECTED)
    public static let requestCancelled = UInt64(NGHTTP3_H3_REQUEST_CANCELLED)
    public static let excessiveLoad = UInt64(NGHTTP3_H3_EXCESSIVE_LOAD)
}
