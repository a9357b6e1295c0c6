import XCTest
import CacheStorage
@testable import Routing

/// Cached POSTs' keys, tags and body holding, without sockets.
final class PostQueryTests: XCTestCase {
    private let caching = PostCaching(maxBody: 20, normalizeJSON: true, uncachedMethods: ["send"])

    func testTheDigestGoesBeforeAnyHostAndComesOutAgain() {
        XCTAssertEqual(PostQuery.key(urlKey: "/gql?a=1", digest: "d1", keysHost: false), "/gql?a=1\nd1")
        XCTAssertEqual(PostQuery.key(urlKey: "/gql a.test", digest: "d1", keysHost: true), "/gql\nd1 a.test")
        XCTAssertEqual(PostQuery.urlKey(of: "/gql?a=1\nd1"), "/gql?a=1")
        XCTAssertEqual(PostQuery.urlKey(of: "/gql\nd1 a.test"), "/gql a.test")
        XCTAssertEqual(PostQuery.urlKey(of: "/plain"), "/plain")
        // Routes match a query's key by its path, and with hosts by its host.
        var route = Route(prefix: "/gql")
        route.hosts = ["a.test"]
        XCTAssertEqual(RouteTable([route]).match("/gql\nd1 a.test")?.prefix, "/gql")
        XCTAssertEqual(RouteTable([Route(prefix: "/gql")]).match("/gql\nd1")?.prefix, "/gql")
    }

    func testEveryQueryOfAURLHasOneTagThatAPurgeOfTheURLNames() throws {
        let tag = try XCTUnwrap(PostQuery.tag(urlKey: "/gql"))
        XCTAssertTrue(tag.hasPrefix("larder-post:"))
        XCTAssertEqual(tag.utf8.count, "larder-post:".utf8.count + 32)
        XCTAssertNotEqual(tag, PostQuery.tag(urlKey: "/gql2"))
        var route = Route(prefix: "/gql")
        route.cachePost = true
        XCTAssertEqual(RouteTable([route]).purgeScopes("/gql"), [.key("/gql"), .tag(tag)])
        XCTAssertEqual(RouteTable([Route(prefix: "/gql")]).purgeScopes("/gql"), [.key("/gql"), .tag(tag)],
                       "no route caches POSTs, but QUERY requests are cached under any route")
        XCTAssertEqual(RouteTable().purgeScopes("/gql"), [.key("/gql"), .tag(tag)], "and without routes")
        route.hosts = ["a.test"]
        XCTAssertTrue(RouteTable([route]).purgeScopes("/gql").contains(.prefix("/gql\n")), "every host's queries of the path")
    }

    func testABodyIsHeldUpToItsLimitThenHandedBack() {
        var query = PostQuery(caching: caching)
        XCTAssertNil([UInt8]("{\"query\":".utf8).withUnsafeBytes { query.add($0) })
        XCTAssertNil([UInt8]("\"{a}\"}".utf8).withUnsafeBytes { query.add($0) })
        guard case .query(let digest, let normalized) = query.verdict() else { return XCTFail("\(query.verdict())") }
        XCTAssertTrue(normalized)
        XCTAssertEqual(digest.utf8.count, 64)
        var spaced = PostQuery(caching: caching)
        _ = [UInt8]("{ \"query\" : \"{a}\" }".utf8).withUnsafeBytes { spaced.add($0) }
        XCTAssertEqual(spaced.verdict(), .query(digest: digest, normalized: true), "the same JSON: the same digest")
        let over = [UInt8]("123456".utf8).withUnsafeBytes { query.add($0) }
        XCTAssertEqual(over, Array("{\"query\":\"{a}\"}".utf8), "over the limit: what was held comes back")
        XCTAssertEqual(query.verdict(), .notCached("body over max_post_body"))
        var write = PostQuery(caching: PostCaching(maxBody: 100, normalizeJSON: false, uncachedMethods: ["send"]))
        _ = [UInt8](#"{"method":"send"}"#.utf8).withUnsafeBytes { write.add($0) }
        XCTAssertEqual(write.verdict(), .notCached("JSON-RPC method send"))
    }

    private func digest(_ caching: PostCaching, _ body: String) -> PostQuery.Verdict {
        var query = PostQuery(caching: caching)
        _ = [UInt8](body.utf8).withUnsafeBytes { query.add($0) }
        return query.verdict()
    }

    func testAQueryMethodIsKeyedByItsBodyAndMediaTypeAndNeverRefused() throws {
        let json = PostCaching.queryMethod(contentType: "application/json", maxBody: 100)
        XCTAssertTrue(json.normalizeJSON)
        guard case .query(let d1, true) = digest(json, #"{"b":1,"a":[1,2]}"#) else { return XCTFail() }
        XCTAssertEqual(digest(json, #" { "a" : [1, 2], "b" : 1 } "#), .query(digest: d1, normalized: true))
        XCTAssertEqual(digest(.queryMethod(contentType: "Application/JSON ; Charset=UTF-8", maxBody: 100), #"{"a":[1,2],"b":1}"#),
                       digest(.queryMethod(contentType: "application/json;charset=utf-8", maxBody: 100), #"{"b":1,"a":[1,2]}"#),
                       "the type's case and spacing do not count")
        XCTAssertNotEqual(digest(.queryMethod(contentType: "application/json; charset=utf-8", maxBody: 100), #"{"a":[1,2],"b":1}"#),
                          .query(digest: d1, normalized: true), "a parameter does")
        // A POST of the same body under cache_post is another key.
        XCTAssertNotEqual(digest(PostCaching(maxBody: 100, normalizeJSON: true, uncachedMethods: []), #"{"query":"{a}"}"#),
                          digest(json, #"{"query":"{a}"}"#))
        // Not JSON, JSON that does not parse, or JSON a POST would refuse: keyed by the bytes.
        let text = PostCaching.queryMethod(contentType: "text/plain", maxBody: 100)
        XCTAssertFalse(text.normalizeJSON)
        guard case .query(_, false) = digest(text, #"{"a":1}"#) else { return XCTFail() }
        XCTAssertNotEqual(digest(text, #"{"a":1}"#), digest(text, #"{ "a":1}"#))
        XCTAssertNotEqual(digest(text, "x"), digest(.queryMethod(contentType: nil, maxBody: 100), "x"), "the media type counts")
        guard case .query(_, false) = digest(json, "{not json") else { return XCTFail() }
        guard case .query(_, true) = digest(json, #"{"query":"mutation { a }"}"#) else { return XCTFail("a QUERY is safe") }
        guard case .query(_, true) = digest(.queryMethod(contentType: "application/problem+json", maxBody: 100), "{}") else {
            return XCTFail("a +json type is JSON")
        }
        XCTAssertEqual(digest(.queryMethod(contentType: nil, maxBody: 3), "abcd"), .notCached("body over max_post_body"))
        // Its route's max_post_body bounds it; 64 KiB without one.
        var route = Route(prefix: "/q")
        route.maxPostBody = 10
        XCTAssertEqual(RouteTable([route]).queryCaching("/q/a", contentType: nil).maxBody, 10)
        XCTAssertEqual(RouteTable([route]).queryCaching("/other", contentType: nil).maxBody, 64 << 10)
    }
}
