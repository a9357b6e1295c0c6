import HTTPHeaders
import XCTest
import CacheSemantics
import CacheStorage
@testable import Proxy

/// `compress`: which responses are stored gzip encoded, and the fields of
/// the compressed copy.
final class StoredCompressionTests: XCTestCase {
    private func patterns(_ list: [String]) throws -> MediaTypePatterns {
        try MediaTypePatterns.parse(list).get()
    }

    func testOnlyWholeUncodedListedBodiesWithoutNoTransformAreCompressed() throws {
        let json = try patterns(["application/json"])
        let plain: HeaderFields = ["content-type": "application/json"]
        func applies(_ status: Int = 200, _ headers: HeaderFields = ["content-type": "application/json"],
                     cc: String = "max-age=60", types: MediaTypePatterns? = nil) -> Bool {
            StoredCompression.applies(status: status, headers: headers, cc: CacheControl(cc), types: types ?? json)
        }
        XCTAssertTrue(applies())
        XCTAssertTrue(applies(404))
        XCTAssertTrue(applies(200, ["content-type": "application/json", "content-encoding": "identity"]))
        XCTAssertFalse(applies(cc: "max-age=60, no-transform"), "RFC 9110 section 7.7")
        XCTAssertFalse(applies(200, ["content-type": "application/json", "content-encoding": "gzip"]), "coded already")
        XCTAssertFalse(applies(200, ["content-type": "application/json", "content-encoding": "br"]))
        XCTAssertFalse(applies(206, ["content-type": "application/json", "content-range": "bytes 0-9/100"]))
        XCTAssertFalse(applies(200, ["content-type": "application/json", "content-range": "bytes 0-9/100"]))
        XCTAssertFalse(applies(204))
        XCTAssertFalse(applies(304))
        XCTAssertFalse(applies(200, ["content-type": "image/png"]))
        XCTAssertFalse(applies(200, []), "no Content-Type: not a listed type")
        XCTAssertFalse(applies(types: MediaTypePatterns()), "off")
        XCTAssertTrue(applies(200, plain))
    }

    func testTheCompressedCopySaysGzipWeakensTheETagAndVariesOnAcceptEncoding() {
        let fields = StoredCompression.fields(["content-type": "text/html", "etag": "\"v1\"", "content-length": "900"])
        XCTAssertEqual(fields["content-encoding"], "gzip")
        XCTAssertEqual(fields["etag"], "W/\"v1\"")
        XCTAssertEqual(fields["vary"], "Accept-Encoding")
        XCTAssertEqual(fields["content-type"], "text/html")

        let weak = StoredCompression.fields(["etag": "W/\"v2\"", "vary": "Accept-Language", "content-encoding": "identity"])
        XCTAssertEqual(weak["etag"], "W/\"v2\"", "weak already")
        XCTAssertEqual(weak.values("vary"), ["Accept-Language", "Accept-Encoding"])
        XCTAssertEqual(weak.values("content-encoding"), ["gzip"], "identity replaced")

        XCTAssertEqual(StoredCompression.fields(["vary": "Origin, accept-encoding"]).values("vary"), ["Origin, accept-encoding"])
        XCTAssertEqual(StoredCompression.fields(["vary": "*"]).values("vary"), ["*"])
    }

    func testARefreshingStrongETagStaysWeakOnTheCompressedCopy() {
        let merged: HeaderFields = ["etag": "\"v1\"", "cache-control": "max-age=5"]
        XCTAssertEqual(StoredCompression.keepWeak(stored: "W/\"v1\"", merged: merged)["etag"], "W/\"v1\"")
        XCTAssertEqual(StoredCompression.keepWeak(stored: "W/\"v0\"", merged: merged)["etag"], "\"v1\"", "another representation")
        XCTAssertEqual(StoredCompression.keepWeak(stored: "\"v1\"", merged: merged)["etag"], "\"v1\"")
        XCTAssertEqual(StoredCompression.keepWeak(stored: nil, merged: merged), merged)
    }

    /// The stored copy does not select on the Vary it adds: every client
    /// finds it (those that do not take gzip get it decoded).
    func testTheCompressedHeadSelectsAsTheUpstreamsVarySays() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        let upstream: HeaderFields = ["content-type": "application/json", "vary": "Accept-Language", "cache-control": "max-age=60"]
        let timing = ResponseTiming(requestTime: 1000, responseTime: 1000, dateValue: 1000, ageValue: 0)
        let plain = builder.storedHead(key: "/j", status: 200, reason: nil, headers: upstream, timing: timing, tags: []) { _ in "en" }
        let head = builder.storedHead(key: "/j", status: 200, reason: nil, headers: StoredCompression.fields(upstream),
                                      timing: timing, tags: [], varyNames: plain.varyNames) { _ in "en" }
        XCTAssertEqual(head.varyNames, ["accept-language"])
        XCTAssertEqual(head.coding, .gzip)
        XCTAssertEqual(head.lifetime, plain.lifetime)
        let text = String(decoding: head.headPrefix, as: UTF8.self).lowercased()
        XCTAssertTrue(text.contains("vary: accept-encoding"), text)

        let entry = [UInt8](repeating: 1, count: 10).withUnsafeBytes { CachedResponse.make(head: head, body: $0) }
        let refreshed = builder.refresh(entry, with: ["cache-control": "max-age=99"], timing: timing)
        XCTAssertEqual(refreshed.varyNames, ["accept-language"], "a refresh selects as before")
        XCTAssertEqual(refreshed.coding, .gzip)
    }
}
