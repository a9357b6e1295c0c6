import HTTPHeaders
import XCTest
@testable import Proxy

/// The heads written to a client, byte for byte as HTTP/1.1 text, without
/// a socket (their HTTP/2 fields: HTTP2HeadTests).
final class ClientHeadTests: XCTestCase {
    private let date = DateHeader.Value(line: Array("Date: Tue, 24 Nov 2026 10:00:00 GMT\r\n".utf8))

    private func text(_ head: HTTP1Head) -> String { String(decoding: head.bytes, as: UTF8.self) }
    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    private func forwarded(_ fields: HeaderFields, status: Int = 200, framing: ClientFraming = .length, length: Int? = 5,
                           noBody: Bool = false, age: Int? = 3, connection: ConnectionField = .implicit) -> String {
        text(ClientHead.forwarded(status: status, reason: nil, fields: fields, framing: framing, length: length, noBody: noBody,
                                  age: age, cacheStatus: "larder; fwd=miss", date: date, connection: connection,
                                  isHidden: { $0 == "cdn-cache-control" }, as: HTTP1Head.self))
    }

    func testAForwardedHeadHasOneLengthLarderSAgeAndNoHiddenField() {
        let head = forwarded(["content-type": "text/plain", "content-length": "999", "age": "100",
                              "cdn-cache-control": "max-age=9", "date": "Mon, 23 Nov 2026 10:00:00 GMT"])
        XCTAssertEqual(head, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: Mon, 23 Nov 2026 10:00:00 GMT\r\n"
                       + "Content-Length: 5\r\nAge: 3\r\nCache-Status: larder; fwd=miss\r\n\r\n")
    }

    func testAForwardedHeadWithoutDateGetsTheCurrentOneAndKeepsTheUpstreamsAgeWhenLarderHasNone() {
        let head = forwarded(["age": "100"], age: nil)
        XCTAssertTrue(head.contains("Age: 100\r\n"), head)
        XCTAssertTrue(head.contains("Date: Tue, 24 Nov 2026 10:00:00 GMT\r\n"), head)
    }

    func testFramingFieldsFollowTheClientFraming() {
        let chunked = forwarded([:], framing: .chunked, length: nil)
        XCTAssertTrue(chunked.contains("Transfer-Encoding: chunked\r\n"))
        XCTAssertFalse(chunked.contains("Content-Length"))
        let untilClose = forwarded([:], framing: .untilClose, length: nil, connection: .keepAlive)
        XCTAssertTrue(untilClose.contains("Connection: close\r\n"), "a close-delimited body ends with the connection")
        XCTAssertFalse(untilClose.contains("keep-alive"))
        XCTAssertFalse(forwarded([:], status: 204, framing: .none, length: 0, noBody: true).contains("Content-Length"),
                       "RFC 9110 section 8.6: none on a 204")
        XCTAssertTrue(forwarded([:], framing: .none, length: 7, noBody: true).contains("Content-Length: 7\r\n"),
                      "a HEAD answer says the length the GET would have")
    }

    func testTheChoiceOfFramingAndConnectionField() {
        XCTAssertEqual(ClientFraming.choose(noBody: true, length: 5, minorVersion: 1), .none)
        XCTAssertEqual(ClientFraming.choose(noBody: false, length: 5, minorVersion: 0), .length)
        XCTAssertEqual(ClientFraming.choose(noBody: false, length: nil, minorVersion: 1), .chunked)
        XCTAssertEqual(ClientFraming.choose(noBody: false, length: nil, minorVersion: 0), .untilClose)
        XCTAssertEqual(ConnectionField(keepAlive: true, minorVersion: 1), .implicit)
        XCTAssertEqual(ConnectionField(keepAlive: true, minorVersion: 0), .keepAlive)
        XCTAssertEqual(ConnectionField(keepAlive: false, minorVersion: 1), .close)
    }

    private var tail: ClientHead.Tail { ClientHead.Tail(age: 7, date: date,
                                                        cacheStatus: .bytes(Array("Cache-Status: larder; hit\r\n".utf8)), connection: .close) }

    func testANotModifiedHeadKeepsOnlyTheFieldsThatDescribeTheRepresentation() {
        let head = text(ClientHead.notModified(fields: ["etag": "\"1\"", "content-type": "text/plain", "content-length": "5",
                                                        "cache-control": "max-age=60", "x-other": "1"], tail: tail, as: HTTP1Head.self))
        XCTAssertEqual(head, "HTTP/1.1 304 Not Modified\r\nETag: \"1\"\r\nCache-Control: max-age=60\r\n"
                       + "Date: Tue, 24 Nov 2026 10:00:00 GMT\r\nAge: 7\r\nCache-Status: larder; hit\r\nConnection: close\r\n\r\n")
    }

