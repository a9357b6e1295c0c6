import XCTest
@testable import Proxy

/// What the access log's cache column says of the Cache-Status sent.
final class AccessRecordTests: XCTestCase {
    private func column(_ sent: String) -> String {
        var record = AccessRecord()
        record.note(status: 200, cacheStatus: Array(sent.utf8), bodyBytes: nil)
        return record.cacheColumn
    }

    func testTheColumnIsTheValueWithoutFieldNameCacheNameOrLineEnd() {
        XCTAssertEqual(column("Cache-Status: larder; hit; ttl=55\r\n"), "hit; ttl=55", "a hit sends the whole line")
        XCTAssertEqual(column("larder; fwd=uri-miss; stored"), "fwd=uri-miss; stored", "a forward notes the value")
        XCTAssertEqual(column(""), "-", "nothing sent (a 400 before any lookup)")
        XCTAssertEqual(AccessRecord().cacheColumn, "-")
    }

    func testItIsWrittenOnce() {
        var record = AccessRecord()
        XCTAssertTrue(record.takeTurnToWrite())
        XCTAssertFalse(record.takeTurnToWrite(), "an exchange ended twice (cancelled, then completed) logs one line")
    }

    func testWithTheLogOffNothingIsNotedOrWritten() {
        var record = AccessRecord(logging: false)
        record.note(status: 200, cacheStatus: Array("larder; hit".utf8), bodyBytes: 5)
        XCTAssertEqual(record.status, 0)
        XCTAssertEqual(record.cacheColumn, "-")
        XCTAssertFalse(record.takeTurnToWrite())
    }
}
