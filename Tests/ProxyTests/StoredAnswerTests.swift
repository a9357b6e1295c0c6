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
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\n"), entry: entry()), .partial(2...4))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=-3\r\n"), entry: entry()), .partial(7...9))
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=50-\r\n"), entry: entry()), .unsatisfiable)
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\nIf-Range: \"v0\"\r\n"), entry: entry()), .whole)
        XCTAssertEqual(StoredAnswer.choose(for: try request("HEAD", "Range: bytes=2-4\r\n"), entry: entry()), .whole,
                       "a range applies to GET only")
        XCTAssertEqual(StoredAnswer.choose(for: try request("GET", "Range: bytes=2-4\r\n"), entry: entry(status: 203)), .whole)
    }
}
