import CacheStorage
import EventLoop
import Foundation
import Redis
import TestSupport
import XCTest
@testable import Fleet

/// Purges between nodes through a real redis-server: delivered and
/// acknowledged at once, replayed to a node that was away, everything
/// dropped by one that cannot know what it missed, held while Redis is
/// down and sent when it is back, a foreign entry skipped.
final class PurgeFeedTests: XCTestCase {
    private var loop: EventLoop!
    private var server: RedisServer!
    private var feeds: [PurgeFeed] = []
    private var applied: [String: [FleetPurge]] = [:]
    private var dropped: [String: [String]] = [:]

    override func setUpWithError() throws {
        loop = try EventLoop()
        // Persistent, as a production Redis would be: a restart keeps the stream and positions.
        server = try RedisServer(extra: ["--appendonly", "yes"])
        (feeds, applied, dropped) = ([], [:], [:])
    }

    override func tearDown() {
        feeds.forEach { $0.stop() }
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        (feeds, loop, server) = ([], nil, nil)
    }

    private func node(_ name: String) throws -> PurgeFeed {
        var settings = PurgeFeed.Settings(address: try RedisAddress(parsing: "redis://127.0.0.1:\(server.port)"), password: nil,
                                          name: "test", node: name)
        settings.connectTimeoutMilliseconds = 500
        let feed = PurgeFeed(settings, loop: loop, apply: { [unowned self] in applied[name, default: []].append($0) },
                             dropEverything: { [unowned self] in dropped[name, default: []].append($0) }, log: { _ in })
        feeds.append(feed)
        feed.start()
        run { feed.isConnected }
        XCTAssertTrue(feed.isConnected, "\(name) connected")
        return feed
    }

    /// Runs the loop until `done` (bounded: 10 s).
    private func run(until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !done() && Date() < deadline { loop.runOnce(maxWaitMilliseconds: 20) }
    }

    private func publish(_ feed: PurgeFeed, _ scope: PurgeScope, from node: String) -> PurgeFeed.Delivery? {
        var delivery: PurgeFeed.Delivery?
        feed.publish(FleetPurge(scope: scope, soft: false, node: node)) { delivery = $0 }
        run { delivery != nil }
        return delivery
    }

    private func redis(_ arguments: [String]) throws -> RedisReply? {
        let connection = RedisConnection(try RedisAddress(parsing: "redis://127.0.0.1:\(server.port)"), password: nil, loop: loop,
                                         connectTimeoutMilliseconds: 1_000, commandTimeoutMilliseconds: 1_000)
        defer { connection.close() }
        var outcome: Result<RedisReply, RedisError>?
        connection.send(arguments) { outcome = $0 }
        run { outcome != nil }
        return try outcome?.get()
    }

    func testAPurgeReachesTheOtherNodesAndIsAcknowledgedByEveryLiveOne() throws {
        let a = try node("a"), b = try node("b"), c = try node("c")
        let delivery = publish(a, .prefix("/api/"), from: "a")
        XCTAssertEqual(delivery, PurgeFeed.Delivery(nodes: 3, acknowledged: 3))
        XCTAssertEqual(applied["b"], [FleetPurge(scope: .prefix("/api/"), soft: false, node: "a")])
        XCTAssertEqual(applied["c"], applied["b"])
        XCTAssertNil(applied["a"], "the sender applied it before sending")
        XCTAssertEqual(b.received, 1)
        XCTAssertEqual(a.sent, 1)
        XCTAssertEqual(dropped, [:], "nodes joining a new fleet keep what they hold")
        withExtendedLifetime(c) {}
    }

    func testANodeThatWasAwayReplaysWhatItMissed() throws {
        let a = try node("a")
        try node("b").stop()
        _ = publish(a, .tag("t1"), from: "a")
        _ = publish(a, .key("/x"), from: "a")
        _ = try node("b")
        run { applied["b"]?.count == 2 }
        XCTAssertEqual(applied["b"]?.map(\.scope), [.tag("t1"), .key("/x")], "in order")
        XCTAssertEqual(dropped["b"], nil)
    }

    func testANodeThatCannotKnowWhatItMissedDropsEverything() throws {
        let a = try node("a")
        try node("b").stop()
        _ = publish(a, .tag("t1"), from: "a")
        _ = publish(a, .tag("t2"), from: "a")
        XCTAssertEqual(try redis(["XTRIM", "larder:test:purges", "MAXLEN", "0"]), .integer(2))
        _ = try node("b")
        XCTAssertEqual(dropped["b"]?.count, 1)
        XCTAssertTrue(dropped["b"]?.first?.contains("trimmed") ?? false, "\(String(describing: dropped["b"]))")
        XCTAssertNil(applied["b"])
        _ = publish(a, .all, from: "a")
        run { applied["b"] != nil }
        XCTAssertEqual(applied["b"]?.map(\.scope), [.all], "it follows the stream afterwards")

        _ = try node("newcomer")
        XCTAssertEqual(dropped["newcomer"]?.count, 1, "a node new to a fleet that purged before cannot know what it holds")
    }

    func testPurgesWaitWhileRedisIsDownAndGoOutWhenItIsBack() throws {
        let a = try node("a"), b = try node("b")
        let first = server!
        first.stop()
        run { !a.isConnected && !b.isConnected }
        let delivery = publish(a, .key("/while-down"), from: "a")
        XCTAssertEqual(delivery?.queued, true)
        XCTAssertNotNil(delivery?.error)
        server = try RedisServer(extra: ["--appendonly", "yes"], port: first.port, directory: first.directory)
        run { applied["b"] != nil }
        XCTAssertEqual(applied["b"]?.map(\.scope), [.key("/while-down")], "dropped: \(dropped)")
        run { a.isConnected && b.isConnected }
        XCTAssertTrue(a.isConnected && b.isConnected, "both read the stream again")
        withExtendedLifetime(first) {}
    }

    func testAnEntryThatIsNotAPurgeIsSkipped() throws {
        let a = try node("a"), b = try node("b")
        XCTAssertNotNil(try redis(["XADD", "larder:test:purges", "*", "hello", "world"]))
        _ = publish(a, .tag("after"), from: "a")
        run { applied["b"] != nil }
        XCTAssertEqual(applied["b"]?.map(\.scope), [.tag("after")])
        withExtendedLifetime(b) {}
    }
}
