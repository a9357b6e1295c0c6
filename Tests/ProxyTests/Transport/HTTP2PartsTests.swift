import XCTest
@testable import Proxy

/// The pure parts of HTTP/2 to clients: hosts compared, the abuse
/// budgets, the h2c preface.
final class HTTP2PartsTests: XCTestCase {
    /// Host beside :authority: the same host in another case or with its
    /// default port is the same; another host or port is not.
    func testHostsAreComparedWithoutCaseOrDefaultPort() {
        XCTAssertEqual(RequestStream.sameHost("A.Example:443"), RequestStream.sameHost("a.example"))
        XCTAssertEqual(RequestStream.sameHost("a.example:80"), RequestStream.sameHost("a.example"))
        XCTAssertNotEqual(RequestStream.sameHost("a.example:8443"), RequestStream.sameHost("a.example"))
        XCTAssertNotEqual(RequestStream.sameHost("b.example"), RequestStream.sameHost("a.example"))
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
