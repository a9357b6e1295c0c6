import CacheSemantics
import CacheStorage
import EventLoop
import Foundation
import Redis
import TestSupport
import XCTest
@testable import Fleet

/// Nodes whose clocks differ: the offset to Redis's clock, liveness and
/// shared responses' ages in Redis's time (a real redis-server).
final class FleetClockTests: XCTestCase {
    private var loop: EventLoop!
    private var server: RedisServer!
    private var feeds: [PurgeFeed] = []
    private var tiers: [RedisSharedTier] = []
    private var logged: [String] = []

    override func setUpWithError() throws {
        loop = try EventLoop()
        server = try RedisServer()
        (feeds, tiers, logged) = ([], [], [])
    }

    override func tearDown() {
        feeds.forEach { $0.stop() }
        tiers.forEach { $0.stop() }
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        (feeds, tiers, loop, server) = ([], [], nil, nil)
    }

    private var address: RedisAddress { try! RedisAddress(parsing: "redis://127.0.0.1:\(server.port)") }

    private func run(until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !done() && Date() < deadline { loop.runOnce(maxWaitMilliseconds: 20) }
    }

    /// A clock `skew` milliseconds off the machine's.
    private func clock(skew: Int64) -> FleetClock {
        FleetClock(localMilliseconds: { FleetClock.wallMilliseconds() + skew })
    }

    private func feed(_ node: String, _ clock: FleetClock) -> PurgeFeed {
        var settings = PurgeFeed.Settings(address: address, password: nil, name: "clock", node: node)
        settings.connectTimeoutMilliseconds = 500
        let feed = PurgeFeed(settings, loop: loop, clock: clock, apply: { _ in }, dropEverything: { _ in },
                             log: { [unowned self] in logged.append($0) })
        feeds.append(feed)
        feed.start()
        run { feed.isConnected }
        XCTAssertTrue(feed.isConnected, "\(node) connected")
        return feed
    }

    func testTheOffsetIsRedisTimeMinusTheMiddleOfTheRoundTrip() {
        XCTAssertEqual(FleetClock.offset(sentAt: 1_000, receivedAt: 1_010, redisMilliseconds: 31_005), 30_000)
        XCTAssertEqual(FleetClock.offset(sentAt: 50_000, receivedAt: 50_000, redisMilliseconds: 20_000), -30_000)
        let time = RedisReply.array([.string(Array("1700000000".utf8)), .string(Array("250999".utf8))])
        XCTAssertEqual(FleetClock.milliseconds(ofTimeReply: time), 1_700_000_000_250)
        XCTAssertNil(FleetClock.milliseconds(ofTimeReply: .integer(5)))
        XCTAssertNil(FleetClock.milliseconds(ofTimeReply: .array([.string(Array("1".utf8)), .string(Array("1000000".utf8))])))
        let clock = self.clock(skew: 0)
        XCTAssertNil(clock.offsetMilliseconds, "not measured yet")
        XCTAssertFalse(clock.measure(sentAt: 0, receivedAt: 0, reply: .error("ERR")))
        XCTAssertTrue(clock.measure(sentAt: 0, receivedAt: 0, reply: .array([.string(Array("2".utf8)), .string(Array("600000".utf8))])))
        XCTAssertEqual(clock.offsetMilliseconds, 2_600)
        XCTAssertEqual(clock.shiftSeconds, 3, "rounded to the nearest second")
        _ = clock.measure(sentAt: 2_600, receivedAt: 2_600, reply: .array([.string(Array("0".utf8)), .string(Array("0".utf8))]))
        XCTAssertEqual(clock.shiftSeconds, -3)
    }

