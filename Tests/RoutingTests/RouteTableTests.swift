import XCTest
@testable import Routing

/// Which `[[route]]` a request falls under, and the keys routes make.
final class RouteTableTests: XCTestCase {
    private func route(_ prefix: String, _ change: (inout Route) -> Void = { _ in }) -> Route {
        var route = Route(prefix: prefix)
        change(&route)
        return route
    }

    func testTheLongestMatchingPrefixWinsWhateverTheOrderGiven() {
        let table = RouteTable([route("/"), route("/api/") { $0.defaultTTL = 5 }, route("/api/v2/") { $0.defaultTTL = 9 }])
        XCTAssertEqual(table.match("/api/v2/users?id=1")?.prefix, "/api/v2/")
        XCTAssertEqual(table.match("/api/v1/users")?.prefix, "/api/")
        XCTAssertEqual(table.match("/static/a.css")?.prefix, "/")
        XCTAssertNil(RouteTable([route("/api/")]).match("/apix"), "a prefix is not a substring match")
        XCTAssertNil(RouteTable().match("/anything"))
    }

    func testTheQueryIsNotPartOfTheMatch() {
        let table = RouteTable([route("/a/b")])
        XCTAssertNil(table.match("/a?x=/a/b"))
        XCTAssertEqual(table.match("/a/b?q=1")?.prefix, "/a/b")
    }

    func testMethodsAndGlobsNarrowARoute() {
        let table = RouteTable([route("/img/") { $0.glob = "/img/*.png" }, route("/") { $0.methods = ["POST"] }])
        XCTAssertEqual(table.match("/img/logo.png")?.prefix, "/img/")
        XCTAssertNil(table.match("/img/logo.jpg"), "the glob rules it out; / is for POST only")
        XCTAssertEqual(table.match("/img/logo.jpg", method: "POST")?.prefix, "/")
    }

    func testCacheKeysIgnoreSortOrDropQueryParameters() {
        let table = RouteTable([
            route("/search") { $0.sortQuery = true; $0.ignoredQueryParameters = ["utm_source"] },
            route("/static/") { $0.ignoreQuery = true },
        ])
        XCTAssertEqual(table.cacheKey("/search?b=2&utm_source=x&a=1"), "/search?a=1&b=2")
        XCTAssertEqual(table.cacheKey("/search?utm_source=x"), "/search")
        XCTAssertEqual(table.cacheKey("/static/app.js?v=3"), "/static/app.js")
        XCTAssertEqual(table.cacheKey("/other?b=2&a=1"), "/other?b=2&a=1", "no route: the target as sent")
        // Nothing an origin may read as a parameter is left out of the key.
        XCTAssertEqual(table.cacheKey("/search?x=1&utm_source=a;x=evil"), "/search?utm_source=a;x=evil&x=1",
                       "an ignored name holding a ';' stays whole")
        XCTAssertEqual(table.cacheKey("/search?x=2&x=1"), "/search?x=2&x=1", "a repeated name keeps its values' order")
        XCTAssertNotEqual(table.cacheKey("/search?x=2&x=1"), table.cacheKey("/search?x=1&x=2"))
    }

    func testTierLifetimesPerRoute() {
        let table = RouteTable([
            route("/m/") { $0.memoryTTL = .some(60); $0.diskTTL = .some(3600) },
            route("/mirror/") { $0.memoryTTL = .some(30); $0.diskMirrorsMemory = true },
            route("/never/") { $0.memoryTTL = .some(nil) },
        ])
        XCTAssertEqual(table.memoryLifetime("/m/x"), .some(60))
        XCTAssertEqual(table.diskLifetime("/m/x"), .some(3600))
        XCTAssertEqual(table.diskLifetime("/mirror/x"), .some(30), "disk_ttl = mirror follows memory_ttl")
        XCTAssertEqual(table.memoryLifetime("/never/x"), .some(nil), "a route may say: no limit")
        XCTAssertEqual(table.memoryLifetime("/elsewhere"), nil, "no route: the global setting")
    }
}
