import XCTest
@testable import Proxy

/// The pure parts of HTTP/2 to clients: an answer's HTTP/1.1 head as
/// HTTP/2 fields, the abuse budgets, the h2c preface.
final class HTTP2PartsTests: XCTestCase {
    private func text(_ fields: [ResponseFields.Field]) -> [String] {
        fields.map { String(decoding: $0.name, as: UTF8.self) + ": " + String(decoding: $0.value, as: UTF8.self) }
    }

    func testAHeadBecomesFieldsWithStatusFirstAndNoConnectionFields() {
        let head = Array("""
            HTTP/1.1 206 Partial Content\r
            Content-Type: text/plain\r
            Connection: close\r
            Keep-Alive: timeout=5\r
            Transfer-Encoding: chunked\r
            X-Padded:   value with spaces \t\r
            Upgrade: h2c\r
            Cache-Status: larder; hit\r
            \r

            """.utf8)
        XCTAssertEqual(ResponseFields.headEnd(head), head.count)
        XCTAssertEqual(text(ResponseFields.from(head)), [
            ":status: 206", "content-type: text/plain", "x-padded: value with spaces", "cache-status: larder; hit",
        ])
    }

    /// Host beside :authority: the same host in another case or with its
    /// default port is the same; another host or port is not.
    func testHostsAreComparedWithoutCaseOrDefaultPort() {
        XCTAssertEqual(HTTP2Stream.sameHost("A.Example:443"), HTTP2Stream.sameHost("a.example"))
        XCTAssertEqual(HTTP2Stream.sameHost("a.example:80"), HTTP2Stream.sameHost("a.example"))
        XCTAssertNotEqual(HTTP2Stream.sameHost("a.example:8443"), HTTP2Stream.sameHost("a.example"))
        XCTAssertNotEqual(HTTP2Stream.sameHost("b.example"), HTTP2Stream.sameHost("a.example"))
    }

    func testTheHeadEndIsFoundWhereverTheBodyBegins() {
        let message = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".utf8)
        XCTAssertEqual(ResponseFields.headEnd(message), message.count - 2)
        XCTAssertNil(ResponseFields.headEnd(Array("HTTP/1.1 200 OK\r\nA: b\r\n".utf8)), "not complete yet")
        let bare = Array("HTTP/1.1 200 OK\nA: b\n\nx".utf8)
        XCTAssertEqual(ResponseFields.headEnd(bare), bare.count - 1, "bare line feeds")
        XCTAssertEqual(text(ResponseFields.from(Array("garbage".utf8))), [":status: 502"], "no status: a 502, never a malformed frame")
    }

    func testResetsAndIdleFramesHaveABudgetPerWindow() {
        var limits = HTTP2Limits(now: 1_000)
        for _ in 0..<HTTP2Limits.maxResets { XCTAssertFalse(limits.countReset(now: 2_000)) }
        XCTAssertTrue(limits.countReset(now: 2_000), "one more within the window is too many")
        XCTAssertFalse(limits.countReset(now: 1_000 + HTTP2Limits.windowMilliseconds), "a new window starts afresh")
        for _ in 0..<HTTP2Limits.maxControlFrames { XCTAssertFalse(limits.countControl(now: 12_000)) }
        XCTAssertTrue(limits.countControl(now: 12_000))
        XCTAssertEqual(limits.resets, 1, "resets and frames are counted apart")
    }

    func testThePrefaceIsRecognisedWholeOrInPart() {
        let preface = HTTP2Preface.bytes
        XCTAssertEqual(HTTP2Preface.match(preface + Array("more".utf8), from: 0), true)
        XCTAssertEqual(HTTP2Preface.match(Array(preface.prefix(10)), from: 0), false, "wait for the rest")
        XCTAssertEqual(HTTP2Preface.match(Array("xx".utf8) + preface, from: 2), true)
        XCTAssertNil(HTTP2Preface.match(Array("PRI * HTTP/1.1\r\n".utf8), from: 0))
        XCTAssertNil(HTTP2Preface.match(Array("GET / HTTP/1.1\r\n".utf8), from: 0))
        XCTAssertNil(HTTP2Preface.match([], from: 0))
    }
}
