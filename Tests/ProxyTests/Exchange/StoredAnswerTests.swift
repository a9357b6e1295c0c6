import HTTPHeaders
import XCTest
import CacheSemantics
import CacheStorage
import HTTP1
@testable import Proxy

/// What a stored response becomes for a request: 304, whole, 206 or 416.
final class StoredAnswerTests: XCTestCase {
    private struct Unparsed: Error {}

    private func request(_ method: String = "GET", _ lines: String = "") throws -> RequestHead {
        var parser = RequestParser()
        let text = "\(method) /r HTTP/1.1\r\nHost: example\r\n" + lines + "\r\n"
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else { throw Unparsed() }
        return head
    }

    private func entry(status: Int = 200, _ fields: HeaderFields = ["etag": "\"v1\"", "last-modified": "Sun, 01 Nov 2026 00:00:00 GMT"],
                       body: String = "0123456789") -> CachedResponse {
        var headers: HeaderFields = ["cache-control": "max-age=60"]
        headers.append(contentsOf: fields)
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        return Array(body.utf8).withUnsafeBytes {
            builder.build(key: "/r", status: status, reason: nil, headers: headers, body: $0,
                          timing: ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0), tags: [],
                          varyFrom: { _ in nil })
        }
    }

    func testAPlainRequestGetsTheWholeResponse() throws {
        XCTAssertEqual(StoredAnswer.choose(for: try request(), entry: entry()), .whole)
        XCTAssertEqual(StoredAnswer.choose(for: try request("HEAD"), entry: entry()), .whole)
    }

    func testAMatchingConditionalGetsA304AndAnotherValidatorTheWhole() throws {
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-None-Match: \"v1\"\r\n"), entry: entry()), .notModified)
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-None-Match: W/\"v1\", \"v0\"\r\n"), entry: entry()),
                       .notModified, "weak comparison")
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-None-Match: \"v2\"\r\n"), entry: entry()), .whole)
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-Modified-Since: Mon, 02 Nov 2026 00:00:00 GMT\r\n"),
                                           entry: entry()), .notModified)
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-Modified-Since: Sat, 31 Oct 2026 00:00:00 GMT\r\n"),
                                           entry: entry()), .whole)
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-None-Match: \"v1\"\r\n"), entry: entry(status: 404)), .whole,
                       "only a 200 is answered with a 304")
    }

    func testARangeGetsA206OrA416AndAnIfRangeThatNoLongerMatchesTheWhole() throws {
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\n"), entry: entry()), .partial(2...4, length: 10, stored: 0))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=-3\r\n"), entry: entry()), .partial(7...9, length: 10, stored: 0))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=50-\r\n"), entry: entry()), .unsatisfiable(length: 10))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\nIf-Range: \"v0\"\r\n"), entry: entry()), .whole)
        XCTAssertEqual(StoredAnswer.choose(for: try request("HEAD", "Range: bytes=2-4\r\n"), entry: entry()), .whole,
                       "a range applies to GET only")
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\n"), entry: entry(status: 203)), .whole)
    }

    /// A stored piece (206 of bytes 4-9 of 10) answers the ranges it
    /// holds, from its own offset; the lookup leaves it out for others.
    func testAStoredPieceAnswersOnlyTheRangesItHolds() throws {
        let piece = entry(status: 206, ["etag": "\"v1\"", "content-range": "bytes 4-9/10"], body: "456789")
        XCTAssertEqual(piece.piece, PartialContent.Piece(first: 4, last: 9, length: 10))
        func answer(_ range: String?, method: String = "GET") throws -> StoredAnswer {
            StoredAnswer.choose(for: try request(method, range.map { "Range: \($0)\r\n" } ?? ""), entry: piece)
        }
        XCTAssertEqual(try answer("bytes=-5"), .partial(5...9, length: 10, stored: 4))
        XCTAssertEqual(try answer("bytes=6-8"), .partial(6...8, length: 10, stored: 4))
        XCTAssertEqual(try answer("bytes=6-"), .partial(6...9, length: 10, stored: 4))
        XCTAssertEqual(try answer("bytes=-1"), .partial(9...9, length: 10, stored: 4))
        XCTAssertEqual(try answer("bytes=20-"), .unsatisfiable(length: 10))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "If-None-Match: \"v1\"\r\n"), entry: piece), .notModified)

        let whole = entry()
        func usable(_ lines: String, method: String = "GET") throws -> [Int] {
            StoredAnswer.usable(Variants([whole, piece]), for: try request(method, lines)).map(\.status)
        }
        XCTAssertEqual(try usable("Range: bytes=5-7\r\n"), [200, 206])
        XCTAssertEqual(try usable("Range: bytes=20-\r\n"), [200, 206], "416 is known from the piece's length")
        XCTAssertEqual(try usable("Range: bytes=0-7\r\n"), [200], "bytes the piece does not hold")
        XCTAssertEqual(try usable(""), [200], "no range: never a piece")
        XCTAssertEqual(try usable("Range: bytes=5-7\r\n", method: "HEAD"), [200])
        XCTAssertEqual(try usable("Range: bytes=5-7\r\nIf-Range: \"v0\"\r\n"), [200], "If-Range asks for the whole")
        let gzipPiece = entry(status: 206, ["content-encoding": "gzip", "content-range": "bytes 4-9/10"], body: "456789")
        XCTAssertEqual(StoredAnswer.usable(Variants([gzipPiece]), for: try request("GET", "Range: bytes=5-7\r\n")).count, 0,
                       "a piece of gzip cannot be decoded for a client without gzip")
        XCTAssertEqual(StoredAnswer.usable(Variants([gzipPiece]),
                                           for: try request("GET", "Range: bytes=5-7\r\nAccept-Encoding: gzip\r\n")).count, 1)
    }
}
