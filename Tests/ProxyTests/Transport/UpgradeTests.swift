import HTTP1
import HTTPHeaders
import TestSupport
import XCTest
@testable import Proxy

/// Which requests are upgrades, the request the upstream gets, and the
/// upstream's answer head read whole, in pieces and when it is wrong.
final class UpgradeTests: XCTestCase {
    private func head(_ text: String) throws -> RequestHead {
        var parser = RequestParser()
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
            throw TestFailure("the request did not parse: \(text)")
        }
        return head
    }

    func testOnlyANominatedUpgradeOfHTTP11WithoutABodyIsOne() throws {
        let ws = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: keep-alive, Upgrade\r\n\r\n"
        XCTAssertEqual(Upgrade.requested(try head(ws)), "websocket")
        for (text, why) in [("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", "Connection does not nominate it"),
                            ("GET /ws HTTP/1.0\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n", "HTTP/1.0"),
                            ("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: h2c\r\nConnection: Upgrade, HTTP2-Settings\r\n\r\n", "h2c"),
                            ("POST /ws HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\nab", "a body"),
                            ("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: ,\r\nConnection: upgrade\r\n\r\n", "no protocol named")] {
            XCTAssertNil(Upgrade.requested(try head(text)), why)
        }
    }

    func testTheUpstreamRequestCarriesTheForwardedFieldsAndTheUpgrade() throws {
        let request = try head("GET /ws?room=1 HTTP/1.1\r\nHost: a.test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                               + "Sec-WebSocket-Key: k\r\n\r\n")
        let forwarded: HeaderFields = ["sec-websocket-key": "k", "x-forwarded-for": "10.0.0.1"]
        XCTAssertEqual(String(decoding: Upgrade.upstreamRequest(request, forwarded: forwarded, host: "127.0.0.1:9000", upgrade: "websocket"),
                              as: UTF8.self),
                       "GET /ws?room=1 HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nsec-websocket-key: k\r\nx-forwarded-for: 10.0.0.1\r\n"
                       + "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        let kept: HeaderFields = ["host": "a.test"]
        XCTAssertFalse(String(decoding: Upgrade.upstreamRequest(request, forwarded: kept, host: "127.0.0.1:9000", upgrade: "websocket"),
                              as: UTF8.self).contains("127.0.0.1"), "preserve_host: the client's Host alone")
    }

    func testTheAnswerHeadWholeByteByByteAndWrong() {
        let switching = Array("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".utf8)
            + [0x81, 0x02, 0x68, 0x69]  // the first frame, right behind the head
        let headLength = switching.count - 4
        XCTAssertEqual(Upgrade.responseHead(switching[...]), .complete(status: 101, headLength: headLength, bodyLength: nil))
        for cut in 0..<headLength { XCTAssertEqual(Upgrade.responseHead(switching[0..<cut]), .incomplete, "\(cut) bytes") }
        let refused = Array("HTTP/1.1 426 Upgrade Required\r\nContent-Length: 5\r\n\r\nnope!".utf8)
        XCTAssertEqual(Upgrade.responseHead(refused[...]), .complete(status: 426, headLength: refused.count - 5, bodyLength: 5))
        for (text, why) in [("SSH-2.0-OpenSSH\r\n\r\n", "not HTTP"), ("HTTP/1.1 20 OK\r\n\r\n", "a short status"),
                            ("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", "two lengths")] {
            guard case .invalid = Upgrade.responseHead(Array(text.utf8)[...]) else { return XCTFail(why) }
        }
        let endless = [UInt8](repeating: UInt8(ascii: "a"), count: Upgrade.maxHeadBytes + 1)
        guard case .invalid = Upgrade.responseHead(endless[...]) else { return XCTFail("a head without end is bounded") }
    }
}
