import XCTest
import CacheStorage
@testable import Routing

/// Routes that name hosts: host names as keys carry them, which route a
/// host's request falls under, and what a purge of a URL removes.
final class VirtualHostsTests: XCTestCase {
    private func route(_ prefix: String, hosts: [String] = [], _ change: (inout Route) -> Void = { _ in }) -> Route {
        var route = Route(prefix: prefix)
        route.hosts = hosts
        change(&route)
        return route
    }

    func testHostNamesAreNormalizedAndMalformedOnesAreNone() {
        XCTAssertEqual(VirtualHosts.name("API.Example.com:8080"), "api.example.com")
        XCTAssertEqual(VirtualHosts.name("example.com."), "example.com")
        XCTAssertEqual(VirtualHosts.name("[::1]:80"), "[::1]")
        XCTAssertEqual(VirtualHosts.name("127.0.0.1"), "127.0.0.1")
        for bad in [nil, "", "a b", "a/b", "x:port", "[::1", "[::g]", "é.test", String(repeating: "a", count: 300)] {
            XCTAssertEqual(VirtualHosts.name(bad), "", "\(String(describing: bad))")
        }
    }

    func testPatternsAreCheckedAndLowercased() {
        XCTAssertEqual(VirtualHosts.pattern("API.test"), "api.test")
        XCTAssertEqual(VirtualHosts.pattern("*.Example.org"), "*.example.org")
        for bad in ["", "*", "*.", "a.test:80", "a b", "a*.test", ".test", "http://a.test"] {
            XCTAssertNil(VirtualHosts.pattern(bad), bad)
        }
    }

    func testKeysCarryTheHostOnlyWhereRoutesNameHosts() {
        let plain = RouteTable([route("/")])
        XCTAssertFalse(plain.keysHost)
        XCTAssertEqual(plain.cacheKey("/a?b", host: "x.test"), "/a?b")
        XCTAssertEqual(plain.cacheKey("/a?b x.test"), "/a?b", "a purge's host is dropped")
        let table = RouteTable([route("/", hosts: ["a.test"]) { $0.sortQuery = true }, route("/")])
        XCTAssertTrue(table.keysHost)
        XCTAssertEqual(table.cacheKey("/a?y=1&x=2", host: "A.test:80"), "/a?x=2&y=1 a.test", "a.test's route sorts")
        XCTAssertEqual(table.cacheKey("/a?y=1&x=2", host: "b.test"), "/a?y=1&x=2 b.test")
        XCTAssertEqual(table.cacheKey("/a", host: nil), "/a ", "no host: a key of its own")
        XCTAssertEqual(table.cacheKey("/a?y=1&x=2 a.test"), "/a?x=2&y=1 a.test", "a key gives the same key")
    }

    func testAHostsRoutesComeBeforeRoutesForEveryHost() {
        let table = RouteTable([route("/static/"), route("/", hosts: ["api.test", "*.api.test"]),
                                route("/v2/", hosts: ["api.test"])])
        XCTAssertEqual(table.match("/static/x api.test")?.hosts, ["api.test", "*.api.test"], "the virtual host's / wins")
        XCTAssertEqual(table.match("/v2/x api.test")?.prefix, "/v2/")
        XCTAssertEqual(table.match("/v2/x eu.api.test")?.prefix, "/", "*.api.test: a name under it")
        XCTAssertEqual(table.match("/static/x other.test")?.prefix, "/static/")
        XCTAssertNil(table.match("/v2/x other.test"))
        XCTAssertNil(table.match("/x xapi.test"), "*.api.test does not match xapi.test")
        XCTAssertNil(table.match("/x "), "no host: no virtual host's route")
    }

    func testAPurgeWithoutHostNamesThePathOnEveryHost() {
        let table = RouteTable([route("/s", hosts: ["a.test"]) { $0.ignoreQuery = true }])
        // (With the URL's cached QUERY answers, by their tag or their keys' prefix.)
        func queries(_ keys: String...) -> [PurgeScope] { keys.compactMap { PostQuery.tag(urlKey: $0).map(PurgeScope.tag) } }
        XCTAssertEqual(table.purgeScopes("/s?q=1 A.test:8080"),
                       [.key("/s?q=1 a.test"), .key("/s a.test")] + queries("/s?q=1 a.test", "/s a.test"))
        XCTAssertEqual(table.purgeScopes("/s?q=1"),
                       [.key("/s?q=1"), .prefix("/s?q=1 "), .prefix("/s "), .prefix("/s?q=1\n"), .prefix("/s\n")])
        XCTAssertEqual(RouteTable().purgeScopes("/s x.test"), [.key("/s")] + queries("/s"))
        for scope in table.purgeScopes("/s") {
            XCTAssertFalse(scope.matches(key: "/sx a.test", tags: []), "\(scope)")
        }
    }
}
