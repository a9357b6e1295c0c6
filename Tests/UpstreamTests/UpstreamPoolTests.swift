import XCTest
@testable import Upstream

/// Which server of a pool a request goes to, and passive failure marking.
final class UpstreamPoolTests: XCTestCase {
    private let servers = ["http://a:1", "http://b:1", "http://c:1"]

    func testRoundRobinTakesEachServerInTurn() {
        let pool = UpstreamPool(name: "p", servers: servers)
        let picked = (0..<6).map { _ in pool.pick(key: "/k", now: 1_000).base }
        XCTAssertEqual(picked, servers + servers)
    }

    func testAFailedServerIsLeftOutForFailTimeoutThenTakenAgain() {
        let pool = UpstreamPool(name: "p", servers: Array(servers.prefix(2)), maxFails: 1, failTimeoutMilliseconds: 5_000)
        pool.failed(pool.servers[1], now: 1_000)
        XCTAssertEqual((0..<4).map { _ in pool.pick(key: "/k", now: 2_000).base }, Array(repeating: "http://a:1", count: 4))
        XCTAssertEqual(Set((0..<4).map { _ in pool.pick(key: "/k", now: 6_000).base }), ["http://a:1", "http://b:1"], "back after 5 s")
        let figures = pool.servers[1].figures(now: 2_000)
        XCTAssertEqual(figures.errors, 1)
        XCTAssertEqual(figures.markedDown, 1)
        XCTAssertFalse(figures.up)
    }

    /// marked_down counts a server going from taking requests to left
    /// out, not every failure (requests still sent to it while every
    /// server is out fail too); a server of a pool without a health check
    /// has no health to show, only whether it takes requests.
    func testMarkedDownCountsTransitionsAndHealthIsShownOnlyWhenChecked() {
        let pool = UpstreamPool(name: "p", servers: Array(servers.prefix(1)), maxFails: 1, failTimeoutMilliseconds: 5_000)
        let a = pool.servers[0]
        for at in [1_000, 2_000, 3_000] as [UInt64] { pool.failed(a, now: at) }
        XCTAssertEqual(a.figures(now: 3_000).markedDown, 1, "left out once, its end moved on by the later failures")
        XCTAssertEqual(a.figures(now: 3_000).errors, 3)
        pool.failed(a, now: 9_000)
        XCTAssertEqual(a.figures(now: 9_000).markedDown, 2, "back after fail_timeout, then left out again")
        XCTAssertNil(a.figures(now: 9_000, checked: false).healthy, "no health check: nothing to say")
        XCTAssertEqual(a.figures(now: 9_000, checked: true).healthy, true)
    }

    func testMaxFailsCountsFailuresInARowAndAnAnswerResetsThem() {
        let pool = UpstreamPool(name: "p", servers: Array(servers.prefix(2)), maxFails: 2, failTimeoutMilliseconds: 5_000)
        let b = pool.servers[1]
        pool.failed(b, now: 1_000)
        XCTAssertTrue(b.isUp(now: 1_000), "one failure of two")
        b.answered(microseconds: 500)
        pool.failed(b, now: 1_000)
        XCTAssertTrue(b.isUp(now: 1_000), "an answer between them started the count again")
        pool.failed(b, now: 1_000)
        XCTAssertFalse(b.isUp(now: 1_000))
    }

    func testWhenEveryServerIsOutTheOneBackSoonestIsTried() {
        let pool = UpstreamPool(name: "p", servers: servers, failTimeoutMilliseconds: 10_000)
        pool.failed(pool.servers[0], now: 3_000)
        pool.failed(pool.servers[1], now: 1_000)
        pool.failed(pool.servers[2], now: 2_000)
        XCTAssertEqual(pool.pick(key: "/k", now: 4_000).base, "http://b:1")
    }

    func testHashSendsAKeyToOneServerAndSpreadsKeys() {
        let pool = UpstreamPool(name: "p", servers: servers, balance: .hash)
        for key in ["/a", "/b?x=1", "/c/d"] {
            let first = pool.pick(key: key, now: 1_000).base
            XCTAssertTrue((0..<5).allSatisfy { _ in pool.pick(key: key, now: 1_000).base == first }, key)
        }
        let spread = Set((0..<60).map { pool.pick(key: "/item/\($0)", now: 1_000).base })
        XCTAssertEqual(spread.count, 3, "sixty keys reach every server")
        // Its server out, a key goes to the next one, and back once it is up.
        let home = pool.pick(key: "/a", now: 1_000)
        pool.failed(home, now: 1_000)
        XCTAssertNotEqual(pool.pick(key: "/a", now: 2_000).base, home.base)
        XCTAssertEqual(pool.pick(key: "/a", now: 20_000).base, home.base)
    }
}
