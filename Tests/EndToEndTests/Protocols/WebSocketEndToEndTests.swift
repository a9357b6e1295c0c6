import Foundation
import TestSupport
import XCTest

/// Issue 61, point 5: an Upgrade request (WebSocket, RFC 6455) goes
/// upstream with its Upgrade and Connection fields, the upstream's 101
/// reaches the client and frames flow both ways (origin.py echoes them),
/// nothing of it is stored; `websocket = false` answers 501.
final class WebSocketEndToEndTests: ConfiguredTestCase {
    /// RFC 6455 section 1.3's example key, and the accept value it must get.
    private let key = "dGhlIHNhbXBsZSBub25jZQ==", accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    private func handshake(_ c: HTTPClient, _ target: String, host: String = "127.0.0.1") throws -> (status: Int, fields: [String: String]) {
        try c.send("GET \(target) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n"
                   + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n")
        let statusLine = try XCTUnwrap(try c.readLine())
        let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
        var fields: [String: String] = [:]
        while let line = try c.readLine(), !line.isEmpty {
            let (name, value) = (line.prefix { $0 != ":" }, line.drop { $0 != ":" }.dropFirst())
            fields[name.lowercased()] = value.trimmingCharacters(in: .whitespaces)
        }
        return (status, fields)
    }

    /// A masked client frame (section 5.3).
    private func frame(_ opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        var out: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            out.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65536 {
            out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(0x80 | 127)
            out += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        return out + mask + payload.enumerated().map { $1 ^ mask[$0 % 4] }
    }

    /// A server frame (unmasked).
    private func readFrame(_ c: HTTPClient) throws -> (opcode: UInt8, payload: [UInt8]) {
        let head = try c.readExactly(2)
        var length = Int(head[1] & 0x7F)
        if length == 126 { length = try c.readExactly(2).reduce(0) { $0 << 8 | Int($1) } }
        if length == 127 { length = try c.readExactly(8).reduce(0) { $0 << 8 | Int($1) } }
        return (head[0] & 0x0F, try c.readExactly(length))
    }

    func testAWebSocketIsTunnelledBothWaysAndNothingOfItIsStored() throws {
        let (origin, larder) = try start(config: "")
        let c = try larder.client()
        let (status, fields) = try handshake(c, "/ws/chat")
        XCTAssertEqual(status, 101)
        XCTAssertEqual(fields["sec-websocket-accept"], accept, "the upstream's handshake, passed on")
        XCTAssertEqual(fields["upgrade"]?.lowercased(), "websocket")
        let asked = try origin.lastRequest("/ws/chat")["headers"] as? [[String]] ?? []
        let upstream = Dictionary(asked.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(upstream["upgrade"], "websocket", "Upgrade went upstream")
        XCTAssertEqual(upstream["connection"], "Upgrade")
        XCTAssertEqual(upstream["sec-websocket-key"], key)
        XCTAssertEqual(upstream["x-forwarded-for"], "127.0.0.1")
        for text in ["hello", String(repeating: "larder ", count: 40_000)] {
            try c.send(frame(1, Array(text.utf8)))
            let echoed = try readFrame(c)
            XCTAssertEqual(echoed.opcode, 1)
            XCTAssertEqual(echoed.payload.count, text.utf8.count)
            XCTAssertEqual(String(decoding: echoed.payload, as: UTF8.self), text)
        }
        try c.send(frame(9, Array("are you there".utf8)))
        let pong = try readFrame(c)
        XCTAssertEqual(pong.opcode, 10)
        XCTAssertEqual(pong.payload, Array("are you there".utf8))
        try c.send(frame(8, [0x03, 0xE8]))
        XCTAssertEqual(try readFrame(c).opcode, 8, "the close, echoed")
        XCTAssertTrue(c.isClosedByPeer(), "the upstream closed: so does the tunnel")
        // Nothing was stored or collapsed: a second handshake reaches the upstream again.
        XCTAssertEqual(try handshake(try larder.client(), "/ws/chat").status, 101)
        XCTAssertEqual(try origin.count("/ws/chat"), 2)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "upgrades"), 2)
        XCTAssertGreaterThan(try statsFigure(larder, "upgraded_bytes"), 560_000)
    }

    func testUpgradesRefusedHereOrUpstreamAndUpstreamsThatCannotBeReached() throws {
        let (origin, larder) = try start(config: "[[route]]\nprefix = \"/nows/\"\nwebsocket = false\n"
                                         + "[[route]]\nprefix = \"/\"\nhosts = [\"quiet.test\"]\nwebsocket = false\n")
        let off = try larder.client()
        XCTAssertEqual(try handshake(off, "/nows/x").status, 501, "websocket = false")
        XCTAssertEqual(try origin.count("/nows/x"), 0)
        XCTAssertEqual(try handshake(try larder.client(), "/ws/x", host: "quiet.test").status, 501, "off for that virtual host")
        XCTAssertEqual(try handshake(try larder.client(), "/ws/x", host: "loud.test").status, 101, "on for the others")
        // The upstream refuses the upgrade: its answer is passed on, and the connection closed after it.
        let refused = try larder.client()
        XCTAssertEqual(try handshake(refused, "/ws/refused?refuse=426").status, 426)
        XCTAssertTrue(refused.isClosedByPeer())
        XCTAssertEqual(try larder.client().get("/ws/refused?refuse=426").status, 200, "a plain GET of it is a plain GET")
        // Nobody listens upstream: 502.
        let nobody = try startLarder(upstream: "http://127.0.0.1:\(unusedPort())")
        XCTAssertEqual(try handshake(try nobody.client(), "/ws/x").status, 502)
    }

    func testATunnelIdleBothWaysIsClosed() throws {
        let (_, larder) = try start(config: "upstream_idle_timeout = \"1s\"\n")
        let c = try larder.client()
        XCTAssertEqual(try handshake(c, "/ws/idle").status, 101)
        try c.send(frame(1, Array("one".utf8)))
        XCTAssertEqual(try readFrame(c).payload, Array("one".utf8))
        XCTAssertTrue(c.isClosedByPeer(), "nothing either way for upstream_idle_timeout: closed")
    }

    /// An https upstream: libcurl makes the TLS connection (with the
    /// configured CA), the frames go through it.
    func testAWebSocketToAnHTTPSUpstreamGoesThroughTLS() throws {
        let dir = temporaryPath("larder-ws-tls")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let made = try runProgram(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                   "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2", "-subj", "/CN=127.0.0.1",
                                   "-addext", "subjectAltName=IP:127.0.0.1"])
        XCTAssertEqual(made.status, 0, made.stderr)
        let origin = try Origin(tls: (dir + "/cert.pem", dir + "/key.pem"))
        addTeardownBlock { origin.stop() }
        let larder = try startLarder(upstream: origin.url, ["--config", try writeConfig("upstream_ca_file = \"\(dir)/cert.pem\"\n")])
        let c = try larder.client()
        let (status, fields) = try handshake(c, "/ws/tls")
        XCTAssertEqual(status, 101)
        XCTAssertEqual(fields["sec-websocket-accept"], accept)
        try c.send(frame(2, [0, 1, 2, 255]))
        let echoed = try readFrame(c)
        XCTAssertEqual(echoed.opcode, 2)
        XCTAssertEqual(echoed.payload, [0, 1, 2, 255])
    }
}
