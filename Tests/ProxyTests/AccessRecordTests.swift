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

/// The JSON access log line: always valid JSON, whatever a target holds.
final class AccessLineTests: XCTestCase {
    func testStringsAreEscapedAndTimesHaveMicrosecondDigits() throws {
        var buffer = AccessLogBuffer()
        let line = AccessLine(client: "::1", method: "GET", target: "/a\"b\\c\u{1}d\u{7F}", status: 200, bodyBytes: 5,
                              firstByteMicroseconds: 1_234, totalMicroseconds: 56, result: .hit, cache: "hit; ttl=5",
                              upstreamStatus: nil, upstreamMicroseconds: nil)
        buffer.appendJSON(line, now: 0, worker: 3)
        let text = String(decoding: buffer.take(), as: UTF8.self)
        XCTAssertTrue(text.hasSuffix("}\n"))
        XCTAssertTrue(text.contains(#""target":"/a\"b\\c\u0001d\u007f""#), text)
        XCTAssertTrue(text.contains(#""first_byte_ms":1.234,"total_ms":0.056"#), text)
        XCTAssertFalse(text.contains("upstream"), text)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        XCTAssertEqual(object["target"] as? String, "/a\"b\\c\u{1}d\u{7F}")
        XCTAssertEqual(object["worker"] as? Int, 3)
        XCTAssertEqual(object["time"] as? String, "1970-01-01T00:00:00Z")
    }
}
