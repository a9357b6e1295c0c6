import Routing
import Telemetry
import XCTest
import CacheSemantics
import CacheStorage
@testable import Admin

final class AdminAPITests: XCTestCase {
    private var store: TieredStore!
    private var now: Int64 = 1_000_000

    override func setUp() {
        store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)])
    }

    private func api(token: String? = nil, readToken: String? = nil, healthzPublic: Bool = true,
                     routes: RouteTable = RouteTable()) -> AdminAPI {
        AdminAPI(store: store, stats: ProxyStats(), token: token, startedAt: 999_000, clock: { [unowned self] in now },
                 purgeScopes: { routes.purgeScopes($0) }, readToken: readToken, healthzPublic: healthzPublic, log: { _ in })
    }

    private func put(_ key: String, tags: [String] = [], at time: Int64 = 1_000_000) {
        let entry = CachedResponse.make(key: key, status: 200, headPrefix: [], body: Array("x".utf8), otherFields: [],
                                   timing: ResponseTiming(requestTime: time, responseTime: time, dateValue: nil, ageValue: 0),
                                   lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: [], varyValues: [],
                                   tags: tags)
        XCTAssertTrue(store.insert(entry, fetchedSince: store.fetchToken))
    }

    /// Each worker writes only its own counters; /stats sums them.
    func testStatsSumEveryWorkersCounters() throws {
        let stats = ProxyStats()
        let workers = (0..<4).map { _ in stats.makeWorkerStats() }
        DispatchQueue.concurrentPerform(iterations: workers.count) { i in
            for _ in 0..<(1000 * (i + 1)) { WorkerStats.bump(workers[i].hits) }
            WorkerStats.bump(workers[i].misses)
        }
        XCTAssertEqual(stats.total(.hits), 10_000)
        let admin = AdminAPI(store: store, stats: stats, token: nil, startedAt: 999_000, clock: { [unowned self] in now },
                             purgeScopes: { [.key($0)] }, log: { _ in })
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(admin.handle(method: "GET", target: "/stats",
                                                                                          authorization: nil).body.utf8)) as? [String: Any])
        XCTAssertEqual(json["hits"] as? Int, 10_000)
        XCTAssertEqual(json["misses"] as? Int, 4)
    }

    /// POST /debug/clock exists only where the daemon set `moveClock`
    /// (LARDER_TEST_CLOCK=1), needs the full token, and takes seconds.
    func testTheTestClockEndpointOnlyWhereEnabled() {
        let off = api(token: "s3cret-token")
        XCTAssertEqual(off.handle(method: "POST", target: "/debug/clock?advance=5", authorization: "Bearer s3cret-token").status, 404)
        let admin = api(token: "s3cret-token", readToken: "reader-token")
        var moved: [Int64] = []
        admin.moveClock = { moved.append($0) }
        XCTAssertEqual(admin.handle(method: "POST", target: "/debug/clock?advance=5", authorization: "Bearer reader-token").status, 401)
        XCTAssertEqual(admin.handle(method: "GET", target: "/debug/clock?advance=5", authorization: "Bearer s3cret-token").status, 405)
        for bad in ["", "?advance=", "?advance=-1", "?advance=soon", "?advance=1e12", "?advance=nan"] {
            XCTAssertEqual(admin.handle(method: "POST", target: "/debug/clock" + bad, authorization: "Bearer s3cret-token").status, 400, bad)
        }
        let r = admin.handle(method: "POST", target: "/debug/clock?advance=2.5", authorization: "Bearer s3cret-token")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, "{\"advanced_ms\": 2500}\n")
        XCTAssertEqual(moved, [2500], "moved once, by the milliseconds asked")
    }

    func testEveryRequestNeedsTheTokenWhenOneIsSet() {
        let admin = api(token: "s3cret-token", healthzPublic: false)
        for (method, target) in [("GET", "/healthz"), ("GET", "/stats"), ("POST", "/purge?all=true"), ("PURGE", "/x")] {
            let r = admin.handle(method: method, target: target, authorization: nil)
            XCTAssertEqual(r.status, 401, target)
            XCTAssertEqual(r.extraHeaders["www-authenticate"], "Bearer realm=\"larder\"")
        }
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: "Bearer wrong").status, 401)
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: "Bearer s3cret-token-and-more").status, 401)
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: "Basic s3cret-token").status, 401)
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: "Bearer s3cret-token").body, "ok\n")
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: "bearer s3cret-token").status, 200)
    }

    func testHealthzIsOpenAndTheReadTokenOnlyReads() {
        let admin = api(token: "admin-token-1", readToken: "read-token-1")
        XCTAssertEqual(admin.handle(method: "GET", target: "/healthz", authorization: nil).status, 200, "health checks need no token")
        for target in ["/stats", "/metrics", "/top", "/history", "/errors", "/status.js"] {
            XCTAssertEqual(admin.handle(method: "GET", target: target, authorization: "Bearer read-token-1").status, 200, target)
            XCTAssertEqual(admin.handle(method: "GET", target: target, authorization: nil).status, 401, target)
        }
        XCTAssertEqual(admin.handle(method: "GET", target: "/", authorization: "Bearer read-token-1").status, 200, "the status page")
        for (method, target) in [("POST", "/purge?all=true"), ("PURGE", "/x"), ("POST", "/memory/clear"), ("POST", "/prune?older-than=1s")] {
            XCTAssertEqual(admin.handle(method: method, target: target, authorization: "Bearer read-token-1").status, 401, target)
            XCTAssertNotEqual(admin.handle(method: method, target: target, authorization: "Bearer admin-token-1").status, 401, target)
        }
        // Without an admin token a read token guards nothing (everything is open, as without tokens).
        let open = api(token: nil, readToken: "read-token-1")
        XCTAssertEqual(open.handle(method: "GET", target: "/stats", authorization: nil).status, 200)
    }

    func testConstantTimeComparison() {
        XCTAssertTrue(AdminAPI.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        XCTAssertFalse(AdminAPI.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        XCTAssertFalse(AdminAPI.constantTimeEqual(Array("abc".utf8), Array("ab".utf8)))
        XCTAssertFalse(AdminAPI.constantTimeEqual([], Array("a".utf8)))
        // Lengths differing by a multiple of 256 must not look equal.
        XCTAssertFalse(AdminAPI.constantTimeEqual([], [UInt8](repeating: 0, count: 256)))
    }

    func testPurgeKinds() {
        let admin = api()
        put("/a/1", tags: ["red"])
        put("/a/2")
        put("/b/1", tags: ["red"])
        put("/c?x=1")
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?tag=red", authorization: nil).body, "{\"purged\": 2}\n")
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?prefix=/b/../a/", authorization: nil).body, "{\"purged\": 1}\n")
        // url= takes a percent-encoded path with its query, or a full URL.
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?url=http%3A%2F%2Fexample.com%2Fc%3Fx%3D1", authorization: nil).body,
                       "{\"purged\": 1}\n")
        put("/d")
        XCTAssertEqual(admin.handle(method: "PURGE", target: "/d", authorization: nil).body, "{\"purged\": 1}\n")
        put("/e")
        put("/f")
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?all=true", authorization: nil).body, "{\"purged\": 2}\n")
        XCTAssertEqual(store.first.stats.objects, 0)
    }

    func testPurgeUsesTheRoutesCacheKey() {
        // A route that ignores the query stores /p?utm=1 as /p.
        var route = Route(prefix: "/p")
        route.ignoreQuery = true
        let admin = api(routes: RouteTable([route]))
        put("/p")
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?url=%2Fp%3Futm%3D1", authorization: nil).body, "{\"purged\": 1}\n")
    }

    func testPurgeWithVirtualHosts() {
        // Keys carry the host: a URL with a host purges that host's, a path every host's.
        var route = Route(prefix: "/")
        route.hosts = ["a.test", "*.b.test"]
        let admin = api(routes: RouteTable([route]))
        for key in ["/v a.test", "/v x.b.test", "/v ", "/vw a.test"] { put(key) }
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?url=http%3A%2F%2FA.test%3A8080%2Fv", authorization: nil).body,
                       "{\"purged\": 1}\n")
        XCTAssertTrue(store.lookup("/v a.test").isEmpty)
        XCTAssertFalse(store.lookup("/v x.b.test").isEmpty)
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?url=%2Fv", authorization: nil).body, "{\"purged\": 2}\n")
        XCTAssertTrue(store.lookup("/v x.b.test").isEmpty)
        XCTAssertFalse(store.lookup("/vw a.test").isEmpty, "another path that starts the same stays")
    }

    func testSoftPurgeMarksStale() {
        let admin = api()
        put("/s", tags: ["t"])
        XCTAssertEqual(admin.handle(method: "POST", target: "/purge?tag=t&soft=true", authorization: nil).body, "{\"purged\": 1}\n")
        XCTAssertEqual(store.lookup("/s").first?.lifetime, 0)
    }

    func testBadRequestsGetClearErrors() {
        let admin = api()
        let cases: [(String, String, Int)] = [
            ("POST", "/purge", 400),
            ("POST", "/purge?url=/a&tag=b", 400),
            ("POST", "/purge?url=ftp://x/a", 400),
            ("POST", "/purge?prefix=a", 400),
            ("POST", "/purge?tag=", 400),
            ("POST", "/purge?all=yes", 400),
            ("POST", "/purge?all=true&soft=maybe", 400),
            ("POST", "/prune", 400),
            ("POST", "/prune?older-than=soon", 400),
            ("GET", "/purge?all=true", 405),
            ("POST", "/stats", 405),
            ("GET", "/nothing", 404),
            ("PURGE", "*", 400),
        ]
        for (method, target, status) in cases {
            let r = admin.handle(method: method, target: target, authorization: nil)
            XCTAssertEqual(r.status, status, "\(method) \(target)")
            XCTAssertTrue(r.body.hasPrefix("{\"error\": "), r.body)
        }
    }

    func testPruneAndMemoryClear() {
        let admin = api()
        put("/old", at: now - 7200)
        put("/new", at: now - 10)
        XCTAssertEqual(admin.handle(method: "POST", target: "/prune?older-than=1h", authorization: nil).body, "{\"pruned\": 1}\n")
        XCTAssertEqual(admin.handle(method: "POST", target: "/memory/clear", authorization: nil).body, "{\"dropped\": 1}\n")
    }

    func testStatsAndMetrics() throws {
        let admin = api()
        put("/x")
        let stats = admin.handle(method: "GET", target: "/stats", authorization: nil)
        XCTAssertEqual(stats.contentType, "application/json")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stats.body.utf8)) as? [String: Any])
        XCTAssertEqual(json["uptime_seconds"] as? Int, 1000)
        XCTAssertEqual((json["memory"] as? [String: Any])?["objects"] as? Int, 1)
        XCTAssertEqual((json["memory"] as? [String: Any])?["limit_bytes"] as? Int, 1 << 20)
        XCTAssertTrue(json["disk"] is NSNull)
        for key in ["hits", "misses", "stale_hits", "revalidations", "collapsed", "upstream_errors"] {
            XCTAssertEqual(json[key] as? Int, 0, key)
        }

        _ = admin.handle(method: "POST", target: "/purge?all=true", authorization: nil)
        let metrics = admin.handle(method: "GET", target: "/metrics", authorization: nil)
        XCTAssertTrue(metrics.contentType.hasPrefix("text/plain; version=0.0.4"))
        XCTAssertTrue(metrics.body.contains("# TYPE larder_hits_total counter"))
        XCTAssertTrue(metrics.body.contains("larder_purged_objects_total 1"))
        XCTAssertTrue(metrics.body.contains("larder_memory_limit_bytes 1048576"))
    }

    func testTargetFromPathOrURL() {
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "/a?b"), "/a?b")
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "https://h:8/a/b?c=1"), "/a/b?c=1 h:8")
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "http://h"), "/ h")
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "http://h?q"), "/?q h")
        XCTAssertNil(AdminAPI.target(fromPathOrURL: "a/b"))
        // Dot segments go as they go from a request's target: the URL names what a client is served.
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "/a/b/../c?d/../e"), "/a/c?d/../e")
        XCTAssertEqual(AdminAPI.target(fromPathOrURL: "http://h/x/%2e%2e/y?q"), "/y?q h")
        XCTAssertNil(AdminAPI.target(fromPathOrURL: "http://"))
        XCTAssertEqual(AdminAPI.durationSeconds("90s"), 90)
        XCTAssertEqual(AdminAPI.durationSeconds("2h"), 7200)
        XCTAssertEqual(AdminAPI.durationSeconds("7d"), 604_800)
        XCTAssertEqual(AdminAPI.durationSeconds("15"), 15)
        XCTAssertNil(AdminAPI.durationSeconds("h"))
        XCTAssertNil(AdminAPI.durationSeconds("-5m"))
        XCTAssertEqual(AdminAPI.percentDecode("%2Fa%3f+b%zz"), "/a?+b%zz")
    }
}
