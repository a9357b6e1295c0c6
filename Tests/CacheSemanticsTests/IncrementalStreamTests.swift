import XCTest
@testable import CacheSemantics

/// Which responses are live streams, never stored.
final class IncrementalStreamFieldTests: XCTestCase {
    func testIncrementalIsABooleanItem() {
        for yes in ["?1", " ?1 ", "?1;a=b"] { XCTAssertTrue(IncrementalStream.isIncremental(yes), yes) }
        for no in [nil, "?0", "1", "?1, ?1", "?10", "", "true"] { XCTAssertFalse(IncrementalStream.isIncremental(no), "\(no ?? "nil")") }
    }

    func testEventStreamsByTheirMediaType() {
        XCTAssertTrue(IncrementalStream.applies(incremental: nil, contentType: "text/event-stream"))
        XCTAssertTrue(IncrementalStream.applies(incremental: nil, contentType: "Text/Event-Stream; charset=utf-8"))
        XCTAssertTrue(IncrementalStream.applies(incremental: "?1", contentType: "application/json"))
        XCTAssertFalse(IncrementalStream.applies(incremental: "?0", contentType: "text/plain"))
        XCTAssertFalse(IncrementalStream.applies(incremental: nil, contentType: nil))
    }
}
