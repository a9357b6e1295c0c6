import XCTest
import CacheSemantics

final class PackedCacheControlTests: XCTestCase {
    /// Every directive survives packing; only the field-name lists are dropped.
    func testRoundTripKeepsEveryDirective() {
        let values = [
            "", "no-store", "no-cache", "private", "must-understand, no-store", "public, max-age=60",
            "must-revalidate", "proxy-revalidate", "no-transform", "immutable", "only-if-cached",
            "max-age=0, s-maxage=120", "max-stale", "max-stale=30, min-fresh=5",
            "stale-while-revalidate=30, stale-if-error=86400", "max-age=99999999999999",
            "public, max-age=1, s-maxage=2, must-revalidate, proxy-revalidate, immutable, no-transform, stale-if-error=3",
        ]
        for value in values {
            let cc = CacheControl(value)
            XCTAssertEqual(PackedCacheControl(cc).unpacked, cc, value)
        }
    }

    func testFieldNameListsAreNotKept() {
        let cc = CacheControl("no-cache=\"set-cookie\", private=\"x-user\", max-age=60")
        var expected = cc
        expected.noCacheFields = []
        expected.privateFields = []
        XCTAssertEqual(PackedCacheControl(cc).unpacked, expected)
        XCTAssertFalse(PackedCacheControl(cc).unpacked.noCache)
    }

    func testValuesSaturateLikeParsedOnes() {
        var cc = CacheControl()
        cc.maxAge = 5_000_000_000
        cc.staleIfError = -3
        cc.maxStale = Int.max
        let unpacked = PackedCacheControl(cc).unpacked
        XCTAssertEqual(unpacked.maxAge, 2_147_483_648)
        XCTAssertEqual(unpacked.staleIfError, 0)
        XCTAssertEqual(unpacked.maxStale, Int.max)
        XCTAssertNil(unpacked.sMaxAge)
    }
}