    func testAnOffsetBeyondASecondIsWorthALogLine() {
        XCTAssertNil(FleetClock.warning(offsetMilliseconds: 900))
        XCTAssertNil(FleetClock.warning(offsetMilliseconds: -1_000))
        XCTAssertEqual(FleetClock.warning(offsetMilliseconds: 30_040)?.hasPrefix("fleet: this node's clock is 30.0 s behind Redis's"), true)
        XCTAssertEqual(FleetClock.warning(offsetMilliseconds: -1_260)?.hasPrefix("fleet: this node's clock is 1.3 s ahead of Redis's"), true)
    }

    func testNodesWhoseClocksDifferStillCountEachOtherLive() throws {
        let behind = feed("behind", clock(skew: -30_000))
        let ahead = feed("ahead", clock(skew: 20_000))
        // Each records its place about once a second: wait for a count that saw both.
        run { behind.liveNodes == 2 && ahead.liveNodes == 2 }
        XCTAssertEqual(behind.liveNodes, 2)
        XCTAssertEqual(ahead.liveNodes, 2)
        let behindOffset = try XCTUnwrap(behind.clock.offsetMilliseconds)
        let aheadOffset = try XCTUnwrap(ahead.clock.offsetMilliseconds)
        XCTAssertEqual(Double(behindOffset), 30_000, accuracy: 1_000)
        XCTAssertEqual(Double(aheadOffset), -20_000, accuracy: 1_000)
        XCTAssertTrue(logged.contains { $0.contains("30.0 s behind Redis's") }, "\(logged)")
    }

    func testASharedResponseIsAsOldOnEveryNodeWhateverTheirClocks() throws {
        // The writer's machine is 30 s behind: its responses carry times 30 s in the past.
        let writerClock = clock(skew: -30_000), readerClock = clock(skew: 0)
        for clock in [writerClock, readerClock] {
            let probe = RedisConnection(address, password: nil, loop: loop, connectTimeoutMilliseconds: 1_000, commandTimeoutMilliseconds: 1_000)
            defer { probe.close() }
            var reply: RedisReply?
            let sentAt = clock.localNow
            probe.send(["TIME"]) { reply = try? $0.get() }
            run { reply != nil }
            XCTAssertTrue(clock.measure(sentAt: sentAt, receivedAt: clock.localNow, reply: try XCTUnwrap(reply)))
        }
        let counts = SharedTierCounts(), mark = FleetMark()
        func tier(_ node: String, _ clock: FleetClock) -> RedisSharedTier {
            var settings = RedisSharedTier.Settings(address: address, password: nil, name: "clock")
            settings.node = node
            let tier = RedisSharedTier(settings, loop: loop, mark: mark, clock: clock, counts: counts, faults: FaultLog { _ in })
            tiers.append(tier)
            tier.start()
            run { tier.isReady }
            return tier
        }
        let writer = tier("writer", writerClock), reader = tier("reader", readerClock)
        let writersNow = EventLoop.wallSeconds() - 30
        let entry = CachedResponse.make(key: "/clock", status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=600\r\n".utf8),
                                        body: Array("body".utf8),
                                        timing: ResponseTiming(requestTime: writersNow, responseTime: writersNow, dateValue: nil, ageValue: 0),
                                        lifetime: 600, cacheControl: CacheControl("max-age=600"), varyNames: [], varyValues: [])
        writer.store(entry, fetchedAt: mark.current)
        run { counts.stores.load(ordering: .relaxed) == 1 }
        var found: Variants?
        XCTAssertTrue(reader.lookup("/clock") { found = $0 })
        run { found != nil }
        let read = try XCTUnwrap(found.flatMap { Array($0).first })
        XCTAssertEqual(Double(read.timing.responseTime), Double(EventLoop.wallSeconds()), accuracy: 2,
                       "in the reader's time the response was just received, not 30 s ago")
        // And the writer reads back what it wrote, in its own time.
        found = nil
        XCTAssertTrue(writer.lookup("/clock") { found = $0 })
        run { found != nil }
        XCTAssertEqual(Double(try XCTUnwrap(found.flatMap { Array($0).first }).timing.responseTime), Double(writersNow), accuracy: 2)
    }
}
