import HTTPHeaders
import XCTest
import CacheSemantics
@testable import CacheStorage

final class CachedResponseTests: XCTestCase {
    private let timing = ResponseTiming(requestTime: 10, responseTime: 12, dateValue: 11, ageValue: 5)

    private func entry(head: String, body: String = "hello", other: HeaderFields = [],
                       vary: [String] = [], tags: [String] = []) -> CachedResponse {
        CachedResponse.make(key: "/k", status: 200, headPrefix: Array(head.utf8), body: Array(body.utf8), otherFields: other,
                            timing: timing, lifetime: 60, cacheControl: CacheControl("max-age=60, stale-if-error=5"),
                            varyNames: vary, varyValues: vary.map { _ in "gzip" }, tags: tags)
    }

    func testHeadAndBodyShareOneBlock() {
        let e = entry(head: "HTTP/1.1 200 OK\r\nEtag: \"v1\"\r\nContent-Length: 5\r\n")
        XCTAssertEqual(String(decoding: e.headPrefix, as: UTF8.self), "HTTP/1.1 200 OK\r\nEtag: \"v1\"\r\nContent-Length: 5\r\n")
        XCTAssertEqual(String(decoding: e.body, as: UTF8.self), "hello")
        XCTAssertEqual(e.body.baseAddress, e.blockStart + e.headLength)
        XCTAssertEqual(e.bodyLength, 5)
        XCTAssertEqual(e.key, "/k")
        let unicode = CachedResponse.make(key: "/caf\u{e9}?q=\u{1F600}", status: 204, headPrefix: [], body: [], timing: timing,
                                          lifetime: 1, cacheControl: CacheControl(), varyNames: [], varyValues: [])
        XCTAssertEqual(unicode.key, "/caf\u{e9}?q=\u{1F600}")
        XCTAssertEqual(unicode.keyBytes.count, "/caf\u{e9}?q=\u{1F600}".utf8.count)
    }

    func testTheContentLengthFieldIsWrittenDigitByDigit() {
        for length in [0, 1, 9, 10, 99, 100, 1023, 1024, 999_999, 1_000_000] {
            let entry = [UInt8](repeating: 0x7A, count: length).withUnsafeBytes {
                CachedResponse.make(head: testHead("/n"), body: $0)
            }
            XCTAssertTrue(String(decoding: entry.headPrefix, as: UTF8.self).hasSuffix("\r\nContent-Length: \(length)\r\n"), "\(length)")
            XCTAssertEqual(entry.bodyLength, length)
        }
        // A body in a file: only the field is in the block.
        let large = CachedResponse.make(head: testHead("/f"), body: UnsafeRawBufferPointer(start: nil, count: 0),
                                        bodyFile: FileBody(opening: "/dev/null", offset: 0, length: 12_345_678_901))
        XCTAssertTrue(String(decoding: large.headPrefix, as: UTF8.self).hasSuffix("Content-Length: 12345678901\r\n"))
    }

    func testFieldsAreReadBackFromTheHead() {
        let e = entry(head: "HTTP/1.1 200 Fine Thanks\r\nDate: Sun, 22 Nov 2026 12:00:00 GMT\r\nETag: \"v1\"\r\n"
                          + "X-Multi: a\r\nX-Multi: b\r\nContent-Length: 5\r\n",
                      other: ["cdn-cache-control": "max-age=600"])
        XCTAssertEqual(e.headers.map { "\($0.name)=\($0.value)" },
                       ["date=Sun, 22 Nov 2026 12:00:00 GMT", "etag=\"v1\"", "x-multi=a", "x-multi=b", "cdn-cache-control=max-age=600"])
        XCTAssertEqual(e.etag, "\"v1\"")
        XCTAssertNil(e.lastModified)
        XCTAssertTrue(e.hasValidator)
        XCTAssertEqual(e.header("cdn-cache-control"), "max-age=600")
        XCTAssertEqual(e.reason, "Fine Thanks")
        XCTAssertEqual(e.status, 200)
    }

    func testNoValidatorAndDirectivesKept() {
        let e = entry(head: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n")
        XCTAssertFalse(e.hasValidator)
        XCTAssertEqual(e.cacheControl.maxAge, 60)
        XCTAssertEqual(e.cacheControl.staleIfError, 5)
        XCTAssertEqual(e.lifetime, 60)
        XCTAssertEqual(e.timing, timing)
        XCTAssertEqual(e.correctedInitialAge, Freshness.correctedInitialAge(timing))
        XCTAssertEqual(e.varyNames, [])
        XCTAssertEqual(e.tags, [])
    }

    func testRarePartsAndSoftPurgeCopy() {
        let e = entry(head: "HTTP/1.1 200 OK\r\nLast-Modified: Sun, 22 Nov 2026 11:00:00 GMT\r\n", vary: ["accept-encoding"],
                      tags: ["t1"])
        let stale = e.markedStale()
        XCTAssertEqual(stale.lifetime, 0)
        XCTAssertEqual(stale.varyNames, ["accept-encoding"])
        XCTAssertEqual(stale.varyValues, ["gzip"])
        XCTAssertEqual(stale.tags, ["t1"])
        XCTAssertTrue(stale.hasValidator)
        XCTAssertEqual(Array(stale.headPrefix), Array(e.headPrefix))
        XCTAssertEqual(Array(stale.body), Array(e.body))
        XCTAssertGreaterThan(e.costBytes, entry(head: "HTTP/1.1 200 OK\r\nLast-Modified: Sun, 22 Nov 2026 11:00:00 GMT\r\n").costBytes)
    }

    /// A 206 whose body is not the length its Content-Range says (a damaged
    /// or forged record) holds no piece: nothing would read its ranges past
    /// its body.
    func testAPieceIsOnlyWhatItsBodyHolds() {
        func piece(_ range: String, body: String) -> CachedResponse {
            CachedResponse.make(key: "/k", status: 206, headPrefix: Array("HTTP/1.1 206 Partial Content\r\nContent-Range: \(range)\r\n".utf8),
                                body: Array(body.utf8), timing: timing, lifetime: 60, cacheControl: CacheControl("max-age=60"),
                                varyNames: [], varyValues: [])
        }
        XCTAssertEqual(piece("bytes 0-4/100", body: "hello").storedPiece, PartialContent.Piece(first: 0, last: 4, length: 100))
        XCTAssertNil(piece("bytes 0-999/2000", body: "hello").storedPiece, "says more than it holds")
        XCTAssertNil(piece("bytes 0-1/100", body: "hello").storedPiece, "holds more than it says")
    }
}
