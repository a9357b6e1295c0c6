import Foundation
import XCTest

/// The request policies of docs/routes-and-policies.md, end to end: each on a miss, a fresh
/// hit and a stale hit, counting what reaches the origin.
final class PolicyTests: ProxyTestCase {
    private func get(_ target: String, policy: String? = nil, _ headers: [String] = []) throws -> HTTPResponse {
        try larder.client().get(target, headers: (policy.map { ["Larder-Cache-Policy: \($0)"] } ?? []) + headers)
    }



    func testUnknownPolicyIs400WithTheValidNames() throws {
        let r = try get("/p?size=1", policy: "sometimes")
        XCTAssertEqual(r.status, 400)
        XCTAssertTrue(r.text.contains("returnCacheDataElseLoad") && r.text.contains("networkOnly"), r.text)
        XCTAssertEqual(try origin.count("/p?size=1"), 0)
    }

    func testReloadIgnoringLocalCacheDataFetchesAndStores() throws {
        let target = "/reload?size=10"
        _ = try get(target)
        for name in ["reloadIgnoringLocalCacheData", "NETWORKONLY"] {
            let r = try get(target, policy: name)
            XCTAssertEqual(r.header("cache-status"), "larder; fwd=request; stored", name)
        }
        XCTAssertEqual(try origin.count(target), 3)
        XCTAssertNil(try originHeaders(target)["larder-cache-policy"], "the header is not forwarded")
        XCTAssertEqual(try get(target).header("x-origin-count"), "3", "the reloaded response was stored")
    }

    func testReloadIgnoringLocalAndRemoteCacheDataAsksUpstreamToReload() throws {
        let target = "/reload2?size=10"
        _ = try get(target, policy: "reloadIgnoringLocalAndRemoteCacheData")
        XCTAssertEqual(try originHeaders(target)["cache-control"], "no-cache")
    }

    func testReloadRevalidatingCacheDataValidatesEvenAFreshResponse() throws {
        let target = "/reval?etag=r&size=10"
        let first = try get(target)
        let r = try get(target, policy: "reloadRevalidatingCacheData")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, first.body)
        XCTAssertEqual(r.header("cache-status"), "larder; fwd=request; fwd-status=304; stored")
        XCTAssertEqual(try originHeaders(target)["if-none-match"], "\"r\"")
    }

    func testReturnCacheDataElseLoadServesStaleAndFetchesOnAMiss() throws {
        let target = "/else?cc=max-age=0&size=10"
        let first = try get(target, policy: "returnCacheDataElseLoad")  // a miss: fetched
        XCTAssertEqual(first.status, 200)
        let stale = try get(target, policy: "cacheElseFetch")
        XCTAssertEqual(stale.body, first.body)
        XCTAssertTrue(stale.header("cache-status")?.hasPrefix("larder; hit; ttl=") ?? false)
        XCTAssertEqual(try origin.count(target), 1)
    }

    func testReturnCacheDataDontLoadNeverContactsTheUpstream() throws {
        let miss = try get("/only?size=10", policy: "returnCacheDataDontLoad")
        XCTAssertEqual(miss.status, 504)
        XCTAssertEqual(try origin.count("/only?size=10"), 0)
        _ = try get("/only2?cc=max-age=0&size=10")
        XCTAssertEqual(try get("/only2?cc=max-age=0&size=10", policy: "cacheOnly").status, 200)
        XCTAssertEqual(try origin.count("/only2?cc=max-age=0&size=10"), 1)
    }

    func testCacheThenFetchServesAtOnceAndRefreshesInTheBackground() throws {
        let target = "/ctf?cc=max-age=60&size=10"
        _ = try get(target)
        let r = try get(target, policy: "cacheThenFetch")
        XCTAssertEqual(r.header("x-origin-count"), "1", "served from the cache without waiting")
        XCTAssertEqual(try waitForOriginCount(target, atLeast: 2), 2, "one background refresh")
    }

    func testNetworkElseCacheFallsBackToTheStoredResponse() throws {
        let failing = "/nec?fail_after=1&size=10"
        let first = try get(failing)
        let fallback = try get(failing, policy: "networkElseCache")
        XCTAssertEqual(fallback.status, 200)
        XCTAssertEqual(fallback.body, first.body)
        XCTAssertEqual(try origin.count(failing), 2, "the upstream was asked first")
        // Upstream gone entirely.
        let gone = "/nec2?size=10"
        let kept = try get(gone)
        origin.stop()
        let afterStop = try get(gone, policy: "networkElseCache")
        XCTAssertEqual(afterStop.status, 200)
        XCTAssertEqual(afterStop.body, kept.body)
    }
}

/// Policies set by configuration.
final class ConfiguredPolicyTests: ConfiguredTestCase {
    private func start(_ config: String) throws -> (Origin, LarderProcess) {
        try start(config: config)
    }

    func testClientPolicyIgnoredWhenNotAllowed() throws {
        let (origin, larder) = try start("allow_client_policy = false\n")
        let c = try larder.client()
        _ = try c.get("/x?size=5")
        let r = try c.get("/x?size=5", headers: ["Larder-Cache-Policy: reloadIgnoringLocalCacheData"])
        XCTAssertTrue(r.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try c.get("/y?size=5", headers: ["Larder-Cache-Policy: nonsense"]).status, 200, "not even parsed")
        XCTAssertEqual(try origin.count("/x?size=5"), 1)
    }

    func testAConfiguredReloadPolicyIsABypass() throws {
        let (origin, larder) = try start("policy = \"networkOnly\"\n")
        let c = try larder.client()
        _ = try c.get("/b?size=5")
        XCTAssertEqual(try c.get("/b?size=5").header("cache-status"), "larder; fwd=bypass; stored")
        XCTAssertEqual(try origin.count("/b?size=5"), 2)
        // A client may still choose its own.
        XCTAssertTrue(try c.get("/b?size=5", headers: ["Larder-Cache-Policy: cacheOnly"]).header("cache-status")?.contains("hit") ?? false)
    }
}
