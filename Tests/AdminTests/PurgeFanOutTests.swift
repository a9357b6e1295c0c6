import CacheSemantics
import CacheStorage
import Telemetry
import XCTest
@testable import Admin

/// A purge in a fleet: applied here at once, handed to the other nodes,
/// answered with what they acknowledged; a node alone answers at once.
final class PurgeFanOutTests: XCTestCase {
    private final class StandInFleet: PurgeFanOut, @unchecked Sendable {
        var sent: [(PurgeScope, Bool)] = []
        var status: FleetStatus {
            FleetStatus(name: "f", node: "a", connected: true, purgesSent: sent.count, purgesReceived: 0, purgesQueued: 0,
                        lastError: nil)
        }
        func send(_ scope: PurgeScope, soft: Bool, delivered: @escaping @Sendable (PurgeDelivery) -> Void) {
            sent.append((scope, soft))
            delivered(PurgeDelivery(nodes: 3, acknowledged: 2))
        }
    }

    private func api(_ fleet: StandInFleet?, store: TieredStore) -> AdminAPI {
        AdminAPI(store: store, stats: ProxyStats(), token: nil, startedAt: 0, clock: { 0 }, purgeScopes: { [.key($0)] }, fanOut: fleet,
                 log: { _ in })
    }

    func testAPurgeIsAppliedHereThenAnsweredWithTheFleetsAcknowledgements() throws {
        let store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)])
        let fleet = StandInFleet()
        let first = api(fleet, store: store).handle(method: "POST", target: "/purge?tag=blue&soft=true", authorization: nil)
        XCTAssertEqual(first.body, "{\"purged\": 0}\n", "the local answer, were the fleet to say nothing")
        let later = try XCTUnwrap(first.later, "the answer waits for the fleet")
        XCTAssertTrue(fleet.sent.isEmpty, "sent when the connection waits for it")
        var final: AdminAPI.Response?
        later { final = $0 }
        XCTAssertEqual(fleet.sent.map(\.0), [.tag("blue")])
        XCTAssertEqual(fleet.sent.map(\.1), [true])
        XCTAssertEqual(final?.status, 200)
        XCTAssertEqual(final?.body, "{\"purged\": 0, \"fleet\": {\"nodes\": 3, \"acknowledged\": 2}}\n")

        let stats = api(fleet, store: store).handle(method: "GET", target: "/stats", authorization: nil)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stats.body.utf8)) as? [String: Any])
        XCTAssertEqual((json["fleet"] as? [String: Any])?["purges_sent"] as? Int, 1)
    }

    func testANodeAloneAnswersAtOnceAndStatsSaySo() throws {
        let store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)])
        let alone = api(nil, store: store)
        XCTAssertNil(alone.handle(method: "PURGE", target: "/x", authorization: nil).later)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(
            with: Data(alone.handle(method: "GET", target: "/stats", authorization: nil).body.utf8)) as? [String: Any])
        XCTAssertTrue(json["fleet"] is NSNull)
    }

    func testABadPurgeNeverReachesTheFleet() {
        let fleet = StandInFleet()
        let store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)])
        let answer = api(fleet, store: store).handle(method: "POST", target: "/purge?prefix=nope", authorization: nil)
        XCTAssertEqual(answer.status, 400)
        XCTAssertNil(answer.later)
        XCTAssertTrue(fleet.sent.isEmpty)
    }
}
