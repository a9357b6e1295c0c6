import CacheStorage
import XCTest
@testable import Fleet
import Redis

/// A purge as the stream carries it, and where a node starts reading.
final class FleetPurgeTests: XCTestCase {
    func testEveryScopeSurvivesTheStream() {
        for scope in [PurgeScope.key("/a?b=1"), .prefix("/api/"), .tag("product-7"), .all] {
            for soft in [false, true] {
                let purge = FleetPurge(scope: scope, soft: soft, node: "n1")
                XCTAssertEqual(FleetPurge(fields: purge.fields), purge)
            }
        }
    }

    func testEntriesLarderDidNotWriteAreRefused() {
        XCTAssertNil(FleetPurge(fields: ["node", "n1", "scope", "key"]), "fields missing")
        XCTAssertNil(FleetPurge(fields: ["node", "n1", "scope", "everything", "target", "", "soft", "0"]), "unknown scope")
        XCTAssertNil(FleetPurge(fields: ["node", "n1", "scope", "key", "target", "", "soft", "0"]), "a key purge needs its key")
        XCTAssertNil(FleetPurge(fields: ["node", "n1", "scope", "all", "target", "", "soft", "yes"]), "soft is 0 or 1")
        XCTAssertNil(FleetPurge(fields: ["node"]), "odd field count")
    }

    func testStreamIDsOrderAsRedisDoes() {
        XCTAssertLessThan(StreamID("5-9")!, StreamID("6-0")!)
        XCTAssertLessThan(StreamID("6-1")!, StreamID("6-2")!)
        XCTAssertNil(StreamID("6"))
        XCTAssertNil(StreamID("a-1"))
        XCTAssertEqual(StreamID("17-3")?.description, "17-3")
    }

    func testANodeDropsEverythingOnlyWhenItCannotKnowWhatItMissed() {
        let p = StreamID("100-0")!, later = StreamID("200-0")!
        func stream(added: Int, length: Int, deleted: StreamID = .zero) -> FeedStart.Stream {
            FeedStart.Stream(lastGenerated: later, entriesAdded: added, length: length, maxDeleted: deleted)
        }
        func dropped(_ start: FeedStart) -> String? {
            if case .dropEverythingThenFrom(_, _, let reason) = start { return reason }
            return nil
        }
        XCTAssertEqual(FeedStart.decide(place: nil, stream: nil), .from(.zero, consumed: 0), "a new fleet: nothing was ever purged")
        XCTAssertEqual(FeedStart.decide(place: (p, 3), stream: stream(added: 5, length: 5)), .from(p, consumed: 3),
                       "replays from where it stopped")
        XCTAssertEqual(FeedStart.decide(place: (p, 3), stream: stream(added: 5, length: 2)), .from(p, consumed: 3),
                       "the three trimmed it had read")
        XCTAssertTrue(dropped(FeedStart.decide(place: (p, 3), stream: stream(added: 5, length: 1)))?.contains("trimmed") ?? false,
                      "the fourth, trimmed, it never read")
        XCTAssertTrue(dropped(FeedStart.decide(place: (p, 3), stream: stream(added: 5, length: 5, deleted: StreamID("150-0")!)))?
            .contains("deleted") ?? false)
        XCTAssertEqual(FeedStart.decide(place: nil, stream: stream(added: 5, length: 5)),
                       .dropEverythingThenFrom(later, consumed: 5, reason: "this node has no recorded place in the fleet's purge stream"),
                       "a node joining a fleet that purged before, then reading from the end")
        XCTAssertNotNil(dropped(FeedStart.decide(place: (p, 3), stream: nil)), "Redis lost the stream")
        XCTAssertNotNil(dropped(FeedStart.decide(place: (StreamID("300-0")!, 3), stream: stream(added: 5, length: 5))),
                        "Redis went back to an older copy")
        XCTAssertNotNil(dropped(FeedStart.decide(place: (p, 9), stream: stream(added: 5, length: 5))), "fewer entries than it read")
        XCTAssertTrue(dropped(FeedStart.decide(place: (p, 3), stream: stream(added: 5, length: 5), placeShown: false))?
            .contains("lagged") ?? false, "after a failover, a new master whose stream lacks the entry it read last")
        XCTAssertEqual(FeedStart.decide(place: (.zero, 0), stream: nil), .from(.zero, consumed: 0),
                       "a place at the start and no stream: a fleet that never purged, not a lost Redis")
        XCTAssertEqual(FeedStart.decide(place: (.zero, 0), stream: stream(added: 5, length: 5)), .from(.zero, consumed: 0),
                       "the purges sent since are replayed")
        XCTAssertTrue(dropped(FeedStart.decide(place: nil, stream: nil, sameFleet: false))?.contains("lost its data") ?? false,
                      "an empty Redis that is not the fleet this node remembers")
        XCTAssertEqual(FeedStart.decide(place: nil, stream: stream(added: 2, length: 2), sameFleet: false),
                       .dropEverythingThenFrom(later, consumed: 2, reason: "Redis no longer holds the fleet this node joined (it lost its data or is another Redis)"),
                       "whatever its place and the stream say, then from the stream's end")
    }

    /// Values from Redis are not trusted: counts near the limits do not trap.
    func testExtremeStreamFiguresDoNotTrap() {
        let far = FeedStart.Stream(lastGenerated: StreamID("9-0")!, entriesAdded: Int.max, length: Int.min)
        guard case .dropEverythingThenFrom(_, _, let reason) = FeedStart.decide(place: (StreamID("1-0")!, 3), stream: far) else {
            return XCTFail("more trimmed than it read")
        }
        XCTAssertTrue(reason.contains("trimmed"), reason)
        XCTAssertNil(FleetClock.milliseconds(ofTimeReply: .array([.string(Array("9223372036854775807".utf8)), .string(Array("0".utf8))])))
        XCTAssertNotNil(FleetClock.warning(offsetMilliseconds: Int64.min))
        XCTAssertEqual(FleetClock.offset(sentAt: Int64.min, receivedAt: Int64.max, redisMilliseconds: Int64.max), Int64.max)
    }
}
