import Telemetry
import XCTest
@testable import Admin

/// What a follower of the log asks for, parsed and applied.
final class LogFilterTests: XCTestCase {
    /// Whether `filter` admits a line with these figures.
    private func admits(_ filter: LogFilter, _ target: String, status: Int = 200, result: LatencyHistograms.Result = .hit,
                        micros: Int? = 500) -> Bool {
        let figures = AccessLine.Figures(time: 0, worker: 0, status: status, bodyBytes: 0, firstByteMicroseconds: micros,
                                         totalMicroseconds: micros, result: result)
        return AccessLine.with(figures, client: "c", method: "GET", target: target, cache: []) { filter.admits($0) }
    }

    private func filter(_ query: [(String, String)]) throws -> LogFilter {
        try LogFilter.parse(query.map { (name: $0.0, value: $0.1) }).get()
    }

    func testEachConditionMustHold() throws {
        XCTAssertTrue(try admits(filter([("follow", "1")]), "/x"))
        let errors = try filter([("status", "5xx")])
        XCTAssertTrue(admits(errors, "/x", status: 503))
        XCTAssertFalse(admits(errors, "/x", status: 404))
        XCTAssertTrue(try admits(filter([("status", "404")]), "/x", status: 404))
        XCTAssertFalse(try admits(filter([("result", "miss")]), "/x"))
        XCTAssertTrue(try admits(filter([("prefix", "/v1/")]), "/v1/items"))
        XCTAssertFalse(try admits(filter([("prefix", "/v1/")]), "/v2/items"))
        let slow = try filter([("slower-than", "100ms")])
        XCTAssertFalse(admits(slow, "/x", micros: 100_000))
        XCTAssertTrue(admits(slow, "/x", micros: 100_001))
        XCTAssertEqual(try filter([("slower-than", "1.5s")]).slowerThanMicroseconds, 1_500_000)
        let both = try filter([("result", "miss"), ("prefix", "/v1/")])
        XCTAssertTrue(admits(both, "/v1/a", result: .miss))
        XCTAssertFalse(admits(both, "/v2/a", result: .miss))
    }

    func testBadValuesAreNamed() {
        for (query, start) in [(("status", "7xx"), "status:"), (("status", "abc"), "status:"), (("result", "maybe"), "result:"),
                               (("prefix", "v1"), "prefix:"), (("slower-than", "soon"), "slower-than:"), (("color", "red"), "unknown parameter color")] {
            guard case .failure(let error) = LogFilter.parse([(name: query.0, value: query.1)]) else { return XCTFail("\(query)") }
            XCTAssertTrue(error.message.hasPrefix(start), error.message)
        }
    }
}
