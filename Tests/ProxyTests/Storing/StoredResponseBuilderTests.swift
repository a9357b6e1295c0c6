import HTTPHeaders
import Routing
import TestSupport
import XCTest
import CacheSemantics
import CacheStorage
import HTTP1
@testable import Proxy

/// What is stored of a response: the decision, its lifetime, the head a
/// hit sends, the fields that select it, its tags, a 304's refresh.
final class StoredResponseBuilderTests: XCTestCase {
    private let timing = ResponseTiming(requestTime: 1_000, responseTime: 1_000, dateValue: 1_000, ageValue: 0)

    private func request(_ lines: String = "") throws -> RequestHead {
        var parser = RequestParser()
        let text = "GET /r HTTP/1.1\r\nHost: example\r\n" + lines + "\r\n"
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
            throw TestFailure("the request did not parse: \(text)")
        }
        return head
    }

    private func decide(_ builder: StoredResponseBuilder, _ headers: HeaderFields, status: Int = 200,
                        request lines: String = "") throws -> StoreDecision {
        builder.decide(request: try request(lines), status: status, headers: headers, timing: timing)
    }

    func testTheStorageDecision() throws {
        let shared = StoredResponseBuilder(shared: true, targetedField: "larder-cache-control")
        XCTAssertEqual(try decide(shared, ["cache-control": "max-age=60"]), .store)
        XCTAssertNotEqual(try decide(shared, ["cache-control": "max-age=60, private"]), .store, "private, in a shared cache")
        XCTAssertEqual(try decide(StoredResponseBuilder(shared: false, targetedField: "x"), ["cache-control": "max-age=60, private"]),
                       .store, "a private cache keeps it")
        XCTAssertEqual(try decide(shared, ["cache-control": "max-age=60", "vary": "*"]), .doNotStore("Vary: *"))
        XCTAssertNotEqual(try decide(shared, ["cache-control": "no-store"]), .store)
        XCTAssertNotEqual(try decide(shared, ["cache-control": "max-age=60"], request: "Authorization: Basic eDp5\r\n"), .store,
                          "authorized requests are not shared without public or s-maxage")
        var noCookies = shared
        noCookies.storeSetCookie = false
        XCTAssertEqual(try decide(noCookies, ["cache-control": "max-age=60", "set-cookie": "a=1"]), .doNotStore("Set-Cookie"))
    }

    func testTargetedFieldsArePassedOnUnlessStripped() {
        let passing = StoredResponseBuilder(shared: true, targetedField: "Larder-Cache-Control")
        XCTAssertFalse(passing.isHidden("larder-cache-control"))
        XCTAssertFalse(passing.isHidden("cdn-cache-control"))
        let passed = passing.storedHead(key: "/r", status: 200, reason: nil, headers: ["cdn-cache-control": "max-age=50"],
                                        timing: timing, tags: [], varyFrom: { _ in nil })
        XCTAssertTrue(String(decoding: passed.headPrefix, as: UTF8.self).lowercased().contains("cdn-cache-control: max-age=50"))
    }

    func testTargetedFieldsWinAndAreNotSentWhenStripped() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "Larder-Cache-Control", stripTargetedFields: true)
        let headers: HeaderFields = ["cache-control": "max-age=5", "cdn-cache-control": "max-age=50",
                                   "larder-cache-control": "max-age=500", "x-a": "1"]
        XCTAssertEqual(builder.lifetime(status: 200, headers: headers, timing: timing, key: "/r"), 500, "the most specific field")
        XCTAssertEqual(builder.lifetime(status: 200, headers: HeaderFields(headers.dropLast(2)), timing: timing, key: "/r"), 50)
        XCTAssertTrue(builder.isHidden("larder-cache-control"))
        XCTAssertTrue(builder.isHidden("cdn-cache-control"))
        let head = builder.storedHead(key: "/r", status: 200, reason: nil, headers: headers, timing: timing, tags: [],
                                      varyFrom: { _ in nil })
        let text = String(decoding: head.headPrefix, as: UTF8.self).lowercased()
        XCTAssertFalse(text.contains("larder-cache-control"), text)
        XCTAssertTrue(text.contains("x-a: 1"), text)
        XCTAssertEqual(head.lifetime, 500)
    }

    func testTheHeadPrefixLeavesOutPerRequestFieldsAndKeepsTheOriginsDate() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        let head = builder.storedHead(key: "/r", status: 200, reason: "Fine",
                                      headers: ["date": "Sun, 06 Nov 1994 08:49:37 GMT", "age": "3", "connection": "close",
                                                "content-length": "5", "cache-control": "max-age=60"],
                                      timing: timing, tags: [], varyFrom: { _ in nil })
        let text = String(decoding: head.headPrefix, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 200 Fine\r\n"), text)
        XCTAssertTrue(text.contains("Sun, 06 Nov 1994 08:49:37 GMT"))
        for name in ["Age:", "Connection:", "Content-Length:"] { XCTAssertFalse(text.contains(name), "\(name) is written per hit") }
        let undated = builder.storedHead(key: "/r", status: 200, reason: nil, headers: ["cache-control": "max-age=60"],
                                         timing: timing, tags: [], varyFrom: { _ in nil })
        XCTAssertTrue(String(decoding: undated.headPrefix, as: UTF8.self).contains(HTTPDate.formatString(1_000)),
                      "no Date from the origin: the time it was received")
    }

    func testFieldsNamedByNoCacheOrPrivateAreNotStored() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        let head = builder.storedHead(key: "/r", status: 200, reason: nil,
                                      headers: ["cache-control": "max-age=60, no-cache=\"x-secret\", private=\"x-user\"",
                                                "x-secret": "s", "x-user": "u", "x-kept": "k"],
                                      timing: timing, tags: [], varyFrom: { _ in nil })
        let text = String(decoding: head.headPrefix, as: UTF8.self).lowercased()
        XCTAssertFalse(text.contains("\r\nx-secret:"), text)
        XCTAssertFalse(text.contains("\r\nx-user:"), text)
        XCTAssertTrue(text.contains("\r\nx-kept: k"), text)
    }

    func testVaryAndRouteKeyHeadersSelectTheVariant() {
        var route = Route(prefix: "/r")
        route.keyHeaders = ["x-tenant"]
        let builder = StoredResponseBuilder(shared: true, targetedField: "x", routes: RouteTable([route]))
        let headers: HeaderFields = ["cache-control": "max-age=60", "vary": "Accept-Encoding"]
        XCTAssertEqual(builder.variantFields(headers, key: "/r"), ["accept-encoding", "x-tenant"])
        let head = builder.storedHead(key: "/r", status: 200, reason: nil, headers: headers, timing: timing, tags: [],
                                      varyFrom: { ["accept-encoding": "gzip", "x-tenant": "t1"][$0] })
        XCTAssertEqual(head.varyNames, ["accept-encoding", "x-tenant"])
        XCTAssertEqual(head.varyValues, ["gzip", "t1"])
    }

    func testTagsFromSurrogateKeyCacheTagAndTheRoute() {
        var route = Route(prefix: "/r")
        route.tags = ["route-tag"]
        let builder = StoredResponseBuilder(shared: true, targetedField: "x", routes: RouteTable([route]))
        let tags = builder.tags(["surrogate-key": "a b", "cache-tag": "c,d"], key: "/r/1")
        XCTAssertEqual(Set(tags), ["a", "b", "c", "d", "route-tag"])
        XCTAssertEqual(builder.tags(["x": "1"], key: "/elsewhere"), [])
    }

    func testAGroupIsATagAndItsOriginsTag() {
        var api = Route(prefix: "/api/")
        api.upstream = "api"
        api.hosts = ["a.test"]
        var hosted = Route(prefix: "/")
        hosted.hosts = ["a.test"]
        let builder = StoredResponseBuilder(shared: true, targetedField: "x", routes: RouteTable([api, hosted]))
        let groups: HeaderFields = ["cache-groups": #""news", "x""#]
        XCTAssertEqual(builder.groupOrigin("/api/1 a.test"), "api a.test")
        XCTAssertEqual(builder.groupOrigin("/page a.test"), "default a.test")
        XCTAssertEqual(Set(builder.tags(groups, key: "/api/1 a.test")),
                       ["news", "x", PurgeTags.group("news", origin: "api a.test"), PurgeTags.group("x", origin: "api a.test")])
        XCTAssertEqual(Set(builder.tags(groups, key: "/page b.test")),
                       ["news", "x", PurgeTags.group("news", origin: "default b.test"), PurgeTags.group("x", origin: "default b.test")])
        XCTAssertNotEqual(PurgeTags.group("news", origin: "api"), PurgeTags.group("news", origin: "default"))
        XCTAssertEqual(builder.tags(["cache-groups": "not-a-string"], key: "/api/1 a.test"), [])
        // Without virtual hosts the upstream alone.
        api.hosts = []
        let plain = StoredResponseBuilder(shared: true, targetedField: "x", routes: RouteTable([api]))
        XCTAssertEqual(plain.groupOrigin("/api/1"), "api")
        XCTAssertEqual(plain.groupOrigin("/other"), "default")
    }

    func testA304RefreshMergesFieldsAndKeepsTheBody() {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        let body = Array("hello".utf8)
        let stored = body.withUnsafeBytes {
            builder.build(key: "/r", status: 200, reason: nil,
                          headers: ["cache-control": "max-age=10", "etag": "\"1\"", "x-a": "old", "content-type": "text/plain"],
                          body: $0, timing: timing, tags: ["t"], varyFrom: { _ in nil })
        }
        let later = ResponseTiming(requestTime: 2_000, responseTime: 2_000, dateValue: 2_000, ageValue: 0)
        let refreshed = builder.refresh(stored, with: ["cache-control": "max-age=600", "x-a": "new"], timing: later)
        XCTAssertEqual(refreshed.lifetime, 600)
        XCTAssertEqual(refreshed.header("x-a"), "new")
        XCTAssertEqual(refreshed.header("content-type"), "text/plain", "fields the 304 does not name stay")
        XCTAssertEqual(refreshed.etag, "\"1\"")
        XCTAssertEqual(Array(refreshed.body), body)
        XCTAssertEqual(refreshed.tags, ["t"])
        XCTAssertEqual(refreshed.timing.responseTime, 2_000)
    }
}
