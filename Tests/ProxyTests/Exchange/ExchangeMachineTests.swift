import CacheSemantics
import CacheStorage
import HTTPHeaders
import XCTest
@testable import Proxy

/// Whole lives of one request, driven event by event with no sockets,
/// store or upstream: each event's action is what the driver would do.
final class ExchangeMachineTests: XCTestCase {
    let now: Int64 = 1_000

    func entry(_ cacheControl: String, status: Int = 200, _ fields: HeaderFields = [:], body: String = "stored",
                       storedAt: Int64 = 1_000) -> CachedResponse {
        var headers: HeaderFields = ["cache-control": cacheControl]
        for field in fields { headers.append(field.name, field.value) }
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        return Array(body.utf8).withUnsafeBytes {
            builder.build(key: "/r", status: status, reason: nil, headers: headers, body: $0,
                          timing: ResponseTiming(requestTime: storedAt, responseTime: storedAt, dateValue: storedAt, ageValue: 0),
                          tags: [], varyFrom: { _ in nil })
        }
    }

    func response(_ status: Int, _ headers: HeaderFields = [:]) -> UpstreamResponse {
        UpstreamResponse(status: status, reason: nil, headers: headers, requestTime: now, responseTime: now, stripTagHeaders: false)
    }

    func machine(_ policy: RequestPolicy = .useProtocolCachePolicy, byClient: Bool = false, method: String = "GET",
                         grace: Int = 0, fleet: Bool = false) -> ExchangeMachine {
        ExchangeMachine(.init(isCacheLookup: method == "GET" || method == "HEAD", isGet: method == "GET",
                              disconnectedGrace: grace, shared: true, fleet: fleet), choice: .chosen(policy, byClient: byClient))
    }

    /// `completable`: a stored piece completed into the whole (or `wanted`, a range).
    func found(_ outcome: LookupOutcome, completable: CachedResponse? = nil, wanted: PartialContent.Piece? = nil,
                       directives: String = "") -> LookupFound {
        let directives = CacheControl(directives)
        let completion = completable.flatMap { piece in
            piece.piece.map { held in
                Completion(piece: piece, held: held, wanted: wanted ?? PartialContent.Piece(first: 0, last: held.length - 1, length: held.length),
                           answersWhole: wanted == nil)
            }
        }
        return LookupFound(outcome: outcome, completable: completion, now: now, onlyIfCached: directives.onlyIfCached,
                           staleIfError: directives.staleIfError)
    }

    let miss = LookupOutcome.miss(varyMiss: false)

    /// A started machine that looked up and found `outcome`.
    private func lookedUp(_ m: inout ExchangeMachine, _ outcome: LookupOutcome, _ variants: [CachedResponse] = [])
        -> ExchangeAction {
        XCTAssertEqual(m.start(), .lookUp(.local))
        return m.lookedUp(found(outcome), in: Variants(variants))
    }

    func testAHitIsServedAndDone() {
        var m = machine()
        let stored = entry("max-age=60")
        let action = lookedUp(&m, .fresh(index: 0, age: 5, ttl: 55), [stored])
        guard case .serve(let offered) = action else { return XCTFail("\(action)") }
        XCTAssertTrue(offered.entry.isSame(stored))
        XCTAssertEqual(offered.age, 5)
        XCTAssertEqual(offered.count, .hit)
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=55")
        XCTAssertFalse(m.responseStarted, "nothing sent until it is served")
        XCTAssertEqual(m.served(.served), .none)
        XCTAssertTrue(m.clientDone)
        XCTAssertEqual(m.upstreamHead(response(200), now: now), .ignored(.init(event: .upstreamHead, state: .done)), "no upstream for a hit")
    }

