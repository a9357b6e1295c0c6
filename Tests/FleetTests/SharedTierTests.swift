import CacheSemantics
import CacheStorage
import EventLoop
import Foundation
import Redis
import TestSupport
import XCTest
@testable import Fleet

/// The fleet's shared tier against a real redis-server: what one worker
/// stores another finds (each variant), purges of every kind remove what
/// they match and nothing else, a store that a purge overtook is refused,
/// and an unreachable Redis is never waited on.
final class SharedTierTests: XCTestCase {
    private var loop: EventLoop!
    private var server: RedisServer!
    private var tiers: [RedisSharedTier] = []
    private var feed: PurgeFeed?
    private let counts = SharedTierCounts()
    private let mark = FleetMark()

    override func setUpWithError() throws {
        loop = try EventLoop()
        server = try RedisServer()
    }

    override func tearDown() {
        tiers.forEach { $0.stop() }
        feed?.stop()
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
        (tiers, feed, loop, server) = ([], nil, nil, nil)
    }

    private var address: RedisAddress { try! RedisAddress(parsing: "redis://127.0.0.1:\(server.port)") }

    private func tier(maxObjectBytes: Int = 1 << 20, at given: RedisAddress? = nil) -> RedisSharedTier {
        var settings = RedisSharedTier.Settings(address: given ?? address, password: nil, name: "t")
        settings.node = "n\(tiers.count)"
        settings.maxObjectBytes = maxObjectBytes
        let tier = RedisSharedTier(settings, loop: loop, mark: mark, counts: counts, faults: FaultLog { _ in })
        tiers.append(tier)
        tier.start()
        run { tier.isReady }
        return tier
    }

    private func run(until done: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !done() && Date() < deadline { loop.runOnce(maxWaitMilliseconds: 20) }
    }

