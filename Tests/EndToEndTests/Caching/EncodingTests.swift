import Foundation
import XCTest

/// Content codings end to end: one stored copy per Accept-Encoding variant
/// key whatever the clients' headers say, and a gzip body decoded for
/// clients that do not take gzip (as if the decoded body were stored).
final class EncodingEndToEndTests: ProxyTestCase {
    /// The origin's body for a path, before any coding (origin.py's pattern).
    private func plainBody(_ target: String) throws -> [UInt8] {
        try larder.client().get(target.replacingOccurrences(of: "gzip=1", with: "plain=1")).body
    }

    func testOneGzipCopyServesEveryClientDecodedWhereItMustBe() throws {
        let target = "/gz/a?gzip=1&size=5000&etag=g1"
        let plain = try plainBody(target)
        XCTAssertEqual(plain.count, 5000)
        let c = try larder.client()
        let gzipped = try c.get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertEqual(gzipped.header("content-encoding"), "gzip")
        XCTAssertEqual(Array(gzipped.body.prefix(2)), [0x1F, 0x8B])
        XCTAssertLessThan(gzipped.body.count, plain.count)
        XCTAssertEqual(try originHeaders(target)["accept-encoding"], "gzip", "the variant's coding is asked for")

        for accept in [nil, "identity", "deflate", "gzip;q=0, identity"] {
            let decoded = try c.get(target, headers: accept.map { ["Accept-Encoding: \($0)"] } ?? [])
            let why = accept ?? "no Accept-Encoding"
            XCTAssertEqual(decoded.status, 200, why)
            XCTAssertTrue(decoded.header("cache-status")?.hasPrefix("larder; hit") ?? false, why)
            XCTAssertNil(decoded.header("content-encoding"), why)
            XCTAssertEqual(decoded.header("content-length"), "5000", why)
            XCTAssertEqual(decoded.body, plain, why)
            XCTAssertEqual(decoded.header("etag"), "W/\"g1\"", "\(why): the decoded bytes are not what the strong tag names")
        }
        for accept in ["GZIP, deflate", "deflate, gzip;q=0.9", "x-gzip"] {
            let same = try c.get(target, headers: ["Accept-Encoding: \(accept)"])
            XCTAssertEqual(same.body, gzipped.body, accept)
            XCTAssertTrue(same.header("cache-status")?.hasPrefix("larder; hit") ?? false, accept)
        }
        XCTAssertEqual(try origin.count(target), 1, "one stored copy for all of them")

        // HEAD, Range and a conditional request see the decoded body.
        let head = try c.request("HEAD", target)
        XCTAssertEqual(head.header("content-length"), "5000")
        XCTAssertNil(head.header("content-encoding"))
        XCTAssertTrue(head.body.isEmpty)
        let part = try c.get(target, headers: ["Range: bytes=100-109"])
        XCTAssertEqual(part.status, 206)
        XCTAssertEqual(part.header("content-range"), "bytes 100-109/5000")
        XCTAssertEqual(part.body, Array(plain[100..<110]))
        XCTAssertEqual(try c.get(target, headers: ["If-None-Match: W/\"g1\""]).status, 304)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// Browsers, curl --compressed and libraries each spell Accept-Encoding
    /// differently: those that prefer brotli share one variant, the rest another.
    func testAcceptEncodingIsNormalisedToOneVariantPerPreferredCoding() throws {
        let target = "/gz/b?gzip=1&size=300"
        let c = try larder.client()
        _ = try c.get(target, headers: ["Accept-Encoding: gzip, deflate, br, zstd"])  // Chrome
        XCTAssertEqual(try originHeaders(target)["accept-encoding"], "br, gzip")
        for accept in ["gzip, deflate, br", "br;q=1.0, gzip;q=0.8, *;q=0.1", "deflate, gzip, br, zstd"] {  // Safari, a library, curl
            let again = try c.get(target, headers: ["Accept-Encoding: \(accept)"])
            XCTAssertTrue(again.header("cache-status")?.hasPrefix("larder; hit") ?? false, accept)
            XCTAssertEqual(again.header("content-encoding"), "gzip", "this origin has no brotli: its gzip is kept")
        }
        XCTAssertEqual(try origin.count(target), 1)
        _ = try c.get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertEqual(try origin.count(target), 2, "a client without brotli is another variant")
        _ = try c.get(target)
        XCTAssertEqual(try origin.count(target), 2, "and shares it with clients that take no coding")
    }

    /// A stored body that says gzip but is not: the client is not sent
    /// garbage it cannot decode from the cache; the upstream is asked again.
    func testABodyThatIsNotValidGzipIsFetchedAgainNotServedUndecoded() throws {
        let target = "/gz/c?extra=Content-Encoding:gzip&size=64"
        let c = try larder.client()
        _ = try c.get(target, headers: ["Accept-Encoding: gzip"])
        let answer = try c.get(target)
        XCTAssertEqual(answer.status, 200)
        XCTAssertFalse(answer.header("cache-status")?.contains("hit") ?? true)
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertEqual(try c.get("/gz/c-after?size=3").status, 200, "Larder goes on")
    }
}
