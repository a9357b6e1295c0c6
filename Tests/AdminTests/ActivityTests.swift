import Telemetry
import XCTest
import CacheStorage
@testable import Admin

/// What the status page and `larder top` are given: a point a second,
/// the last minute's requests by URL and prefix, the last errors.
final class ActivityTests: XCTestCase {
    private func sample(_ target: String, at time: Int64, _ result: LatencyHistograms.Result = .hit, status: Int = 200,
                        weight: Int = 1) -> RequestSample {
        RequestSample(time: time, method: "GET", target: target, status: status, result: result, weight: weight,
                      cache: status >= 500 ? "fwd=miss; detail=upstream-unreachable" : nil)
    }

    func testHistoryPointsAreTheDifferencesBetweenTicks() {
        let activity = Activity()
        activity.tick(now: 100, totals: Activity.Totals(requests: 10, hits: 7, misses: 3, memoryBytes: 50))
        XCTAssertTrue(activity.history.isEmpty, "the first tick only sets the base")
        activity.absorb([sample("/x", at: 100, .other, status: 502)], dropped: 0)
        activity.tick(now: 101, totals: Activity.Totals(requests: 25, hits: 17, misses: 8, memoryBytes: 70))
        activity.tick(now: 101, totals: Activity.Totals(requests: 99, hits: 99, misses: 0))
        activity.tick(now: 104, totals: Activity.Totals(requests: 31, hits: 20, misses: 11, memoryBytes: 90, diskBytes: 5))
        XCTAssertEqual(activity.history, [
            Activity.Point(time: 101, seconds: 1, requests: 15, hits: 10, misses: 5, errors: 1, memoryBytes: 70),
            Activity.Point(time: 104, seconds: 3, requests: 6, hits: 3, misses: 3, errors: 0, memoryBytes: 90, diskBytes: 5),
        ])
        for second in 105...(105 + Int64(Activity.historySeconds)) { activity.tick(now: second, totals: Activity.Totals()) }
        XCTAssertEqual(activity.history.count, Activity.historySeconds, "15 minutes are kept")
        XCTAssertEqual(activity.history.last?.time, 105 + Int64(Activity.historySeconds))
    }

    func testTopURLsCountTheLastMinuteBySampleWeight() {
        let activity = Activity()
        activity.absorb([sample("/v1/a?x=1", at: 1000, weight: 16), sample("/v1/a?x=1", at: 1010, weight: 16),
                         sample("/v1/b", at: 1020, .miss), sample("/v1/b", at: 1030, .pass),
                         sample("/v2/c/d", at: 1030, .other, status: 503), sample("/old", at: 900, weight: 16)], dropped: 3)
        let targets = activity.targets(now: 1030)
        XCTAssertEqual(targets["/v1/a?x=1"], Activity.Count(requests: 32, misses: 0, errors: 0))
        XCTAssertEqual(targets["/v1/b"], Activity.Count(requests: 2, misses: 2, errors: 0))
        XCTAssertEqual(targets["/v2/c/d"], Activity.Count(requests: 1, misses: 0, errors: 1))
        XCTAssertNil(targets["/old"], "older than a minute")
        XCTAssertEqual(activity.dropped, 3)
        XCTAssertEqual(Activity.ranked(targets, by: \.requests, limit: 2).map(\.0), ["/v1/a?x=1", "/v1/b"])
        XCTAssertEqual(Activity.ranked(targets, by: \.misses, limit: 10).map(\.0), ["/v1/b"], "only what went upstream")
        let prefixes = Activity.byPrefix(targets, depth: 1)
        XCTAssertEqual(prefixes["/v1/"], Activity.Count(requests: 34, misses: 2, errors: 0))
        XCTAssertEqual(Activity.byPrefix(targets, depth: 2)["/v2/c/"]?.requests, 1)
        activity.tick(now: 1075, totals: Activity.Totals())
        XCTAssertEqual(activity.targets(now: 1075).keys.sorted(), ["/v1/b", "/v2/c/d"], "seconds older than a minute are forgotten")
    }

    func testPrefixes() {
        XCTAssertEqual(Activity.prefix(of: "/v1/users/7?a=b", depth: 1), "/v1/")
        XCTAssertEqual(Activity.prefix(of: "/v1/users/7?a=b", depth: 2), "/v1/users/")
        XCTAssertEqual(Activity.prefix(of: "/v1/users/7?a=b", depth: 3), "/v1/users/7")
        XCTAssertEqual(Activity.prefix(of: "/index.html?q=/a/b", depth: 1), "/index.html")
        XCTAssertEqual(Activity.prefix(of: "/", depth: 1), "/")
        XCTAssertEqual(Activity.prefix(of: "*", depth: 1), "*")
    }

    /// A flood of distinct URLs (a scan, cache-busting queries) cannot grow
    /// the counts without bound: past the limit a second counts "(other)".
    func testDistinctTargetsPerSecondAreBounded() {
        let activity = Activity()
        let flood = (0..<(Activity.maxTargetsPerSecond + 500)).map { sample("/scan?\($0)", at: 7, .miss) }
        let long = String(repeating: "a", count: 5000)
        activity.absorb(flood + [sample("/" + long, at: 8)], dropped: 0)
        let targets = activity.targets(now: 8)
        XCTAssertEqual(targets.count, Activity.maxTargetsPerSecond + 2)
        XCTAssertEqual(targets[Activity.other]?.requests, 500)
        XCTAssertTrue(targets.keys.allSatisfy { $0.utf8.count <= Activity.maxTargetBytes })
        XCTAssertNil(Activity.byPrefix(targets, depth: 1)[Activity.other])
    }

    func testTheLastErrorsAreKept() {
        let activity = Activity()
        activity.absorb((0..<80).map { sample("/e\($0)", at: Int64($0), .other, status: 500 + $0 % 5) } + [sample("/ok", at: 90)],
                        dropped: 0)
        XCTAssertEqual(activity.errors.count, Activity.errorsKept)
        XCTAssertEqual(activity.errors.last?.target, "/e79")
        XCTAssertEqual(activity.errors.first?.target, "/e30")
    }
}
