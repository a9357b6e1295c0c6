import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 16: defects found by trying Larder as an attacker would. Each test
/// failed on the code before the fix.
final class FieldBytesEndToEndTests: ProxyTestCase {
    /// obs-text (0x80-0xFF) in field values reaches the origin, the client
    /// and the stored copy byte for byte (it was replaced by U+FFFD).
    func testFieldValueBytesAboveASCIIPassUnchanged() throws {
        let target = "/bytes?extra=Content-Disposition:filename%3D%22caf%E9.txt%22"
        let request = Array("GET \(target) HTTP/1.1\r\nHost: a\r\nX-Name: caf".utf8) + [0xE9, 0x20, 0xFF] + Array("\r\n\r\n".utf8)
        for round in ["miss", "hit"] {
            let c = try larder.client()
            try c.send(request)
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200, round)
            // The harness reads one scalar per byte: U+00E9 is the byte 0xE9.
            XCTAssertEqual(r.header("content-disposition"), "filename=\"caf\u{E9}.txt\"", round)
            if round == "hit" { XCTAssertTrue(r.header("cache-status")?.contains("hit") ?? false) }
        }
        // The origin (python) reads field bytes as latin-1, one character per byte.
        XCTAssertEqual(try originHeaders(target)["x-name"], "caf\u{E9} \u{FF}")
    }
}

/// Dot segments are removed once, before routing and keying, and the
/// upstream receives exactly that path.
final class DotSegmentEndToEndTests: ConfiguredTestCase {
    func testDotSegmentsCannotClimbAboveTheUpstreamBasePath() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url + "/norm/api")
        for target in ["/../secret", "/%2e%2e/secret", "/a/../../secret"] {
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200, target)
        }
        XCTAssertEqual(try origin.count("/norm/secret"), 0, "nothing outside the base path")
        XCTAssertEqual(try origin.count("/norm/api/secret"), 3)
    }

    func testDotSegmentsCannotCarryAPrivateResponseIntoAnotherRoute() throws {
        let (origin, larder) = try start(config: """
            [[route]]
            prefix = "/static/"
            ignore_upstream_cache_control = true
            default_ttl = "1h"
            """)
        for target in ["/static/../private/r1?cc=private", "/static/%2E%2e/private/r1?cc=private"] {
            for user in ["alice", "bob"] {
                let c = try larder.client()
                try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(user)\r\n\r\n")
                let r = try c.readResponse()
                XCTAssertEqual(r.status, 200)
                XCTAssertFalse(r.header("cache-status")?.contains("hit") ?? true, "\(user) must not get another user's response")
            }
        }
        XCTAssertEqual(try origin.count("/private/r1?cc=private"), 4, "every request went to the origin under its real path")
    }
}

/// Upstream framing (RFC 9112 section 6.3): Transfer-Encoding wins over
/// Content-Length, which is removed; a bad Content-Length is a 502.
final class UpstreamFramingEndToEndTests: ProxyTestCase {
    private func rawTarget(_ path: String, _ response: String) -> String {
        path + "?raw=" + response.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    func testContentLengthWithTransferEncodingIsNotForwarded() throws {
        let target = rawTarget("/split", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
                                   + "Cache-Control: max-age=60\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        let c = try larder.client()
        // A request pipelined behind it must get its own answer.
        try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        let first = try c.readResponse()
        XCTAssertEqual(first.text, "hello")
        XCTAssertNotEqual(first.header("content-length"), "3", "the length the body does not have is gone")
        let second = try c.readResponse()
        XCTAssertEqual(second.status, 200)
        XCTAssertNotNil(second.header("x-origin-count"), "the pipelined request was answered by the origin, not by leftover bytes")
        // The stored copy is framed by the bytes received.
        let hit = try c.get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(hit.header("content-length"), "5")
        XCTAssertEqual(hit.text, "hello")
    }

    func testAnInvalidOrConflictingContentLengthIsA502() throws {
        for (i, length) in ["Content-Length: 3, 5", "Content-Length: 3\r\nContent-Length: 5", "Content-Length: -1"].enumerated() {
            let target = rawTarget("/badlength\(i)", "HTTP/1.1 200 OK\r\n\(length)\r\nCache-Control: max-age=60\r\n\r\nhello")
            let r = try larder.client().get(target)
            XCTAssertEqual(r.status, 502, length)
        }
    }
}
