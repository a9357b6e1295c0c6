import XCTest
@testable import Proxy

/// The Cache-Status line a hit sends, whatever its numbers.
final class CacheStatusTests: XCTestCase {
    func testAHitsCacheStatusLineCarriesItsTTLWhateverItsDigits() {
        for ttl in [0, 7, 10, 99, 100, 12_345, 3_600_000, Int.max] {
            XCTAssertEqual(String(decoding: CacheStatus.hit(ttl: ttl).bytes, as: UTF8.self), "Cache-Status: larder; hit; ttl=\(ttl)\r\n")
        }
        XCTAssertEqual(String(decoding: CacheStatus.hit(ttl: -30).bytes, as: UTF8.self), "Cache-Status: larder; hit; ttl=-30\r\n")
        XCTAssertEqual(String(decoding: CacheStatus.hit(ttl: -30, detail: "upstream-unreachable").bytes, as: UTF8.self),
                       "Cache-Status: larder; hit; ttl=-30; detail=upstream-unreachable\r\n")
        XCTAssertEqual(String(decoding: CacheStatus.hit(ttl: 5, detail: "fleet").bytes, as: UTF8.self), "Cache-Status: larder; hit; ttl=5; detail=fleet\r\n")
    }
}