    func testAMissLeadsTheFetchAndStreamsItsResponse() {
        var m = machine()
        guard case .collapse(let count, _) = lookedUp(&m, miss) else { return XCTFail() }
        XCTAssertEqual(count, .miss)
        guard case .forward(let how) = m.joined(.leading) else { return XCTFail() }
        XCTAssertEqual(how, .init(leading: true))
        XCTAssertEqual(m.forwarding.reason, .uriMiss)
        XCTAssertFalse(m.responseStarted, "a failure now can still be answered with a stand-in")
        XCTAssertEqual(m.upstreamHead(response(200), now: now), .takeHead)
        let head = m.headSent(response(200), stored: true)
        XCTAssertEqual(head.cacheStatus, "larder; fwd=uri-miss; stored")
        XCTAssertNil(head.completion)
        XCTAssertEqual(m.state, .streaming)
        XCTAssertTrue(m.responseStarted)
        XCTAssertEqual(m.upstreamHead(response(200), now: now), .ignored(.init(event: .upstreamHead, state: .streaming)), "one head per answer")
        XCTAssertEqual(m.upstreamFailed(.unreachable, detail: "gone", now: now), .ignored(.init(event: .upstreamFailed, state: .streaming)), "a failure after the head: no stand-in")
        XCTAssertEqual(m.finish(), .ended)
        XCTAssertTrue(m.clientDone)
    }

