import CacheSemantics
import CacheStorage
import HTTPHeaders
import XCTest
@testable import Proxy

/// The heads Larder writes as HTTP/2 fields (`HTTP2Head`): `:status`
/// first, names in lower case, nothing about an HTTP/1.1 connection, the
/// same fields the HTTP/1.1 head of the same answer has.
final class HTTP2HeadTests: XCTestCase {
    private let date = DateHeader.Value(line: Array("Date: Tue, 24 Nov 2026 10:00:00 GMT\r\n".utf8))

    private func text(_ head: HTTP2Head) -> [String] { head.block.fields.map { "\($0.name): \($0.value)" } }

    func testAForwardedHeadHasStatusFirstAndNoConnectionFields() {
        let fields: HeaderFields = ["Content-Type": "text/plain", "connection": "close", "keep-alive": "timeout=5",
                                    "transfer-encoding": "chunked", "upgrade": "h2c", "x-latin": "caf\u{E9}"]
        let head = ClientHead.forwarded(status: 206, reason: "Partial Content", fields: fields, framing: .chunked, length: nil,
                                        noBody: false, age: 3, cacheStatus: "larder; fwd=miss", date: date, connection: .close,
                                        isHidden: { _ in false }, as: HTTP2Head.self)
        XCTAssertEqual(text(head), [":status: 206", "content-type: text/plain", "x-latin: caf\u{FFFD}", "age: 3",
                                    "cache-status: larder; fwd=miss", "date: Tue, 24 Nov 2026 10:00:00 GMT"])
        XCTAssertTrue(head.block.bytes.contains(0xE9), "obs-text goes as the byte it was, not as UTF-8")
    }

    func testStoredHeadsTailsAndAnswersMadeHere() {
        let tail = ClientHead.Tail(age: 7, date: date, cacheStatus: CacheStatus.hit(ttl: 60), connection: .keepAlive)
        let notModified = ClientHead.notModified(fields: ["etag": "\"1\"", "content-type": "text/plain"], tail: tail, as: HTTP2Head.self)
        XCTAssertEqual(text(notModified), [":status: 304", "etag: \"1\"", "date: Tue, 24 Nov 2026 10:00:00 GMT", "age: 7",
                                           "cache-status: larder; hit; ttl=60"])
        let partial = ClientHead.partial(fields: ["content-type": "text/plain"], range: 0...9, length: 100, tail: tail,
                                         isHidden: { _ in false }, as: HTTP2Head.self)
        XCTAssertEqual(Array(text(partial).prefix(4)), [":status: 206", "content-type: text/plain", "content-range: bytes 0-9/100",
                                                        "content-length: 10"])
        let made = ClientHead.madeHere(status: 400, message: "bad request", extra: [], close: true, as: HTTP2Head.self)
        XCTAssertEqual(text(made.head), [":status: 400", "content-type: text/plain; charset=utf-8", "content-length: 12"],
                       "no Connection: the stream's end is the answer's")
        XCTAssertEqual(made.body, Array("bad request\n".utf8))
        XCTAssertEqual(text(ClientHead.interim(status: 103, fields: ["link": "</a.css>; rel=preload"], as: HTTP2Head.self)),
                       [":status: 103", "link: </a.css>; rel=preload"])
    }

    func testAWholeHitIsTheStoredFieldsWithTheirLengthThenTheTail() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "larder-cache-control", stripTargetedFields: true)
        let timing = ResponseTiming(requestTime: 1_000, responseTime: 1_000, dateValue: 1_000, ageValue: 0)
        let stored = builder.storedHead(key: "/h", status: 200, reason: nil,
                                        headers: ["content-type": "text/html", "cache-control": "max-age=60",
                                                  "larder-cache-control": "max-age=600", "date": "Tue, 24 Nov 2026 09:00:00 GMT"],
                                        timing: timing, tags: []) { _ in nil }
        let entry = Array("hello".utf8).withUnsafeBytes { CachedResponse.make(head: stored, body: $0) }
        var head = HTTP2Head(stored: entry, dropping: nil)
        head.hitTail(age: 2, cacheStatus: CacheStatus.hit(ttl: 58), connection: .implicit)
        XCTAssertEqual(text(head), [":status: 200", "content-type: text/html", "cache-control: max-age=60",
                                    "date: Tue, 24 Nov 2026 09:00:00 GMT", "content-length: 5", "age: 2",
                                    "cache-status: larder; hit; ttl=58"], "the field kept for Larder is not sent")
    }
}
