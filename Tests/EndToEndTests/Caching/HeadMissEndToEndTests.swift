import Foundation
import XCTest

/// A HEAD that finds nothing stored goes upstream as a GET (as nginx's
/// proxy_cache_convert_head and Varnish do): its client gets the head at
/// once, and the response is stored for the requests that follow.
final class HeadMissEndToEndTests: ProxyTestCase {
    private func head(_ target: String, on c: HTTPClient, _ fields: [String] = []) throws -> HTTPResponse {
        try c.send("HEAD \(target) HTTP/1.1\r\nHost: t\r\n" + fields.map { $0 + "\r\n" }.joined() + "\r\n")
        return try c.readResponse(method: "HEAD")
    }

    /// Asks (bounded) with a cache-only policy until `target` is stored.
    private func waitUntilStored(_ target: String) throws -> HTTPResponse? {
        let c = try larder.client()
        for _ in 0..<200 {
            let r = try c.get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            if r.status != 504 { return r }
            usleep(20_000)
        }
        return nil
    }

    func testAHeadMissIsFetchedAsAGetAndStored() throws {
        let target = "/headmiss/a?size=5000"
        let c = try larder.client()
        let answered = try head(target, on: c)
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.header("content-length"), "5000", "the GET's length")
        XCTAssertEqual(answered.header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertTrue(answered.body.isEmpty)
        XCTAssertEqual(try origin.lastRequest(target)["method"] as? String, "GET")
        let stored = try XCTUnwrap(try waitUntilStored(target))
        XCTAssertEqual(stored.status, 200)
        XCTAssertEqual(stored.body.count, 5000)
        // The HEAD's connection still serves: no body bytes were sent on it.
        let hit = try c.get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        XCTAssertEqual(hit.body, stored.body)
        XCTAssertTrue(try head(target, on: c).header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// The client's HEAD is answered when the head arrives, not once the
    /// whole body has: a slow body does not hold it.
    func testTheHeadIsAnsweredBeforeTheBodyArrives() throws {
        let target = "/headmiss/slow?size=200000&trickle=0.3"
        let c = try larder.client()
        let answered = try head(target, on: c)
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.header("content-length"), "200000")
        XCTAssertNil(try origin.lastRequest(target)["done"], "the origin is still sending the body")
        let during = try larder.client().get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
        XCTAssertEqual(during.status, 504, "answered while the body streams")
        let stored = try XCTUnwrap(try waitUntilStored(target))
        XCTAssertEqual(stored.body.count, 200000)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A GET that arrives while a HEAD's GET is still streaming follows
    /// that fetch: one upstream request for both.
    func testAGetArrivingDuringAHeadMissFollowsItsFetch() throws {
        let target = "/headmiss/shared?size=200000&trickle=0.3"
        XCTAssertEqual(try head(target, on: try larder.client()).status, 200)
        XCTAssertNil(try origin.lastRequest(target)["done"], "the origin is still sending the body")
        let get = try larder.client().get(target)
        XCTAssertEqual(get.status, 200)
        XCTAssertEqual(get.body.count, 200000)
        XCTAssertTrue(get.header("cache-status")?.contains("collapsed") ?? false, "\(get.headers)")
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A HEAD that arrives while a GET's fetch streams follows it: the
    /// head at once, no request of its own.
    func testAHeadArrivingDuringAGetFollowsItsFetch() throws {
        let target = "/headmiss/follow?size=200000&trickle=0.3"
        let getter = try larder.client()
        try getter.send("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertTrue(try getter.read(until: "\r\n\r\n") != nil, "the GET's head came")
        let answered = try head(target, on: try larder.client())
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.header("content-length"), "200000")
        XCTAssertTrue(answered.header("cache-status")?.contains("collapsed") ?? false, "\(answered.headers)")
        XCTAssertNil(try origin.lastRequest(target)["done"], "answered while the body still streams")
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A conditional HEAD that misses: Larder evaluates the condition
    /// against the response it fetched (the upstream is asked plainly, so
    /// the response can be stored).
    func testAConditionalHeadMissIsAnsweredNotModifiedAndStored() throws {
        let target = "/headmiss/inm?size=100&etag=h9"
        let answered = try head(target, on: try larder.client(), ["If-None-Match: \"h9\""])
        XCTAssertEqual(answered.status, 304)
        let asked = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertFalse(asked.contains { $0[0] == "if-none-match" }, "asked plainly: \(asked)")
        XCTAssertEqual(try XCTUnwrap(try waitUntilStored(target)).body.count, 100)
    }

    /// A body larger than finish_store_limit is not fetched for a HEAD:
    /// the head says nothing is stored, and nothing is.
    func testAHeadMissLargerThanTheFinishStoreLimitStoresNothing() throws {
        let (origin, larder) = try start(config: "finish_store_limit = \"64KiB\"\n")
        let target = "/headmiss/large?size=200000"
        let answered = try head(target, on: try larder.client())
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.header("cache-status"), "larder; fwd=uri-miss", "not said to be stored")
        let get = try larder.client().get(target)
        XCTAssertEqual(get.header("cache-status"), "larder; fwd=uri-miss; stored", "the GET fetches and stores")
        XCTAssertEqual(get.body.count, 200000)
        XCTAssertEqual(try origin.count(target), 2)
    }

    /// A response that cannot be stored: the HEAD gets the GET's head,
    /// nothing is stored, and the next request goes upstream again.
    func testAHeadMissWhoseResponseCannotBeStoredStoresNothing() throws {
        let target = "/headmiss/nostore?size=100&cc=no-store"
        let c = try larder.client()
        let answered = try head(target, on: c)
        XCTAssertEqual(answered.status, 200)
        XCTAssertEqual(answered.header("cache-status"), "larder; fwd=uri-miss")
        XCTAssertEqual(try c.get(target).body.count, 100, "the connection still serves")
        XCTAssertEqual(try origin.count(target), 2)
    }
}
