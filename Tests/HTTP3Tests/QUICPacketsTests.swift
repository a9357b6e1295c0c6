import CQUIC
import EventLoop
import XCTest
@testable import HTTP3

/// What a QUIC listener answers without a connection, as pure functions of
/// datagrams: garbage read as nothing, the answers' sizes bounded, Retry
/// tokens that prove an address and expire.
final class QUICPacketsTests: XCTestCase {
    private let secret = [UInt8](repeating: 7, count: 32)

    private func peer(_ address: String, port: UInt16) -> DatagramPeer {
        var peer = DatagramPeer()
        withUnsafeMutablePointer(to: &peer.addr) { storage in
            storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = port.bigEndian
                _ = inet_pton(AF_INET, address, &sin.pointee.sin_addr)
            }
        }
        peer.len = socklen_t(MemoryLayout<sockaddr_in>.size)
        return peer
    }

    /// A client Initial's header as the listener would have read it.
    private func initialHeader(dcid: ConnectionID, scid: ConnectionID) -> ngtcp2_pkt_hd {
        var header = ngtcp2_pkt_hd()
        header.dcid = dcid.cid
        header.scid = scid.cid
        header.version = NGTCP2_PROTO_VER_V1
        return header
    }

    func testGarbageIsReadAsNothingOrAsAnUnknownConnection() {
        XCTAssertNil(QUICPackets.header(UnsafeRawBufferPointer(start: nil, count: 0)))
        var generator = SystemRandomNumberGenerator()
        for size in [1, 2, 7, 30, 600, 1200, 1500] {
            for _ in 0..<50 {
                var bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
                bytes[0] |= 0x80  // a long header: version and IDs must parse, or nothing
                let header = bytes.withUnsafeBytes { QUICPackets.header($0) }
                if case .long(let version, _, _)? = header { XCTAssertEqual(version, NGTCP2_PROTO_VER_V1) }
                // A long header is never taken as a connection's first packet unless it is a whole Initial.
                XCTAssertNil(bytes.withUnsafeBytes { QUICPackets.accept($0) }, "\(size) random bytes accepted as an Initial")
            }
        }
        let short: [UInt8] = [0x41] + (0..<30).map { UInt8($0) }
        guard case .short(let dcid)? = short.withUnsafeBytes({ QUICPackets.header($0) }) else { return XCTFail("not a short header") }
        XCTAssertEqual(dcid.count, QUICPackets.idLength)
    }

    func testStatelessResetsAreShorterThanWhatTheyAnswer() {
        var out = [UInt8](repeating: 0, count: 1500)
        let id = ConnectionID.random()
        for received in [1, 21, 22, 40, 61, 1200] {
            let n = out.withUnsafeMutableBytes { QUICPackets.statelessReset(for: id, received: received, secret: secret, into: $0) }
            if received <= 21 {
                XCTAssertEqual(n, 0, "a packet of \(received) bytes is too short to answer without looping")
            } else {
                XCTAssertGreaterThanOrEqual(n, 21)
                XCTAssertLessThan(n, received)
                XCTAssertLessThanOrEqual(n, 43)
                XCTAssertEqual(out[0] & 0x80, 0, "a reset looks like a short-header packet")
            }
        }
    }

    func testVersionNegotiationNamesVersionOne() {
        var out = [UInt8](repeating: 0, count: 1500)
        let n = out.withUnsafeMutableBytes { QUICPackets.versionNegotiation(dcid: .random(length: 8), scid: .random(length: 8), into: $0) }
        XCTAssertGreaterThan(n, 0)
        XCTAssertEqual(out[0] & 0x80, 0x80)
        XCTAssertEqual(Array(out[1...4]), [0, 0, 0, 0], "version 0 marks Version Negotiation")
        XCTAssertEqual(Array(out[(n - 4)..<n]), [0, 0, 0, 1], "the version offered")
        XCTAssertLessThan(n, 100)
    }

    func testRetryTokensProveTheAddressAndExpire() {
        let header = initialHeader(dcid: .random(length: 8), scid: .random(length: 8))
        let retryID = ConnectionID.random()
        let client = peer("192.0.2.1", port: 4433)
        let now: UInt64 = 1_000_000_000_000
        let token = QUICPackets.retryToken(for: header, retryID: retryID, from: client, secret: secret, now: now)
        XCTAssertFalse(token.isEmpty)
        // The client's second Initial: to the Retry's ID, with the token.
        token.withUnsafeBufferPointer { bytes in
            var second = initialHeader(dcid: retryID, scid: ConnectionID(header.scid))
            second.token = ngtcp2_vec(base: UnsafeMutablePointer(mutating: bytes.baseAddress), len: bytes.count)
            XCTAssertEqual(QUICPackets.verifyRetry(second, from: client, secret: secret, now: now + 1_000_000),
                           ConnectionID(header.dcid), "the original destination ID comes back")
            XCTAssertNil(QUICPackets.verifyRetry(second, from: peer("192.0.2.2", port: 4433), secret: secret, now: now),
                         "another address")
            XCTAssertNil(QUICPackets.verifyRetry(second, from: client, secret: [UInt8](repeating: 8, count: 32), now: now),
                         "another secret")
            XCTAssertNil(QUICPackets.verifyRetry(second, from: client, secret: secret, now: now + 11_000_000_000), "expired")
        }
        var out = [UInt8](repeating: 0, count: 1500)
        let n = out.withUnsafeMutableBytes { QUICPackets.retry(for: header, from: client, secret: secret, now: now, into: $0) }
        XCTAssertGreaterThan(n, 0)
        XCTAssertEqual(out[0] & 0xF0, 0xF0, "a long header of type Retry")
        XCTAssertLessThan(n, 3 * 1200, "a Retry answers an Initial of at least 1,200 bytes with less")
    }

    func testConnectionIDsAsKeys() {
        let a = ConnectionID.random(), b = ConnectionID(a.cid)
        XCTAssertEqual(a, b)
        XCTAssertEqual(a.hashValue, b.hashValue)
        XCTAssertNotEqual(a, .random())
        let short = [UInt8](repeating: 1, count: 4).withUnsafeBytes { ConnectionID($0) }
        let longer = [UInt8](repeating: 1, count: 5).withUnsafeBytes { ConnectionID($0) }
        XCTAssertNotEqual(short, longer, "the length is part of the ID")
        XCTAssertEqual(ConnectionID.random(length: 20).count, 20)
    }

    func testAcknowledgedBytesFreeTheirPieces() {
        let output = StreamOutput()
        for count in [100, StreamOutput.pieceBytes, 50] {
            let piece = output.newPiece()
            output.keep(piece, count: count)
        }
        XCTAssertEqual(output.heldBytes, 150 + StreamOutput.pieceBytes)
        output.acknowledge(60)
        XCTAssertEqual(output.heldBytes, 90 + StreamOutput.pieceBytes)
        output.acknowledge(40 + StreamOutput.pieceBytes)
        XCTAssertEqual(output.heldBytes, 50)
        output.release()
        XCTAssertEqual(output.heldBytes, 0)
    }
}
