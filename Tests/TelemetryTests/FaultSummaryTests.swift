import XCTest
@testable import Telemetry

/// Upstream faults are summed per kind (numbers aside) and logged once per
/// interval, each line in the latest fault's own words.
final class FaultSummaryTests: XCTestCase {
    func testOneLinePerKindPerIntervalInTheFaultsOwnWords() throws {
        let summary = FaultSummary()
        let first = summary.note("upstream error: cannot connect to 10.0.0.7 port 9000", example: "GET /a", now: 1_000)
        XCTAssertEqual(first, "upstream error: cannot connect to 10.0.0.7 port 9000 (once since the last such line, "
                       + "at most one each 10 s; latest: GET /a)")
        XCTAssertNil(summary.note("upstream error: cannot connect to 10.0.0.8 port 9001", example: "GET /b", now: 2_000),
                     "the same kind within the interval: counted, not logged")
        XCTAssertNotNil(summary.note("upstream error: timed out", example: "GET /c", now: 2_000), "another kind: its own line")
        let later = try XCTUnwrap(summary.note("upstream error: cannot connect to 10.0.0.9 port 9002", example: "GET /d",
                                               now: 1_000 + FaultSummary.intervalMilliseconds))
        XCTAssertTrue(later.hasPrefix("upstream error: cannot connect to 10.0.0.9 port 9002 (2 times since the last such line"), later)
    }

    /// Faults counted after a line are told by the timer once the interval
    /// is over, though no further fault comes (an outage that ends): with
    /// their count and the latest one's words, and once.
    func testCountedFaultsAreToldWhenTheirIntervalEndsWithoutAnotherFault() {
        let summary = FaultSummary()
        XCTAssertNotNil(summary.note("upstream error: timed out after 30000 ms", example: "GET /a", now: 1_000))
        for (i, at) in [2_000, 3_000, 4_000].enumerated() {
            XCTAssertNil(summary.note("upstream error: timed out after 30000 ms", example: "GET /b\(i)", now: UInt64(at)))
        }
        XCTAssertEqual(summary.due(now: 5_000), [], "the interval is not over")
        let due = summary.due(now: 1_000 + FaultSummary.intervalMilliseconds)
        XCTAssertEqual(due, ["upstream error: timed out after 30000 ms (3 times since the last such line, at most one each 10 s; "
                             + "latest: GET /b2)"])
        XCTAssertEqual(summary.due(now: 30_000), [], "told once")
        XCTAssertNotNil(summary.note("upstream error: timed out after 30000 ms", example: "GET /c", now: 30_000),
                        "quiet since: the next one is logged at once")
    }
}
