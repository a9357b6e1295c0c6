import CacheSemantics
import CacheStorage
import XCTest
@testable import Proxy

/// A slow or dead upstream (stale_timeout, a pool that is down) and the
/// configured grace: a stored response that may stand in is served at
/// once; nothing else is.
extension ExchangeMachineTests {
    private var staleOutcome: LookupOutcome { .stale(index: 0, age: 100, ttl: -90, requestForced: false) }

    func testASlowUpstreamIsStoodInForAtOnceByAStaleCopyThatMayStandIn() {
        let stored = entry("max-age=10", storedAt: now - 100)
        var m = machine(grace: 300)
        XCTAssertEqual(m.start(), .lookUp(.local))
        _ = m.lookedUp(found(staleOutcome), in: Variants([stored]))
        _ = m.joined(.leading)
        XCTAssertTrue(m.mayStandInAtOnce(now: now))
        guard case .serveInstead(let offered) = m.standInAtOnce(.slow, now: now) else { return XCTFail() }
        XCTAssertTrue(offered.entry.isSame(stored))
        XCTAssertEqual(offered.count, .staleHit)
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=-90; detail=upstream-slow")
        XCTAssertEqual(m.served(.served), .none)
        XCTAssertTrue(m.clientDone)
        XCTAssertEqual(m.upstreamHead(response(200), now: now), .ignored(.init(event: .upstreamHead, state: .done)),
                       "the fetch's head is the store's alone now")

        // Every server of the pool marked failed: the same, said as unreachable.
        var down = machine(grace: 300)
        _ = down.start()
        _ = down.lookedUp(found(staleOutcome), in: Variants([stored]))
        _ = down.joined(.leading)
        guard case .serveInstead(let instead) = down.standInAtOnce(.down, now: now) else { return XCTFail() }
        XCTAssertEqual(instead.cacheStatus.value, "larder; hit; ttl=-90; detail=upstream-unreachable")
    }

    func testNothingStandsInWhereNothingMayAndTheUpstreamIsWaitedFor() {
        for (stored, grace, why) in [(entry("max-age=10", storedAt: now - 100), 0, "no stale_on_disconnect, no stale-if-error"),
                                     (entry("max-age=10, must-revalidate", storedAt: now - 100), 300, "must-revalidate"),
                                     (entry("max-age=10", storedAt: now - 1_000), 300, "staler than the grace")] {
            var m = machine(grace: grace)
            _ = m.start()
            let age = Int(now - stored.timing.responseTime)
            _ = m.lookedUp(found(.stale(index: 0, age: age, ttl: 10 - age, requestForced: false)), in: Variants([stored]))
            _ = m.joined(.leading)
            XCTAssertFalse(m.mayStandInAtOnce(now: now), why)
            XCTAssertEqual(m.standInAtOnce(.slow, now: now), .ignored(.init(event: .upstreamSlow, state: .forwarding)), why)
            XCTAssertEqual(m.upstreamHead(response(200), now: now), .takeHead, "\(why): the upstream's answer, when it comes")
        }
        var fresh = machine(grace: 300)
        _ = fresh.start()
        _ = fresh.lookedUp(found(miss), in: Variants())
        _ = fresh.joined(.leading)
        XCTAssertFalse(fresh.mayStandInAtOnce(now: now), "a miss has nothing to stand in")
    }

    func testACollapsedWaiterGetsTheStaleCopyWithoutWaitingLongerAndTheFallbackCountsToo() {
        let stored = entry("max-age=10, stale-if-error=600", storedAt: now - 100)
        var waiter = machine()
        _ = waiter.start()
        _ = waiter.lookedUp(found(staleOutcome), in: Variants([stored]))
        XCTAssertEqual(waiter.joined(.waiting), .awaitLock(count: .collapsed))
        XCTAssertTrue(waiter.mayStandInAtOnce(now: now))
        guard case .serveInstead(let offered) = waiter.standInAtOnce(.slow, now: now) else { return XCTFail() }
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=-90; detail=upstream-slow")
        XCTAssertEqual(waiter.leaderDone(.lookUpAgain), .ignored(.init(event: .leaderDone, state: .forwarding)),
                       "the wait is over: the leader's end means nothing to it")
        XCTAssertEqual(waiter.served(.served), .none)

        // networkElseCache: its fallback, however stale, stands in for a slow upstream too.
        var network = machine(.networkElseCache)
        _ = network.start()
        guard case .forward = network.lookedUp(found(staleOutcome), in: Variants([entry("max-age=10", storedAt: now - 100)]))
        else { return XCTFail() }
        guard case .serveInstead(let fallback) = network.standInAtOnce(.slow, now: now) else { return XCTFail() }
        XCTAssertEqual(fallback.cacheStatus.value, "larder; hit; ttl=-90; detail=upstream-slow")
    }

    func testWithinTheConfiguredGraceAStaleCopyIsServedAndRevalidated() {
        var m = machine()
        let stored = entry("max-age=10", storedAt: now - 20)
        _ = m.start()
        guard case .serve(let offered) = m.lookedUp(found(.staleWithinGrace(index: 0, age: 20, ttl: -10)), in: Variants([stored]))
        else { return XCTFail() }
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=-10; detail=grace")
        XCTAssertEqual(offered.count, .staleHit)
        XCTAssertEqual(m.served(.served), .revalidate(stored))

        // A client's cacheThenFetch of the same: its own refresh, not the grace.
        var chosen = machine(.cacheThenFetch, byClient: true)
        _ = chosen.start()
        guard case .serve(let own) = chosen.lookedUp(found(.staleWithinGrace(index: 0, age: 20, ttl: -10)), in: Variants([stored]))
        else { return XCTFail() }
        XCTAssertEqual(own.cacheStatus.value, "larder; hit; ttl=-10")
    }
}
