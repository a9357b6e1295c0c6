import HTTPHeaders
import TestSupport
import XCTest
import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
@testable import Proxy

/// Request collapsing without sockets: who leads, who waits, who follows a
/// shared response, and that every waiter is woken exactly once on its loop.
final class CollapserTests: XCTestCase {
    private var loop: EventLoop!

    override func setUpWithError() throws {
        loop = try EventLoop()
    }

    /// Runs what was queued to the loop (bounded).
    private func runQueued() {
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
    }

    private func fetch(limit: Int = 1 << 20) -> SharedFetch {
        SharedFetch(head: SharedFetch.Head(status: 200, reason: nil, headers: ["content-type": "text/plain"],
                                           timing: ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0),
                                           contentLength: nil, varyNames: [], varyValues: []),
                    limitBytes: limit)
    }

    func testTheFirstLeadsTheNextWaitAndAreWokenOnceWhenItEnds() {
        let collapser = Collapser()
        var woken: [String] = []
        guard case .leader = collapser.lead("/k", loop: loop, wake: { _ in woken.append("leader?") }) else { return XCTFail() }
        for name in ["a", "b"] {
            guard case .waiting = collapser.lead("/k", loop: loop, wake: { f in woken.append(name + (f == nil ? "" : "+fetch")) })
            else { return XCTFail("\(name) waits") }
        }
        guard case .leader = collapser.lead("/other", loop: loop, wake: { _ in }) else { return XCTFail("keys are separate") }
        runQueued()
        XCTAssertEqual(woken, [], "nobody woken while the leader fetches")
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(woken.sorted(), ["a", "b"], "each waiter woken once, without a fetch to follow")
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(woken.count, 2, "a second release wakes nobody")
        guard case .leader = collapser.lead("/k", loop: loop, wake: { _ in }) else { return XCTFail("the key is free again") }
    }

    func testAnOfferIsTakenUpByTheFirstWaiterAndThePublishedFetchIsFollowed() {
        let collapser = Collapser()
        _ = collapser.lead("/k", loop: loop, wake: { _ in })
        var shareAsked = 0
        XCTAssertFalse(collapser.offer("/k", loop: loop, share: { shareAsked += 1 }), "no one waits yet: nothing published")
        var got: SharedFetch?
        _ = collapser.lead("/k", loop: loop, wake: { got = $0 })
        runQueued()
        XCTAssertEqual(shareAsked, 1, "the first waiter asks the leader to share")
        _ = collapser.lead("/k", loop: loop, wake: { _ in })
        runQueued()
        XCTAssertEqual(shareAsked, 1, "asked once")
        let shared = fetch()
        collapser.publish("/k", shared)
        runQueued()
        XCTAssertTrue(got === shared, "waiters get the fetch")
        guard case .following(let later) = collapser.lead("/k", loop: loop, wake: { _ in }), later === shared else {
            return XCTFail("a request arriving while it streams follows it")
        }
    }

    func testAnOfferWithWaitersAlreadyQueuedPublishesAtOnce() {
        let collapser = Collapser()
        _ = collapser.lead("/k", loop: loop, wake: { _ in })
        _ = collapser.lead("/k", loop: loop, wake: { _ in })
        XCTAssertTrue(collapser.offer("/k", loop: loop, share: { XCTFail("not needed") }))
        runQueued()
        XCTAssertFalse(collapser.offer("/gone", loop: loop, share: {}), "no fetch of that key")
    }

    func testFollowersReadPiecesInOrderAndAreNotifiedOncePerRead() {
        let shared = fetch()
        let follower = NSObject(), id = ObjectIdentifier(follower)
        var notified = 0
        shared.follow(id, loop: loop) { notified += 1 }
        XCTAssertTrue(shared.hasFollowers)
        shared.append(Bytes(Array("one".utf8)))
        shared.append(Bytes(Array("two".utf8)))
        runQueued()
        XCTAssertEqual(notified, 1, "one notification until the follower reads")
        var (chunks, state) = shared.read(id, from: 0)
        XCTAssertEqual(chunks.map { Array($0.buffer) }, [Array("one".utf8), Array("two".utf8)])
        XCTAssertEqual(state, .streaming)
        shared.finish(.complete)
        runQueued()
        XCTAssertEqual(notified, 2)
        (chunks, state) = shared.read(id, from: 2)
        XCTAssertTrue(chunks.isEmpty)
        XCTAssertEqual(state, .complete)
        shared.finish(.failed)
        XCTAssertEqual(shared.read(id, from: 2).state, .complete, "the first outcome stands")
        shared.unfollow(id)
        XCTAssertFalse(shared.hasFollowers)
    }

    func testAFetchLargerThanItsLimitFailsForFollowersAndNewcomers() {
        let shared = fetch(limit: 5)
        shared.append(Bytes(Array("1234".utf8)))
        XCTAssertTrue(shared.isJoinable)
        shared.append(Bytes(Array("5678".utf8)))
        XCTAssertFalse(shared.isJoinable, "no newcomer could get the whole response")
        let (chunks, state) = shared.read(ObjectIdentifier(self), from: 0)
        XCTAssertTrue(chunks.isEmpty, "what was kept is freed")
        XCTAssertEqual(state, .failed)
    }

    /// The fleet's claim as the cache lock sees it: answered when told.
    private final class ClaimingFleet: SharedTier {
        var reachable = true
        var answers: [(FleetClaim) -> Void] = []
        var released: [String] = []
        var maxObjectBytes: Int { 0 }
        func fetchMark() -> SharedMark { .zero }
        func lookup(_ key: String, found: @escaping (Variants) -> Void) -> Bool { false }
        func store(_ entry: CachedResponse, fetchedAt mark: SharedMark) {}
        func claim(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool {
            if reachable { answers.append(outcome) }
            return reachable
        }
        func release(_ key: String) { released.append(key) }
        func answer(_ claim: FleetClaim) { answers.removeFirst()(claim) }
    }

    private func lock(fleet: ClaimingFleet? = nil) -> CacheLock {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        store.shared = fleet
        retained.append(store)  // (the lock holds its store unowned, as a worker's CacheAccess does)
        return CacheLock(collapser: Collapser(), store: store)
    }
    private var retained: [WorkerStore] = []

    /// The cache lock over the collapser: a leader's release lets the next
    /// request lead; a release of a claim not held here (`here: false`)
    /// leaves the leader's; without a fleet, or with one that cannot be
    /// asked, a join across the fleet leads here alone.
    func testTheCacheLockReleasesHereAndAcrossTheFleetTogether() throws {
        let get = try request("")
        for lock in [lock(), lock(fleet: { let f = ClaimingFleet(); f.reachable = false; return f }())] {
            func join() -> LeaderWait.Joined {
                lock.join("/k", for: get, asGet: false, acrossFleet: true, loop: loop, timeoutMilliseconds: 10_000, ended: { _ in })
            }
            guard case .leading = join() else { return XCTFail("the first leads, here alone") }
            guard case .waiting(let wait) = join() else { return XCTFail("the next waits") }
            wait.stop()
            lock.release("/k", here: false, acrossFleet: true)
            guard case .waiting(let still) = join() else { return XCTFail("the leader's claim here is kept") }
            still.stop()
            lock.release("/k")
            guard case .leading = join() else { return XCTFail("released: the next leads") }
        }
    }

    /// Across a fleet a join is one step for the exchange: the leader here
    /// waits for the fleet's claim, told once whether this node fetches;
    /// a claiming wait given up (the client left) lets both claims go when
    /// the answer comes.
    func testAJoinAcrossTheFleetClaimsTheKeyThereTooAndLetsBothGoWhenAbandoned() throws {
        let get = try request("")
        let fleet = ClaimingFleet()
        let lock = lock(fleet: fleet)
        var told: [LeaderWait.Ended] = []
        func join() -> LeaderWait.Joined {
            lock.join("/k", for: get, asGet: false, acrossFleet: true, loop: loop, timeoutMilliseconds: 10_000, ended: { told.append($0) })
        }
        guard case .claiming(let claiming) = join() else { return XCTFail("leading here, the fleet is asked") }
        XCTAssertTrue(claiming.isWaiting)
        fleet.answer(.claimed)
        guard case .claimedAcrossFleet(true)? = told.first else { return XCTFail("this node fetches: \(told)") }
        XCTAssertFalse(claiming.isWaiting, "told once")
        guard case .waiting(let behind) = join() else { return XCTFail("the claim here is the leader's") }
        behind.stop()
        lock.release("/k", acrossFleet: true)
        XCTAssertEqual(fleet.released, ["/k"])

        told = []
        guard case .claiming(let asking) = join() else { return XCTFail() }
        withExtendedLifetime(asking) { fleet.answer(.waited) }  // (the exchange holds its wait)
        guard case .claimedAcrossFleet(false)? = told.first else { return XCTFail("another node fetched: \(told)") }
        XCTAssertEqual(fleet.released, ["/k"], "nothing claimed there: nothing let go there")
        lock.release("/k")

        told = []
        guard case .claiming(let abandoned) = join() else { return XCTFail() }
        abandoned.stop()
        fleet.answer(.claimed)
        XCTAssertTrue(told.isEmpty, "a stopped wait is told nothing")
        XCTAssertEqual(fleet.released, ["/k", "/k"], "the claim it brought is let go there")
        guard case .claiming = join() else { return XCTFail("and here: the next request leads") }
    }

    private func request(_ lines: String) throws -> RequestHead {
        var parser = RequestParser()
        guard case .complete(let head, _) = Array("GET /a HTTP/1.1\r\nHost: x\r\n\(lines)\r\n".utf8).withUnsafeBytes({ parser.parse($0) })
        else { throw TestFailure("the request did not parse: \(lines)") }
        return head
    }

    /// A shared response suits a collapsed request only when its Vary
    /// fields match the leader's (normalized as the store compares them).
    func testASharedResponseSuitsOnlyRequestsOfItsVariant() throws {
        let response = UpstreamResponse(status: 200, reason: "OK",
                                        headers: ["content-length": "5", "vary": "Accept-Encoding"],
                                        requestTime: 1, responseTime: 1, stripTagHeaders: false)
        let head = SharedFetch.head(of: response, varyNames: ["accept-encoding"],
                                    leader: try request("Accept-Encoding: gzip, br\r\n"))
        XCTAssertEqual(head.contentLength, 5)
        XCTAssertTrue(head.suits(try request("Accept-Encoding: gzip, br\r\n")))
        XCTAssertTrue(head.suits(try request("Accept-Encoding: gzip,  br\r\n")), "the same list, spaced otherwise")
        XCTAssertFalse(head.suits(try request("Accept-Encoding: identity\r\n")))
        XCTAssertFalse(head.suits(try request("")), "absent is another variant")
        let plain = SharedFetch.head(of: response, varyNames: [], leader: try request(""))
        XCTAssertTrue(plain.suits(try request("Accept-Encoding: identity\r\n")), "no Vary: every request")
    }

    /// A 206 holds the leader's range only: a request for the whole, or
    /// for another range, fetches on its own instead of getting it.
    func testAPartialResponseSuitsOnlyRequestsForTheSameRange() throws {
        let response = UpstreamResponse(status: 206, reason: "Partial Content",
                                        headers: ["content-length": "5", "content-range": "bytes 0-4/100"],
                                        requestTime: 1, responseTime: 1, stripTagHeaders: false)
        let head = SharedFetch.head(of: response, varyNames: [], leader: try request("Range: bytes=0-4\r\n"))
        XCTAssertTrue(head.suits(try request("Range: bytes=0-4\r\n")))
        XCTAssertFalse(head.suits(try request("")), "the whole was asked")
        XCTAssertFalse(head.suits(try request("Range: bytes=5-9\r\n")))
        XCTAssertFalse(head.suits(try request("Range: bytes=0-4\r\nIf-Range: \"v1\"\r\n")), "a condition the leader did not send")
        let whole = UpstreamResponse(status: 200, reason: "OK", headers: ["content-length": "100"],
                                     requestTime: 1, responseTime: 1, stripTagHeaders: false)
        let full = SharedFetch.head(of: whole, varyNames: [], leader: try request("Range: bytes=0-4\r\n"))
        XCTAssertTrue(full.suits(try request("")), "a 200 suits every request, ranged or not")
    }
}
