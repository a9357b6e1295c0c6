import XCTest
@testable import CacheSemantics

/// RFC 9110 section 12.5.3: what a client takes, and the one variant key
/// every spelling of the same preference gets.
final class AcceptEncodingTests: XCTestCase {
    func testQualitiesFromTheListTheWildcardAndIdentitysDefault() {
        let ae = AcceptEncoding("gzip;q=0.8, br, *;q=0.1")
        XCTAssertEqual(ae.quality("br"), 1)
        XCTAssertEqual(ae.quality("gzip"), 0.8)
        XCTAssertEqual(ae.quality("zstd"), 0.1, "from the wildcard")
        XCTAssertEqual(ae.quality("identity"), 1, "identity is acceptable unless excluded")
        XCTAssertFalse(AcceptEncoding("gzip, *;q=0").accepts("identity"))
        XCTAssertFalse(AcceptEncoding("identity;q=0, gzip").accepts("identity"))
        XCTAssertTrue(AcceptEncoding("X-GZIP").accepts("gzip"), "x-gzip is gzip (section 8.4.1.3)")
        XCTAssertFalse(AcceptEncoding("gzip;q=0").accepts("gzip"))
        XCTAssertFalse(AcceptEncoding("gzip;q=1.5").accepts("gzip"), "an invalid qvalue counts as 0")
        XCTAssertFalse(AcceptEncoding(nil).accepts("gzip"), "no field: only identity (curl cannot decode)")
        XCTAssertTrue(AcceptEncoding(nil).accepts("identity"))
        XCTAssertFalse(AcceptEncoding("").accepts("gzip"))
        XCTAssertTrue(AcceptEncoding(" gzip ; q=0.5 ,").accepts("gzip"), "whitespace and empty members")
    }

    func testEverySpellingOfOnePreferenceGetsOneKey() {
        for browser in ["gzip, deflate, br", "gzip, deflate, br, zstd", "br;q=1.0, gzip;q=0.8, *;q=0.1", "deflate, gzip, br, zstd", "br"] {
            XCTAssertEqual(Vary.normalize(browser, field: "accept-encoding"), "br", browser)
        }
        for other in [nil, "", "gzip", "GZIP, deflate", "identity", "deflate", "gzip;q=1, br;q=0.5", "br;q=0, gzip", "*;q=0"] {
            XCTAssertEqual(Vary.normalize(other, field: "accept-encoding"), "gzip", other ?? "no field")
        }
    }

    func testTheUpstreamIsAskedForTheCodingsOfTheVariantTheClientTakes() {
        XCTAssertEqual(AcceptEncoding("gzip, deflate, br").upstreamValue, "br, gzip")
        XCTAssertEqual(AcceptEncoding("br").upstreamValue, "br")
        XCTAssertEqual(AcceptEncoding("deflate, gzip").upstreamValue, "gzip")
        XCTAssertEqual(AcceptEncoding(nil).upstreamValue, "identity")
        XCTAssertEqual(AcceptEncoding("gzip;q=0").upstreamValue, "identity")
    }

    func testWhetherABodyMayGoAsItIs() {
        XCTAssertTrue(AcceptEncoding(nil).takes(contentEncoding: nil))
        XCTAssertFalse(AcceptEncoding(nil).takes(contentEncoding: "gzip"))
        XCTAssertTrue(AcceptEncoding("gzip").takes(contentEncoding: "x-gzip"))
        XCTAssertFalse(AcceptEncoding("gzip").takes(contentEncoding: "gzip, br"), "every coding applied must be taken")
        XCTAssertTrue(AcceptEncoding("gzip").takes(contentEncoding: "identity"))
        XCTAssertEqual(StoredCoding.of(" GZIP"), .gzip)
        XCTAssertEqual(StoredCoding.of("x-gzip"), .gzip)
        XCTAssertEqual(StoredCoding.of("zstd"), .zstd)
        XCTAssertEqual(StoredCoding.of("Br "), .br)
        XCTAssertEqual(StoredCoding.of("gzip, br"), StoredCoding.none, "two codings: not decoded here")
        XCTAssertEqual(StoredCoding.of("deflate"), StoredCoding.none)
        XCTAssertEqual(StoredCoding.of(nil), StoredCoding.none)
        XCTAssertTrue(AcceptEncoding.takes(.zstd, "gzip, zstd"))
        XCTAssertFalse(AcceptEncoding.takes(.zstd, "gzip, br"))
        XCTAssertFalse(AcceptEncoding.takes(.br, "br;q=0, *"))
        XCTAssertTrue(AcceptEncoding.takes(.br, "*"))
        XCTAssertFalse(AcceptEncoding.takes(.gzip, nil))
        XCTAssertTrue(AcceptEncoding.takes(StoredCoding.none, nil))
    }
}

extension AcceptEncodingTests {
    /// The byte-level answer a hit asks for agrees with the parsed list.
    func testTakesGzipAgreesWithTheParsedList() {
        let values: [String?] = [nil, "", "gzip", "GZIP", " gzip ", "gzip, deflate, br", "deflate, br", "br;q=1.0, gzip;q=0.8, *;q=0.1",
                                 "gzip;q=0", "gzip;q=0, identity", "x-gzip", "X-Gzip, br", "*", "*;q=0", "identity", "gzipx",
                                 "agzip", "deflate,gzip", ",,gzip,,", "deflate, *", "\tgzip\t", "gzip,\tbr", "identity;q=1, gzip"]
        for value in values {
            XCTAssertEqual(AcceptEncoding.takesGzip(value), AcceptEncoding(value).accepts("gzip"), value ?? "nil")
        }
    }
}