    func testAPartialHeadNamesItsRangeAndAnUnsatisfiableOneTheWholeLength() {
        let fields: HeaderFields = ["content-type": "text/plain", "content-length": "100", "age": "1", "cdn-cache-control": "x",
                                    "date": "Mon, 23 Nov 2026 10:00:00 GMT"]
        let partial = text(ClientHead.partial(fields: fields, range: 10...19, length: 100, tail: tail,
                                              isHidden: { $0 == "cdn-cache-control" }, as: HTTP1Head.self))
        XCTAssertEqual(partial, "HTTP/1.1 206 Partial Content\r\nContent-Type: text/plain\r\nDate: Mon, 23 Nov 2026 10:00:00 GMT\r\n"
                       + "Content-Range: bytes 10-19/100\r\nContent-Length: 10\r\n"
                       + "Age: 7\r\nCache-Status: larder; hit\r\nConnection: close\r\n\r\n")
        let unsatisfiable = text(ClientHead.partial(fields: fields, range: nil, length: 100, tail: tail, isHidden: { _ in false },
                                                    as: HTTP1Head.self))
        XCTAssertTrue(unsatisfiable.hasPrefix("HTTP/1.1 416 Range Not Satisfiable\r\n"))
        XCTAssertTrue(unsatisfiable.contains("Content-Range: bytes */100\r\nContent-Length: 0\r\n"))
        XCTAssertTrue(unsatisfiable.contains("Cdn-Cache-Control: x\r\n"), "not hidden here: kept")
    }

    func testAnAnswerMadeHereSaysWhyInALineAndWhetherTheConnectionCloses() {
        let made = ClientHead.madeHere(status: 502, message: "bad gateway", extra: ["retry-after": "5"], close: true, as: HTTP1Head.self)
        XCTAssertEqual(text(made.head) + text(made.body), "HTTP/1.1 502 Bad Gateway\r\nRetry-After: 5\r\n"
                       + "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbad gateway\n")
        let interim = ClientHead.interim(status: 103, fields: ["link": "</a.css>; rel=preload", "connection": "close"], as: HTTP1Head.self)
        XCTAssertEqual(text(interim), "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n")
    }

    func testAHitTailEndsTheHead() {
        var out: [UInt8] = []
        ClientHead.appendHitTail(age: 0, cacheStatus: .bytes(Array("Cache-Status: larder; hit\r\n".utf8)), connection: .keepAlive, to: &out)
        XCTAssertEqual(text(out), "Age: 0\r\nCache-Status: larder; hit\r\nConnection: keep-alive\r\n\r\n")
        // A plain hit's line is written in place, whatever the digits of its ttl and age.
        for ttl in [0, 9, 3_600, Int.max] {
            out.removeAll()
            ClientHead.appendHitTail(age: Int.max, cacheStatus: CacheStatus.hit(ttl: ttl), connection: .keepAlive, to: &out)
            XCTAssertEqual(text(out), "Age: \(Int.max)\r\nCache-Status: larder; hit; ttl=\(ttl)\r\nConnection: keep-alive\r\n\r\n")
        }
    }

    /// A listener that also serves HTTP/3 says so on every head it ends (RFC 7838).
    func testHeadsOfAnHTTP3ListenerAdvertiseIt() {
        let field = ConnectionField(keepAlive: true, minorVersion: 1, altService: "h3=\":8443\"; ma=86400")
        var out: [UInt8] = []
        ClientHead.appendHitTail(age: 1, cacheStatus: .bytes(Array("Cache-Status: larder; hit\r\n".utf8)), connection: field, to: &out)
        XCTAssertEqual(text(out), "Age: 1\r\nCache-Status: larder; hit\r\nAlt-Svc: h3=\":8443\"; ma=86400\r\n\r\n")
        var made = HTTP1Head(status: 200, reason: nil)
        made.end(framing: .untilClose, connection: field)
        XCTAssertEqual(text(made.bytes), "HTTP/1.1 200 OK\r\nAlt-Svc: h3=\":8443\"; ma=86400\r\nConnection: close\r\n\r\n")
        var h2 = HTTP2Head(status: 200, reason: nil)
        h2.end(framing: .length, connection: ConnectionField(persistence: .implicit, altService: "h3=\":8443\"; ma=86400"))
        XCTAssertEqual(h2.block.fields.last?.name, "alt-svc")
        XCTAssertEqual(h2.block.fields.last?.value, "h3=\":8443\"; ma=86400")
    }

    func testTheEndOfAForwardedBody() {
        XCTAssertEqual(BodyEnd.decide(framing: .length, whole: true), .end(terminator: false, close: false))
        XCTAssertEqual(BodyEnd.decide(framing: .length, whole: false), .cut, "short of its length: the client must see it cut")
        XCTAssertEqual(BodyEnd.decide(framing: .chunked, whole: true), .end(terminator: true, close: false))
        XCTAssertEqual(BodyEnd.decide(framing: .untilClose, whole: true), .end(terminator: false, close: true))
        XCTAssertEqual(BodyEnd.decide(framing: .none, whole: false), .end(terminator: false, close: false),
                       "a 304 sent to the client while the body went on into the store: the client's answer is whole")
        XCTAssertTrue(BodyEnd.isWhole(expected: nil, received: 3))
        XCTAssertFalse(BodyEnd.isWhole(expected: 4, received: 3))
    }
}
