import Routing
import XCTest
import CacheSemantics
import HTTP1
@testable import Proxy

/// A lookup's outcome under each policy, as what Larder does next.
final class LookupPlanTests: XCTestCase {
    private func plan(_ policy: RequestPolicy, _ outcome: LookupOutcome, byClient: Bool = false,
                      onlyIfCached: Bool = false) -> LookupPlan {
        LookupPlan.make(policy.action(for: outcome), chosenByClient: byClient, onlyIfCached: onlyIfCached)
    }

    private let fresh = LookupOutcome.fresh(index: 1, age: 5, ttl: 55)
    private let stale = LookupOutcome.stale(index: 0, age: 90, ttl: -30, requestForced: false)
    private let miss = LookupOutcome.miss(varyMiss: false)

    func testTheProtocolServesFreshAndStaleWhileRevalidateAndForwardsTheRest() {
        XCTAssertEqual(plan(.useProtocolCachePolicy, fresh), .serve(index: 1, age: 5, ttl: 55, stale: false, refresh: false))
        XCTAssertEqual(plan(.useProtocolCachePolicy, .staleWhileRevalidate(index: 0, age: 70, ttl: -10)),
                       .serve(index: 0, age: 70, ttl: -10, stale: true, refresh: true))
        XCTAssertEqual(plan(.useProtocolCachePolicy, stale),
                       .forward(.init(reason: .stale, validate: 0, staleCandidate: 0)), "validated, and a stand-in if the upstream fails")
        XCTAssertEqual(plan(.useProtocolCachePolicy, .stale(index: 0, age: 1, ttl: 59, requestForced: true)),
                       .forward(.init(reason: .request, validate: 0, staleCandidate: 0)), "the client's no-cache or max-age=0")
        XCTAssertEqual(plan(.useProtocolCachePolicy, miss), .forward(.init(reason: .uriMiss)))
        XCTAssertEqual(plan(.useProtocolCachePolicy, .miss(varyMiss: true)), .forward(.init(reason: .varyMiss)))
    }

    func testTheFleetIsAskedWhenAStoredResponseCouldStillAnswer() {
        XCTAssertTrue(plan(.useProtocolCachePolicy, miss).mayAskFleet)
        XCTAssertTrue(plan(.useProtocolCachePolicy, stale).mayAskFleet, "another node may hold a fresher copy")
        XCTAssertTrue(plan(.returnCacheDataDontLoad, miss).mayAskFleet, "before a 504")
        XCTAssertTrue(plan(.useProtocolCachePolicy, miss, onlyIfCached: true).mayAskFleet)
        XCTAssertFalse(plan(.useProtocolCachePolicy, fresh).mayAskFleet, "a local hit never waits on Redis")
        XCTAssertFalse(plan(.reloadIgnoringLocalCacheData, miss).mayAskFleet, "a reload goes upstream")
        XCTAssertFalse(plan(.networkElseCache, stale).mayAskFleet)
    }

    func testOnlyIfCachedTurnsEveryTripUpstreamOfTheProtocolInto504() {
        XCTAssertEqual(plan(.useProtocolCachePolicy, miss, onlyIfCached: true),
                       .cacheOnlyMiss(detail: "only-if-cached", message: "only-if-cached: no usable stored response"))
        XCTAssertEqual(plan(.useProtocolCachePolicy, stale, onlyIfCached: true),
                       .cacheOnlyMiss(detail: "only-if-cached", message: "only-if-cached: no usable stored response"))
        XCTAssertEqual(plan(.useProtocolCachePolicy, fresh, onlyIfCached: true),
                       .serve(index: 1, age: 5, ttl: 55, stale: false, refresh: false))
        XCTAssertEqual(LookupPlan.afterVanishedBody(onlyIfCached: true),
                       .cacheOnlyMiss(detail: "only-if-cached", message: "only-if-cached: no usable stored response"))
        XCTAssertEqual(LookupPlan.afterVanishedBody(onlyIfCached: false), .forward(.init(reason: .uriMiss)))
    }

    func testReloadsAreNotCollapsedAndSayWhoAskedForThem() {
        XCTAssertEqual(plan(.reloadIgnoringLocalCacheData, fresh, byClient: true),
                       .forward(.init(reason: .request, collapse: false)))
        XCTAssertEqual(plan(.reloadIgnoringLocalAndRemoteCacheData, fresh),
                       .forward(.init(reason: .bypass, noCacheUpstream: true, collapse: false)))
        XCTAssertEqual(plan(.reloadRevalidatingCacheData, fresh), .forward(.init(reason: .bypass, validate: 1, collapse: false)))
        XCTAssertEqual(plan(.networkElseCache, stale), .forward(.init(reason: .bypass, fallback: 0, collapse: false)))
        XCTAssertEqual(plan(.reloadIgnoringLocalCacheData, fresh, onlyIfCached: true),
                       .forward(.init(reason: .bypass, collapse: false)), "a configured reload is not a protocol trip")
    }

