import XCTest
import CacheSemantics
@testable import CacheStorage

final class MemoryTierTests: XCTestCase {
    private func entry(_ key: String, bodyBytes: Int) -> CachedResponse {
        CachedResponse(key: key, status: 200, headPrefix: Bytes(Array("HTTP/1.1 200 OK\r\n".utf8)),
                       body: Bytes([UInt8](repeating: 0x61, count: bodyBytes)), headers: [],
                       timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                       lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: [], varyValues: [])
    }

    func testCostCountsHeadBodyAndOverhead() {
        let e = entry("/k", bodyBytes: 1000)
        XCTAssertEqual(e.costBytes, 17 + 1000 + 2 + CachedResponse.overheadBytes)
    }

    func testEvictsLeastRecentlyUsedByBytes() {
        let one = entry("/a", bodyBytes: 1000).costBytes
        let tier = MemoryTier(limitBytes: one * 3)
        tier.insert(entry("/a", bodyBytes: 1000))
        tier.insert(entry("/b", bodyBytes: 1000))
        tier.insert(entry("/c", bodyBytes: 1000))
        XCTAssertNotNil(tier.lookup("/a"))  // /a becomes most recent; /b is now the oldest
        tier.insert(entry("/d", bodyBytes: 1000))
        XCTAssertNil(tier.lookup("/b"))
        XCTAssertNotNil(tier.lookup("/a"))
        XCTAssertNotNil(tier.lookup("/c"))
        XCTAssertNotNil(tier.lookup("/d"))
        let stats = tier.stats
        XCTAssertEqual(stats.objects, 3)
        XCTAssertEqual(stats.bytes, one * 3)
        XCTAssertEqual(stats.evictions, 1)
    }

    func testALargeEntryEvictsSeveral() {
        let small = entry("/a", bodyBytes: 100).costBytes
        let tier = MemoryTier(limitBytes: small * 4)
        for k in ["/a", "/b", "/c", "/d"] { tier.insert(entry(k, bodyBytes: 100)) }
        tier.insert(entry("/big", bodyBytes: small * 2))
        XCTAssertNil(tier.lookup("/a"))
        XCTAssertNil(tier.lookup("/b"))
        XCTAssertNil(tier.lookup("/c"))
        XCTAssertNotNil(tier.lookup("/d"))
        XCTAssertNotNil(tier.lookup("/big"))
        XCTAssertLessThanOrEqual(tier.stats.bytes, small * 4)
    }

    func testReplacingAKeyDoesNotDoubleCount() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(entry("/a", bodyBytes: 100))
        tier.insert(entry("/a", bodyBytes: 200))
        XCTAssertEqual(tier.stats.objects, 1)
        XCTAssertEqual(tier.stats.bytes, entry("/a", bodyBytes: 200).costBytes)
        XCTAssertEqual(tier.lookup("/a")?.body.count, 200)
    }

    func testEntryLargerThanTheLimitIsRefused() {
        let tier = MemoryTier(limitBytes: 1000)
        tier.insert(entry("/small", bodyBytes: 10))
        XCTAssertFalse(tier.insert(entry("/huge", bodyBytes: 5000)))
        XCTAssertNil(tier.lookup("/huge"))
        XCTAssertNotNil(tier.lookup("/small"))
        XCTAssertTrue(tier.remove("/small"))
        XCTAssertEqual(tier.stats.bytes, 0)
    }
}
