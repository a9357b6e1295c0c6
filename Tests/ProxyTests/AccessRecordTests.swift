import XCTest
@testable import Proxy

/// What the access log's cache column says of the Cache-Status sent.
final class AccessRecordTests: XCTestCase {
    private func column(_ sent: String) -> String {
        var record = AccessRecord()
        record.note(status: 200, result: .hit, queuedWhole: true, cacheStatus: Array(sent.utf8), bodyBytes: nil)
        return record.cacheColumn
    }

    func testTheColumnIsTheValueWithoutFieldNameCacheNameOrLineEnd() {
        XCTAssertEqual(column("Cache-Status: larder; hit; ttl=55\r\n"), "hit; ttl=55", "a hit sends the whole line")
        XCTAssertEqual(column("larder; fwd=uri-miss; stored"), "fwd=uri-miss; stored", "a forward notes the value")
        XCTAssertEqual(column(""), "-", "nothing sent (a 400 before any lookup)")
        XCTAssertEqual(AccessRecord().cacheColumn, "-")
    }

    func testItIsTakenOnce() {
        var record = AccessRecord()
        XCTAssertTrue(record.takeTurn())
        XCTAssertFalse(record.takeTurn(), "an exchange ended twice (cancelled, then completed) is counted and logged once")
    }

    func testWithTheLogOffTheCacheStatusIsNotKeptButTheTimesAre() {
        var record = AccessRecord(logging: false)
        XCTAssertNil(record.latencies(), "nothing answered yet")
        record.note(status: 200, result: .miss, queuedWhole: false, cacheStatus: Array("larder; fwd=uri-miss".utf8), bodyBytes: 5)
        XCTAssertEqual(record.status, 200)
        XCTAssertEqual(record.result, .miss)
        XCTAssertEqual(record.cacheColumn, "-")
        let (firstByte, total) = record.latencies()!
        XCTAssertGreaterThanOrEqual(firstByte, 0)
        XCTAssertGreaterThanOrEqual(total, firstByte, "the last byte comes after the first")
    }
}