    private func entry(_ key: String, tags: [String] = [], vary: String? = nil, body: String? = nil, maxAge: Int = 60) -> CachedResponse {
        let now = EventLoop.wallSeconds()
        return CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\nCache-Control: max-age=\(maxAge)\r\n".utf8),
                                   body: Array((body ?? "body of \(key)").utf8),
                                   timing: ResponseTiming(requestTime: now, responseTime: now, dateValue: nil, ageValue: 0),
                                   lifetime: maxAge, cacheControl: CacheControl("max-age=\(maxAge)"),
                                   varyNames: vary == nil ? [] : ["accept"], varyValues: vary == nil ? [] : [vary], tags: tags)
    }

    private func store(_ tier: RedisSharedTier, _ entries: [CachedResponse], at mark: SharedMark? = nil) {
        let before = counts.stores.load(ordering: .relaxed) + counts.storesRefused.load(ordering: .relaxed)
        for e in entries { tier.store(e, fetchedAt: mark ?? self.mark.current) }
        run { self.counts.stores.load(ordering: .relaxed) + self.counts.storesRefused.load(ordering: .relaxed) == before + entries.count }
    }

    private func lookup(_ tier: RedisSharedTier, _ key: String) -> [CachedResponse]? {
        var found: Variants?
        guard tier.lookup(key, found: { found = $0 }) else { return nil }
        run { found != nil }
        return found.map(Array.init)
    }

    private func purge(_ scope: PurgeScope, keys: [String] = []) {
        if feed == nil {
            let feed = PurgeFeed(PurgeFeed.Settings(address: address, password: nil, name: "t", node: "p"), loop: loop,
                                 apply: { _ in }, dropEverything: { _ in }, log: { _ in })
            feed.mark = mark
            feed.start()
            run { feed.isConnected }
            self.feed = feed
        }
        var done = false
        feed!.publish(FleetPurge(scope: scope, soft: false, node: "p"), keys: keys) { _ in done = true }
        run { done }
    }

    func testWhatOneWorkerStoresAnotherFindsWithEveryVariant() throws {
        let a = tier(), b = tier()
        store(a, [entry("/v", vary: "json", body: "J"), entry("/v", vary: "xml", body: "X"), entry("/plain")])
        let found = try XCTUnwrap(lookup(b, "/v"))
        XCTAssertEqual(Set(found.map { String(decoding: $0.body, as: UTF8.self) }), ["J", "X"])
        XCTAssertEqual(Set(found.map(\.varyValues)), [["json"], ["xml"]])
        XCTAssertEqual(lookup(b, "/plain")?.first?.key, "/plain")
        XCTAssertEqual(lookup(b, "/absent")?.count, 0)
        XCTAssertEqual(counts.found.load(ordering: .relaxed), 2)
    }

    func testTooLargeOrNoLongerUsableResponsesStayLocal() {
        let a = tier(maxObjectBytes: 100)
        a.store(entry("/big", body: String(repeating: "x", count: 101)), fetchedAt: mark.current)
        a.store(entry("/stale", maxAge: 0), fetchedAt: mark.current)
        store(a, [entry("/fits")])
        XCTAssertEqual(counts.stores.load(ordering: .relaxed), 1)
        XCTAssertEqual(lookup(a, "/big")?.count, 0)
        XCTAssertEqual(lookup(a, "/stale")?.count, 0)
        XCTAssertEqual(lookup(a, "/fits")?.count, 1)
    }

    func testEachPurgeRemovesWhatItMatchesAndNothingElse() {
        let a = tier()
        let keys = ["/api/1", "/api/2", "/apx", "/tagged", "/other", "/url?x=1", "/url"]
        store(a, keys.map { entry($0, tags: $0 == "/tagged" || $0 == "/api/2" ? ["red"] : []) })
        func present() -> Set<String> { Set(keys.filter { (lookup(a, $0)?.count ?? 0) > 0 }) }
        purge(.prefix("/api/"))
        XCTAssertEqual(present(), ["/apx", "/tagged", "/other", "/url?x=1", "/url"])
        purge(.tag("red"))
        XCTAssertEqual(present(), ["/apx", "/other", "/url?x=1", "/url"])
        purge(.key("/url?x=1"), keys: ["/url?x=1", "/url"])
        XCTAssertEqual(present(), ["/apx", "/other"])
        purge(.all)
        XCTAssertEqual(present(), [])
    }

    func testAStoreOvertakenByAPurgeIsRefused() {
        let a = tier()
        let before = mark.current
        purge(.key("/elsewhere"))
        run { self.mark.current != before }
        XCTAssertNotEqual(mark.current, before, "the feed's place moved on")
        store(a, [entry("/late")], at: before)
        XCTAssertEqual(counts.storesRefused.load(ordering: .relaxed), 1)
        XCTAssertEqual(lookup(a, "/late")?.count, 0)
        store(a, [entry("/late")])
        XCTAssertEqual(lookup(a, "/late")?.count, 1, "a fetch begun after the purge is stored")
    }

    func testAClaimMakesOtherNodesWaitUntilItIsReleased() {
        let a = tier(), b = tier()
        var first: FleetClaim?, second: FleetClaim?, third: FleetClaim?
        XCTAssertTrue(a.claim("/k", milliseconds: 60_000) { first = $0 })
        run { first != nil }
        XCTAssertEqual(first, .claimed)
        XCTAssertTrue(b.claim("/k", milliseconds: 60_000) { second = $0 })
        run { self.counts.waits.load(ordering: .relaxed) == 1 }
        XCTAssertNil(second, "b waits while a fetches")
        store(a, [entry("/k")])
        a.release("/k")
        run { second != nil }
        XCTAssertEqual(second, .waited, "woken by a's release (its timer is a minute away)")
        XCTAssertTrue(b.claim("/k", milliseconds: 60_000) { third = $0 })
        run { third != nil }
        XCTAssertEqual(third, .stored, "stored meanwhile: look it up")
    }

    func testAWaitEndsWhenTheClaimantNeverReleases() {
        let a = tier(), b = tier()
        var first: FleetClaim?, second: FleetClaim?
        XCTAssertTrue(a.claim("/stuck", milliseconds: 60_000) { first = $0 })
        run { first != nil }
        XCTAssertTrue(b.claim("/stuck", milliseconds: 200) { second = $0 })
        run { second != nil }
        XCTAssertEqual(second, .waited, "bounded: b fetches alone")
    }

    func testAnUnreachableRedisIsNeverWaitedOn() {
        let a = tier()
        server.stop()
        run { self.counts.connected.load(ordering: .relaxed) == 0 }
        XCTAssertNil(lookup(a, "/any"), "no lookup while Redis is gone: the caller goes on at once")
        XCTAssertFalse(a.claim("/any", milliseconds: 1_000) { _ in XCTFail("never called") })
        XCTAssertGreaterThanOrEqual(counts.errors.load(ordering: .relaxed), 1)
    }

    func testLifetimeInRedisIsWhatIsLeftOfFreshnessPlusStaleWindows() {
        let now = EventLoop.wallSeconds()
        func response(_ cc: String, lifetime: Int, age: Int64) -> CachedResponse {
            CachedResponse.make(key: "/k", status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8), body: [],
                                timing: ResponseTiming(requestTime: now - age, responseTime: now - age, dateValue: nil, ageValue: 0),
                                lifetime: lifetime, cacheControl: CacheControl(cc), varyNames: [], varyValues: [])
        }
        XCTAssertEqual(SharedKeys.lifetimeMilliseconds(of: response("max-age=60", lifetime: 60, age: 10), now: now), 50_000)
        XCTAssertEqual(SharedKeys.lifetimeMilliseconds(of: response("max-age=60, stale-while-revalidate=30", lifetime: 60, age: 70), now: now),
                       20_000)
        XCTAssertNil(SharedKeys.lifetimeMilliseconds(of: response("max-age=60", lifetime: 60, age: 61), now: now))
        XCTAssertNil(SharedKeys.lifetimeMilliseconds(of: response("no-cache", lifetime: 0, age: 0), now: now))
        XCTAssertEqual(SharedKeys.successor(of: Array("/a/".utf8)), Array("/a0".utf8))
        XCTAssertEqual(SharedKeys.successor(of: [0x61, 0xFF]), [0x62])
        XCTAssertNil(SharedKeys.successor(of: [0xFF]))
        XCTAssertNotEqual(SharedKeys.variantField([nil]), SharedKeys.variantField([""]), "absent and empty differ")
    }

    /// A host name is looked up off the loop, at each connect: on a
    /// worker's loop (where a lookup there would trap in debug builds) a
    /// tier named by host connects and serves.
    func testATierNamedByHostConnectsFromAWorkersLoop() throws {
        let named = try RedisAddress(parsing: "redis://localhost:\(server.port)")
        guard case .tcp("127.0.0.1", _) = named.resolved().endpoint else {
            throw XCTSkip("localhost does not resolve to 127.0.0.1 here (redis-server listens there only)")
        }
        loop.isWorkerLoop = true
        let byName = tier(at: named)
        XCTAssertTrue(byName.isReady, "connected")
        store(byName, [entry("/named")])
        XCTAssertEqual(lookup(byName, "/named")?.count, 1)
    }
}