    func testCachePoliciesServeWhateverIsStored() {
        XCTAssertEqual(plan(.returnCacheDataElseLoad, stale), .serve(index: 0, age: 90, ttl: -30, stale: true, refresh: false))
        XCTAssertEqual(plan(.returnCacheDataElseLoad, miss), .forward(.init(reason: .uriMiss)))
        XCTAssertEqual(plan(.returnCacheDataDontLoad, fresh), .serve(index: 1, age: 5, ttl: 55, stale: false, refresh: false))
        XCTAssertEqual(plan(.returnCacheDataDontLoad, miss),
                       .cacheOnlyMiss(detail: "cache-only",
                                      message: "nothing stored for this URL and the policy forbids asking the upstream"))
        XCTAssertEqual(plan(.cacheThenFetch, fresh), .serve(index: 1, age: 5, ttl: 55, stale: false, refresh: true))
        XCTAssertEqual(plan(.cacheThenFetch, miss), .forward(.init(reason: .uriMiss)))
    }

    func testTheClientChoosesThePolicyOnlyWhereAllowed() {
        XCTAssertEqual(PolicyChoice.make(clientMayChoose: true, header: "cacheOnly", configured: .useProtocolCachePolicy),
                       .chosen(.returnCacheDataDontLoad, byClient: true), "aliases are accepted")
        XCTAssertEqual(PolicyChoice.make(clientMayChoose: true, header: nil, configured: .networkElseCache),
                       .chosen(.networkElseCache, byClient: false))
        XCTAssertEqual(PolicyChoice.make(clientMayChoose: false, header: "nonsense", configured: .cacheThenFetch),
                       .chosen(.cacheThenFetch, byClient: false), "a header clients may not use is ignored, even a bad one")
        guard case .unknown(let message) = PolicyChoice.make(clientMayChoose: true, header: "fastest", configured: .useProtocolCachePolicy)
        else { return XCTFail("an unknown name is refused") }
        XCTAssertTrue(message.contains("\"fastest\""), message)
        XCTAssertTrue(message.contains("returnCacheDataElseLoad"), "the valid names are listed")
    }

    private func head(_ fields: String) throws -> RequestHead {
        var parser = RequestParser()
        guard case .complete(let head, _) = Array("GET /r/a HTTP/1.1\r\nHost: x\r\n\(fields)\r\n".utf8).withUnsafeBytes({ parser.parse($0) })
        else { throw XCTSkip("unparsed") }
        return head
    }

    private func choose(_ request: RequestHead, _ route: Route?, _ configuration: ProxyConfiguration) -> PolicyChoice {
        PolicyChoice.make(for: request, route: route.map(RouteFacts.init), configured: configuration.defaultPolicy,
                          clientsMayChoose: configuration.allowClientPolicy)
    }

    func testARoutesPolicyAndPermissionComeBeforeTheConfigurations() throws {
        var configuration = ProxyConfiguration(upstreamBase: "http://127.0.0.1:1")
        configuration.defaultPolicy = .networkElseCache
        var route = Route(prefix: "/r")
        route.policy = .returnCacheDataElseLoad
        route.allowClientPolicy = false
        let asking = try head("Larder-Cache-Policy: reloadIgnoringLocalCacheData\r\n")
        XCTAssertEqual(choose(asking, route, configuration), .chosen(.returnCacheDataElseLoad, byClient: false),
                       "the route's policy, and its refusal of the client's choice")
        XCTAssertEqual(choose(asking, nil, configuration), .chosen(.reloadIgnoringLocalCacheData, byClient: true),
                       "outside any route the configuration lets clients choose")
        route.allowClientPolicy = nil
        XCTAssertEqual(choose(try head(""), route, configuration), .chosen(.returnCacheDataElseLoad, byClient: false))
        configuration.allowClientPolicy = false
        XCTAssertEqual(choose(asking, route, configuration), .chosen(.returnCacheDataElseLoad, byClient: false),
                       "a route that says nothing about permission follows the configuration")
    }

    func testPragmaNoCacheCountsOnlyWhereHonoured() throws {
        let request = try head("Pragma: No-Cache\r\nAccept: text/a\r\nAccept: text/b\r\n")
        XCTAssertTrue(RequestFacts(request, CacheControl(nil), honouringPragma: true).pragmaNoCache)
        XCTAssertFalse(RequestFacts(request, CacheControl(nil), honouringPragma: false).pragmaNoCache,
                       "a collapsed request looking up again takes what its leader stored")
        XCTAssertEqual(RequestFacts(request, CacheControl(nil), honouringPragma: true).field("accept"), "text/a, text/b",
                       "Vary compares combined values")
    }
}