    func testAStaleResponseIsValidatedAndA304RefreshesIt() {
        var m = machine()
        let stored = entry("max-age=10", ["etag": "\"v1\""], storedAt: now - 100)
        guard case .collapse(let count, _) = lookedUp(&m, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
        else { return XCTFail() }
        XCTAssertEqual(count, .staleForward)
        XCTAssertTrue(m.forwarding.validating?.isSame(stored) ?? false)
        _ = m.joined(.leading)
        let notModified = response(304, ["etag": "\"v1\""])
        XCTAssertEqual(m.upstreamHead(notModified, now: now), .refresh(stored))
        XCTAssertEqual(m.notModified?.status, 304, "the 304 the refresh is made with")
        let refreshed = entry("max-age=10", ["etag": "\"v1\""])
        guard case .serve(let offered) = m.refreshed((refreshed, true), now: now) else { return XCTFail() }
        XCTAssertTrue(offered.entry.isSame(refreshed))
        XCTAssertEqual(offered.cacheStatus.value, "larder; fwd=stale; fwd-status=304; stored")
        XCTAssertEqual(m.served(.served), .none)
        XCTAssertTrue(m.clientDone)
    }

    func testA304ThatNamesNothingHeldOrWhoseBodyWentIsAskedAgainWithoutValidators() {
        for gone in [false, true] {
            var m = machine()
            let stored = entry("max-age=10", ["etag": "\"v1\""], storedAt: now - 100)
            _ = lookedUp(&m, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
            _ = m.joined(.leading)
            _ = m.upstreamHead(response(304), now: now)
            let again: ExchangeAction
            if gone {
                _ = m.refreshed((entry("max-age=10"), true), now: now)
                again = m.served(.bodyGone)
            } else {
                again = m.refreshed(nil, now: now)
            }
            guard case .forwardAgain(let dropStored) = again else { return XCTFail("\(again)") }
            XCTAssertEqual(dropStored, gone, "a body that went is forgotten")
            XCTAssertNil(m.forwarding.validating)
            guard case .forward(let how) = m.nextTurn() else { return XCTFail() }
            XCTAssertEqual(how, .init(), "alone: the first fetch let its claim go")
        }
    }

    func testStaleWhileRevalidateServesAndRevalidatesInTheBackground() {
        var m = machine()
        let stored = entry("max-age=10, stale-while-revalidate=60", storedAt: now - 20)
        guard case .serve(let offered) = lookedUp(&m, .staleWhileRevalidate(index: 0, age: 20, ttl: -10), [stored])
        else { return XCTFail() }
        XCTAssertEqual(offered.count, .staleHit)
        guard case .revalidate(let entry) = m.served(.served) else { return XCTFail() }
        XCTAssertTrue(entry.isSame(stored))
    }

    func testStaleIfErrorStandsInForA5xxThenTheNextAnswerDown() {
        var m = machine()
        let stored = entry("max-age=10, stale-if-error=600", storedAt: now - 100)
        _ = lookedUp(&m, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
        _ = m.joined(.leading)
        guard case .serve(let offered) = m.upstreamHead(response(503), now: now) else { return XCTFail() }
        XCTAssertTrue(offered.entry.isSame(stored))
        XCTAssertEqual(offered.count, .staleHit)
        XCTAssertEqual(m.served(.bodyGone), .takeHead, "its body went: the upstream's 503 is the answer after all")

        var served = machine()
        _ = lookedUp(&served, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
        _ = served.joined(.leading)
        _ = served.upstreamHead(response(503), now: now)
        XCTAssertEqual(served.served(.served), .none)
        XCTAssertTrue(served.clientDone)
    }

    func testAnUnreachableUpstreamIsStoodInForWithinTheGraceElse502() {
        let stored = entry("max-age=10", storedAt: now - 100)
        var graced = machine(grace: 300)
        _ = lookedUp(&graced, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
        _ = graced.joined(.leading)
        guard case .serve(let offered) = graced.upstreamFailed(.unreachable, detail: "refused", now: now) else { return XCTFail() }
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=-90; detail=upstream-unreachable")

        var plain = machine()
        _ = lookedUp(&plain, .stale(index: 0, age: 100, ttl: -90, requestForced: false), [stored])
        _ = plain.joined(.leading)
        guard case .answer(let made) = plain.upstreamFailed(.unreachable, detail: "refused", now: now) else { return XCTFail() }
        XCTAssertEqual(made.status, 502)
        XCTAssertEqual(made.message, "refused")
        XCTAssertEqual(made.cacheStatus, "larder; fwd=stale; detail=upstream-error")
        XCTAssertTrue(plain.clientDone)
    }

    func testACollapsedWaitEndsInALookupThroughThePolicy() {
        // The leader stored a fresh response: served, counted as collapsed already.
        var m = machine()
        _ = lookedUp(&m, miss)
        XCTAssertEqual(m.joined(.waiting), .awaitLock(count: .collapsed))
        XCTAssertEqual(m.state, .waitingForLeader)
        XCTAssertFalse(m.responseStarted)
        XCTAssertEqual(m.leaderDone(.lookUpAgain), .lookUp(.local))
        let stored = entry("max-age=60")
        guard case .serve(let offered) = m.lookedUp(found(.fresh(index: 0, age: 0, ttl: 60)), in: Variants([stored])) else { return XCTFail() }
        XCTAssertEqual(offered.count, .none)
        XCTAssertEqual(offered.cacheStatus.value, "larder; fwd=uri-miss; collapsed")

        // The wait timed out and nothing is stored: fetch alone, never waiting again.
        var timedOut = machine()
        _ = lookedUp(&timedOut, miss)
        _ = timedOut.joined(.waiting)
        _ = timedOut.leaderDone(.lookUpAgain)
        guard case .forward(let how) = timedOut.lookedUp(found(miss), in: Variants()) else { return XCTFail() }
        XCTAssertEqual(how, .init(), "not leading, not counted again")
        XCTAssertEqual(timedOut.leaderDone(.lookUpAgain), .ignored(.init(event: .leaderDone, state: .forwarding)), "a late wake-up does nothing")

        // The leader stored a stale-while-revalidate response: the policy serves it and refreshes.
        var swr = machine()
        _ = lookedUp(&swr, miss)
        _ = swr.joined(.waiting)
        _ = swr.leaderDone(.lookUpAgain)
        let stale = entry("max-age=1, stale-while-revalidate=60", storedAt: now - 5)
        _ = swr.lookedUp(found(.staleWhileRevalidate(index: 0, age: 5, ttl: -4)), in: Variants([stale]))
        XCTAssertEqual(swr.served(.served), .revalidate(stale))
    }

    /// A leader's published fetch of a whole 200.
    var fetch: SharedFetch {
        SharedFetch(head: SharedFetch.Head(
            status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
            contentLength: nil, varyNames: [], varyValues: []), limitBytes: 1 << 20)
    }

    func testAWaiterFollowsTheLeadersResponseOrLeavesBeforeIt() {
        let fetch = self.fetch
        var m = machine()
        _ = lookedUp(&m, miss)
        _ = m.joined(.waiting)
        guard case .follow(_, let count) = m.leaderDone(.follow(fetch)) else { return XCTFail() }
        XCTAssertEqual(m.followedCacheStatus, "larder; fwd=uri-miss; collapsed")
        XCTAssertEqual(count, .none, "counted when it joined")
        XCTAssertTrue(m.responseStarted)

        var gone = machine()
        _ = lookedUp(&gone, miss)
        _ = gone.joined(.waiting)
        XCTAssertEqual(gone.clientGone(), .ended)
        XCTAssertEqual(gone.leaderDone(.follow(fetch)), .ignored(.init(event: .leaderDone, state: .done)))
    }

    /// A HEAD that missed is fetched as a GET (and stored); one that
    /// validates, reloads or bypasses goes as a HEAD; other methods as they are.
    func testOnlyAHeadThatMissedIsFetchedAsAGet() {
        XCTAssertTrue(Forwarding.fetchesAsGet("HEAD", reason: .uriMiss))
        XCTAssertTrue(Forwarding.fetchesAsGet("HEAD", reason: .varyMiss))
        for reason: CacheStatus.Forward in [.stale, .request, .bypass, .method, .partial] {
            XCTAssertFalse(Forwarding.fetchesAsGet("HEAD", reason: reason), "\(reason)")
        }
        XCTAssertFalse(Forwarding.fetchesAsGet("GET", reason: .uriMiss))
        XCTAssertFalse(Forwarding.fetchesAsGet("POST", reason: .uriMiss))
    }

    func testTheClientGoneMidStreamStopsEverythingAfter() {
        var m = machine()
        _ = lookedUp(&m, miss)
        _ = m.joined(.leading)
        _ = m.upstreamHead(response(200), now: now)
        _ = m.headSent(response(200), stored: false)
        XCTAssertEqual(m.clientGone(), .ended)
        XCTAssertTrue(m.clientDone)
        XCTAssertEqual(m.upstreamHead(response(200), now: now), .ignored(.init(event: .upstreamHead, state: .done)))
        XCTAssertEqual(m.upstreamFailed(.timedOut, detail: "late", now: now), .ignored(.init(event: .upstreamFailed, state: .done)))
        XCTAssertEqual(m.served(.bodyGone), .ignored(.init(event: .served, state: .done)))
        XCTAssertEqual(m.nextTurn(), .ignored(.init(event: .nextTurn, state: .done)))
    }

    func testAStoredBodyThatWentIsForgottenAndLookedUpOnce() {
        var m = machine()
        let stored = entry("max-age=60")
        _ = lookedUp(&m, .fresh(index: 0, age: 0, ttl: 60), [stored])
        XCTAssertEqual(m.served(.bodyGone), .lookUp(.forgetting))
        _ = m.lookedUp(found(.fresh(index: 0, age: 0, ttl: 60)), in: Variants([stored]))
        XCTAssertEqual(m.served(.bodyGone), .collapse(count: .miss), "gone twice: fetched, not looked up again")

        var undecodable = machine(fleet: true)
        _ = lookedUp(&undecodable, .fresh(index: 0, age: 0, ttl: 60), [stored])
        guard case .collapse(let count, _) = undecodable.served(.undecodable) else { return XCTFail() }
        XCTAssertEqual(count, .miss, "kept for clients that take gzip; this one's identity copy is fetched")
    }

    /// The fleet's shared tier is the lookup's last stage, asked once the
    /// local tiers had nothing usable; its claim is part of the cache
    /// lock's join. No state of the exchange is the fleet's.
    func testTheFleetIsAskedOnAMissAndItsClaimDecidesWhoFetches() {
        let shared = entry("max-age=60")
        var hit = machine(fleet: true)
        XCTAssertEqual(lookedUp(&hit, miss), .lookUp(.shared))
        XCTAssertEqual(hit.state, .lookingUp, "still the lookup, one stage further")
        XCTAssertEqual(hit.lookedUp(found(miss), in: Variants()), .ignored(.init(event: .lookedUp, state: .lookingUp)),
                       "the shared stage's answer is the one awaited")
        guard case .serve(let offered) = hit.lookedUp(found(.fresh(index: 0, age: 1, ttl: 59)), in: Variants([shared]), from: .shared)
        else { return XCTFail() }
        XCTAssertEqual(offered.cacheStatus.value, "larder; hit; ttl=59; detail=fleet")
        XCTAssertEqual(offered.count, .hit)

        var unreachable = machine(fleet: true)
        _ = lookedUp(&unreachable, miss)
        XCTAssertEqual(unreachable.lookedUp(found(miss), in: Variants(), from: .sharedUnavailable),
                       .collapse(count: .miss, acrossFleet: false), "decided on what was found here; no claim asked of it")

        var other = machine(fleet: true)
        _ = lookedUp(&other, miss)
        XCTAssertEqual(other.lookedUp(found(miss), in: Variants(), from: .shared), .collapse(count: .miss, acrossFleet: true))
        XCTAssertEqual(other.joined(.claiming), .awaitLock(count: .none), "the fleet's claim is asked: nothing counted twice")
        XCTAssertEqual(other.state, .joining)
        XCTAssertEqual(other.joined(.fetchedElsewhere), .lookUp(.shared), "another node fetches: its answer is looked for")
        guard case .serve(let fromOther) = other.lookedUp(found(.fresh(index: 0, age: 0, ttl: 60)), in: Variants([shared]), from: .shared)
        else { return XCTFail() }
        XCTAssertTrue(fromOther.releasesClaim, "this node's waiters find it stored now")
        XCTAssertEqual(fromOther.count, .collapsed)

        var notThere = machine(fleet: true)
        _ = lookedUp(&notThere, miss)
        _ = notThere.lookedUp(found(miss), in: Variants(), from: .shared)
        _ = notThere.joined(.fetchedElsewhere)
        XCTAssertEqual(notThere.lookedUp(found(miss), in: Variants(), from: .sharedUnavailable), .forward(.init(leading: true)),
                       "not shared after all: fetched here, leading here")

        var claimed = machine(fleet: true)
        _ = lookedUp(&claimed, miss)
        _ = claimed.lookedUp(found(miss), in: Variants(), from: .shared)
        _ = claimed.joined(.claiming)
        XCTAssertEqual(claimed.leaderDone(.claimedAcrossFleet(true)), .forward(.init(leading: true, claimedInFleet: true)),
                       "the lock's later answer: this node holds the fleet's claim")

        var left = machine(fleet: true)
        _ = lookedUp(&left, miss)
        _ = left.lookedUp(found(miss), in: Variants(), from: .shared)
        _ = left.joined(.fetchedElsewhere)
        XCTAssertEqual(left.clientGone(), .releaseClaim, "the client left while this exchange led here: it lets go")
        XCTAssertEqual(left.lookedUp(found(miss), in: Variants(), from: .shared), .ignored(.init(event: .lookedUp, state: .done)))
        var gone = machine(fleet: true)
        _ = lookedUp(&gone, miss)
        XCTAssertEqual(gone.clientGone(), .ended, "no claim held")
    }

    func testEachPolicyDecides() {
        let fresh = entry("max-age=60")
        let stale = entry("max-age=10", ["etag": "\"v1\""], storedAt: now - 100)
        let staleOutcome = LookupOutcome.stale(index: 0, age: 100, ttl: -90, requestForced: false)

        var reload = machine(.reloadIgnoringLocalCacheData, byClient: true)
        guard case .forward(let how) = lookedUp(&reload, .fresh(index: 0, age: 0, ttl: 60), [fresh]) else { return XCTFail() }
        XCTAssertEqual(how, .init(count: .miss), "never collapsed")
        XCTAssertEqual(reload.forwarding.reason, .request)
        XCTAssertNil(reload.forwarding.validating)

        var remote = machine(.reloadIgnoringLocalAndRemoteCacheData)
        _ = lookedUp(&remote, .fresh(index: 0, age: 0, ttl: 60), [fresh])
        XCTAssertTrue(remote.forwarding.noCacheUpstream)
        XCTAssertEqual(remote.forwarding.reason, .bypass)

        var revalidating = machine(.reloadRevalidatingCacheData)
        _ = lookedUp(&revalidating, .fresh(index: 0, age: 0, ttl: 60), [stale])
        XCTAssertTrue(revalidating.forwarding.validating?.isSame(stale) ?? false)

        var elseLoad = machine(.returnCacheDataElseLoad)
        guard case .serve(let served) = lookedUp(&elseLoad, staleOutcome, [stale]) else { return XCTFail("however stale") }
        XCTAssertTrue(served.entry.isSame(stale))
        var elseLoadMiss = machine(.returnCacheDataElseLoad)
        XCTAssertEqual(lookedUp(&elseLoadMiss, miss), .collapse(count: .miss))

        var dontLoad = machine(.returnCacheDataDontLoad)
        guard case .answer(let made) = lookedUp(&dontLoad, miss) else { return XCTFail() }
        XCTAssertEqual(made.status, 504)
        XCTAssertEqual(made.cacheStatus, "larder; detail=cache-only")

        var thenFetch = machine(.cacheThenFetch)
        _ = lookedUp(&thenFetch, .fresh(index: 0, age: 0, ttl: 60), [fresh])
        XCTAssertEqual(thenFetch.served(.served), .revalidate(fresh))

        var networkFirst = machine(.networkElseCache)
        XCTAssertEqual(lookedUp(&networkFirst, .fresh(index: 0, age: 0, ttl: 60), [fresh]), .forward(.init(count: .miss)))
        guard case .serve(let fallback) = networkFirst.upstreamFailed(.timedOut, detail: "slow", now: now) else { return XCTFail() }
        XCTAssertTrue(fallback.entry.isSame(fresh), "the stored response when the network fails")

        var onlyIfCached = machine()
        _ = onlyIfCached.start()
        guard case .answer(let gateway) = onlyIfCached.lookedUp(found(staleOutcome, directives: "only-if-cached"), in: Variants([stale]))
        else { return XCTFail() }
        XCTAssertEqual(gateway.status, 504)

        var unknown = ExchangeMachine(.init(isCacheLookup: true, isGet: true, disconnectedGrace: 0, shared: true, fleet: false),
                                      choice: .unknown(message: "unknown Larder-Cache-Policy"))
        guard case .answer(let badRequest) = unknown.start() else { return XCTFail() }
        XCTAssertEqual(badRequest.status, 400)
        XCTAssertEqual(badRequest.message, "unknown Larder-Cache-Policy")
    }

    func testARequestThatIsNotLookedUpGoesStraightUpstreamAndItsErrorsPassThrough() {
        var m = machine(method: "POST")
        guard case .forward(let how) = m.start() else { return XCTFail() }
        XCTAssertEqual(how, .init())
        XCTAssertEqual(m.forwarding.reason, .method)
        XCTAssertEqual(m.upstreamHead(response(503), now: now), .takeHead, "nothing stored stands in for a POST")
        var failed = machine(method: "POST")
        _ = failed.start()
        guard case .answer(let made) = failed.upstreamFailed(.timedOut, detail: "slow", now: now) else { return XCTFail() }
        XCTAssertEqual(made.status, 504)
        XCTAssertNil(made.cacheStatus)
    }
}
