import XCTest
@testable import Proxy
@testable import Admin

/// What a follower of the log asks for, parsed and applied.
final class LogFilterTests: XCTestCase {
    private func line(_ target: String, status: Int = 200, result: LatencyHistograms.Result = .hit, micros: Int? = 500) -> AccessLine {
        AccessLine(client: "c", method: "GET", target: target, status: status, bodyBytes: 0, firstByteMicroseconds: micros,
                   totalMicroseconds: micros, result: result, cache: "-", upstreamStatus: nil, upstreamMicroseconds: nil)
    }

    private func filter(_ query: [(String, String)]) throws -> LogFilter {
        try LogFilter.parse(query.map { (name: $0.0, value: $0.1) }).get()
    }

    func testEachConditionMustHold() throws {
        XCTAssertTrue(try filter([("follow", "1")]).admits(line("/x")))
        let errors = try filter([("status", "5xx")])
        XCTAssertTrue(errors.admits(line("/x", status: 503)))
        XCTAssertFalse(errors.admits(line("/x", status: 404)))
        XCTAssertTrue(try filter([("status", "404")]).admits(line("/x", status: 404)))
        XCTAssertFalse(try filter([("result", "miss")]).admits(line("/x")))
        XCTAssertTrue(try filter([("prefix", "/v1/")]).admits(line("/v1/items")))
        XCTAssertFalse(try filter([("prefix", "/v1/")]).admits(line("/v2/items")))
        let slow = try filter([("slower-than", "100ms")])
        XCTAssertFalse(slow.admits(line("/x", micros: 100_000)))
        XCTAssertTrue(slow.admits(line("/x", micros: 100_001)))
        XCTAssertEqual(try filter([("slower-than", "1.5s")]).slowerThanMicroseconds, 1_500_000)
        let both = try filter([("result", "miss"), ("prefix", "/v1/")])
        XCTAssertTrue(both.admits(line("/v1/a", result: .miss)))
        XCTAssertFalse(both.admits(line("/v2/a", result: .miss)))
    }

    func testBadValuesAreNamed() {
        for (query, start) in [(("status", "7xx"), "status:"), (("status", "abc"), "status:"), (("result", "maybe"), "result:"),
                               (("prefix", "v1"), "prefix:"), (("slower-than", "soon"), "slower-than:"), (("color", "red"), "unknown parameter color")] {
            guard case .failure(let error) = LogFilter.parse([(name: query.0, value: query.1)]) else { return XCTFail("\(query)") }
            XCTAssertTrue(error.message.hasPrefix(start), error.message)
        }
    }
}
