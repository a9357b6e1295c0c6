import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// `[[route]]` tables end to end.
final class RouteTests: ConfiguredTestCase {
    var origin: Origin!

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try startOrigin()
    }

    private func start(_ config: String, _ extra: [String] = []) throws -> LarderProcess {
        try startLarder(upstream: origin.url, ["--config", try writeConfig(config)] + extra, environment: LarderProcess.testClock)
    }

    func testLongestPrefixPicksThePolicy() throws {
        let larder = try start("""
            [[route]]
            prefix = "/static/"
            policy = "cacheOnly"

            [[route]]
            prefix = "/static/live/"
            policy = "networkOnly"
            """)
        let c = try larder.client()
        XCTAssertEqual(try c.get("/static/x?size=5").status, 504, "cacheOnly: a miss never goes upstream")
        _ = try c.get("/static/live/x?size=5")
        XCTAssertEqual(try c.get("/static/live/x?size=5").header("cache-status"), "larder; fwd=bypass; stored")
        XCTAssertEqual(try origin.count("/static/live/x?size=5"), 2)
        XCTAssertEqual(try origin.count("/static/x?size=5"), 0)
        _ = try c.get("/elsewhere?size=5")
        XCTAssertTrue(try c.get("/elsewhere?size=5").header("cache-status")?.contains("hit") ?? false)
    }

    func testDefaultAndNegativeTTLsAndIgnoringUpstreamCacheControl() throws {
        let larder = try start("""
            [[route]]
            prefix = "/dflt/"
            default_ttl = "1m"
            negative_ttl = "30s"

            [[route]]
            prefix = "/ign/"
            default_ttl = "1h"
            ignore_upstream_cache_control = true
            """)
        let c = try larder.client()
        for target in ["/dflt/a?cc=none&size=5", "/dflt/b?cc=none&status=404", "/ign/a?cc=no-cache,private,max-age=0&size=5"] {
            _ = try c.get(target)
            let again = try c.get(target)
            XCTAssertTrue(again.header("cache-status")?.contains("hit") ?? false, "\(target): \(again.headers)")
            XCTAssertEqual(try origin.count(target), 1, target)
        }
        XCTAssertEqual(try c.get("/ign/a?cc=no-cache,private,max-age=0&size=5").header("cache-control"), "no-cache,private,max-age=0",
                       "clients still see the upstream's directives")
        let noStore = "/ign/b?cc=no-store"
        _ = try c.get(noStore)
        _ = try c.get(noStore)
        XCTAssertEqual(try origin.count(noStore), 2, "no-store is still honoured")
    }

    /// A route's default_ttl stands in for missing freshness of content,
    /// never of an upstream's error: a 503 without Cache-Control is not
    /// stored (every request asks again), unless
    /// negative_ttl says how long errors are kept.
    func testAnUpstreamErrorIsNeverKeptForTheDefaultTTL() throws {
        let larder = try start("""
            [[route]]
            prefix = "/pin/"
            default_ttl = "1h"

            [[route]]
            prefix = "/neg/"
            default_ttl = "1h"
            negative_ttl = "30s"
            """)
        let c = try larder.client()
        let error = "/pin/a?cc=none&status=503"
        XCTAssertEqual(try c.get(error).status, 503)
        let again = try c.get(error)
        XCTAssertEqual(again.status, 503)
        XCTAssertEqual(again.header("cache-status"), "larder; fwd=uri-miss", "asked again: it was not stored")
        XCTAssertEqual(try origin.count(error), 2)
        let content = "/pin/b?cc=none&size=5"
        _ = try c.get(content)
        XCTAssertTrue(try c.get(content).header("cache-status")?.hasPrefix("larder; hit; ttl=3") ?? false, "content: default_ttl")
        let kept = "/neg/a?cc=none&status=503"
        _ = try c.get(kept)
        let hit = try c.get(kept)
        XCTAssertEqual(hit.status, 503)
        XCTAssertTrue(hit.header("cache-status")?.hasPrefix("larder; hit; ttl=") ?? false, "negative_ttl keeps it: \(hit.headers)")
        XCTAssertEqual(try origin.count(kept), 1)
    }

    func testRouteCanForbidClientPolicies() throws {
        let larder = try start("""
            [[route]]
            prefix = "/locked/"
            allow_client_policy = false
            """)
        let c = try larder.client()
        _ = try c.get("/locked/a?size=5")
        let r = try c.get("/locked/a?size=5", headers: ["Larder-Cache-Policy: networkOnly"])
        XCTAssertTrue(r.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try c.get("/open/a?size=5", headers: ["Larder-Cache-Policy: cacheOnly"]).status, 504)
    }

    func testDiskFalseKeepsARouteOutOfTheDiskTier() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-route-disk-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let larder = try start("""
            [[route]]
            prefix = "/mem/"
            disk = false
            """, ["--cache-dir", directory])
        let c = try larder.client()
        _ = try c.get("/mem/a?size=5")
        _ = try c.get("/disk/a?size=5")
        kill(larder.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(larder.child.waitForExit(timeout: 20), 0)
        let files = (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
        XCTAssertEqual(files.count, 1, "only /disk/a was written")
    }

    func testCacheKeyOptionsShareOneStoredResponse() throws {
        let larder = try start("""
            [[route]]
            prefix = "/q/"
            sort_query = true
            ignore_query_params = ["utm_source"]

            [[route]]
            prefix = "/nq/"
            ignore_query = true
            """)
        let c = try larder.client()
        let first = try c.get("/q/a?b=2&a=1&utm_source=mail&size=7")
        XCTAssertEqual(try origin.count("/q/a?b=2&a=1&utm_source=mail&size=7"), 1, "the upstream gets the target as sent")
        let same = try c.get("/q/a?size=7&a=1&b=2")
        XCTAssertTrue(same.header("cache-status")?.contains("hit") ?? false, "\(same.headers)")
        XCTAssertEqual(same.body, first.body)
        XCTAssertFalse(try c.get("/q/a?a=1&b=3&size=7").header("cache-status")?.contains("hit") ?? true)
        _ = try c.get("/nq/a?x=1")
        XCTAssertTrue(try c.get("/nq/a?y=2").header("cache-status")?.contains("hit") ?? false)
    }

    func testRouteTierLifetimes() throws {
        let larder = try start("""
            [[route]]
            prefix = "/brief/"
            memory_ttl = "1s"
            disk_ttl = "mirror"
            """)
        let c = try larder.client()
        _ = try c.get("/brief/a?size=5")
        _ = try c.get("/lasting/a?size=5")
        try larder.advanceClock(2.2)  // tier lifetimes are in whole seconds
        XCTAssertEqual(try c.get("/brief/a?size=5").header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertTrue(try c.get("/lasting/a?size=5").header("cache-status")?.contains("hit") ?? false)
    }

    func testGlobsMethodsAndConfigurablePresets() throws {
        let larder = try start("""
            [presets]
            short = "1s"

            [[route]]
            prefix = "/"
            glob = "*.jpg"
            memory_ttl = "short"

            [[route]]
            prefix = "/p/"
            methods = ["POST"]
            policy = "cacheOnly"
            """)
        let c = try larder.client()
        XCTAssertEqual(try c.get("/p/x?size=5").status, 200, "the /p/ route is for POST only")
        _ = try c.get("/img/a.jpg?size=5")
        _ = try c.get("/img/a.png?size=5")
        try larder.advanceClock(2.2)  // "short" is 1s here
        XCTAssertEqual(try c.get("/img/a.jpg?size=5").header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertTrue(try c.get("/img/a.png?size=5").header("cache-status")?.contains("hit") ?? false)
    }

    func testKeyHeadersSeparateStoredResponses() throws {
        let larder = try start("""
            [[route]]
            prefix = "/t/"
            key_headers = ["X-Tenant"]
            """)
        let c = try larder.client()
        let a = try c.get("/t/x?size=5", headers: ["X-Tenant: a"])
        let b = try c.get("/t/x?size=5", headers: ["X-Tenant: b"])
        XCTAssertEqual(b.header("cache-status"), "larder; fwd=vary-miss; stored")
        XCTAssertNil(b.header("vary"), "the route's key fields are not shown as Vary")
        XCTAssertTrue(try c.get("/t/x?size=5", headers: ["X-Tenant: a"]).header("cache-status")?.contains("hit") ?? false)
        XCTAssertTrue(try c.get("/t/x?size=5", headers: ["X-Tenant: b"]).header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try origin.count("/t/x?size=5"), 2)
        _ = a
    }

    func testRouteErrorsNameFileLineAndKey() throws {
        func check(_ text: String, _ expected: String) throws {
            let path = try writeConfig(text)
            let child = try ChildProcess(Paths.larder, ["check-config", "--config", path])
            XCTAssertEqual(child.waitForExit(timeout: 20), 78, text)
            XCTAssertNotNil(child.waitFor(NSRegularExpression.escapedPattern(for: path + expected), timeout: 2), child.stderr)
        }
        try check("[[route]]\nprefix = \"/a/\"\nsurprise = 1\n", ":3: route.surprise: unknown route key")
        try check("# routes\n[[route]]\npolicy = \"cacheOnly\"\n", ":2: route.prefix:")
        try check("[[route]]\nprefix = \"/a/\"\npolicy = \"sometimes\"\n", ":3: route.policy: unknown policy")
        try check("[[route]]\nprefix = \"/a/\"\nignore_upstream_cache_control = true\n", ":3: route.ignore_upstream_cache_control: needs default_ttl")
        try check("[[route]]\nprefix = \"/a/\"\ndisk = \"no\"\n", ":3: route.disk: expected true or false")
        try check("[[route]]\nprefix = \"/a/\"\nignore_query_params = \"utm\"\n", ":3: route.ignore_query_params: expected a list")
        try check("[[route]]\nprefix = \"/a/\"\nmemory_ttl = \"mirror\"\n", ":3: route.memory_ttl: expected a duration")
        try check("[presets]\nshort = \"1m\"\nbrief = \"1s\"\n", ":3: presets.brief: unknown preset")
        try check("[[route]]\nprefix = \"/a/\"\nmethods = []\n", ":3: route.methods: expected a list")
    }
}
