import Foundation
import XCTest

/// The QUERY method (RFC 10008) against a real origin speaking it
/// (origin.py's `/echo` answers a QUERY with its body, fresh for a minute,
/// and validates it as a GET): cached as GET is, keyed by the body (its
/// JSON normalized) and its Content-Type, revalidated with its body,
/// invalidated by a write to the URL, purged with the URL; a body over
/// `max_post_body` goes through uncached.
final class QueryMethodTests: ProxyTestCase {
    private func query(_ c: HTTPClient, _ target: String, _ body: String, type: String? = "application/json",
                       headers: [String] = []) throws -> HTTPResponse {
        let fields = (type.map { ["Content-Type: \($0)"] } ?? []) + headers
        try c.send("QUERY \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields.map { $0 + "\r\n" }.joined()
                   + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        return try c.readResponse(method: "QUERY")
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    func testAQueryIsCachedByItsBodyAndContentType() throws {
        let c = try larder.client()
        let target = "/echo?search=1&extra=Accept-Query:application%2Fjson"
        let body = #"{"filter":{"a":1,"b":[2,3]},"limit":10}"#
        let first = try query(c, target, body)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.text, body)
        XCTAssertFalse(isHit(first))
        XCTAssertEqual(first.header("accept-query"), "application/json", "Accept-Query reaches the client")
        let again = try query(c, target, body)
        XCTAssertTrue(isHit(again), again.header("cache-status") ?? "")
        XCTAssertEqual(again.text, body)
        XCTAssertTrue(again.header("cache-status")?.contains("key=\"body-json-sha256:") == true, again.header("cache-status") ?? "")
        let relaid = try query(c, target, #"{ "limit" : 10, "filter" : { "b" : [2, 3], "a" : 1 } }"#, type: "Application/JSON")
        XCTAssertTrue(isHit(relaid), "the same JSON laid out otherwise, the type in other case: one key")
        XCTAssertEqual(relaid.text, body, "the stored answer")
        XCTAssertEqual(try origin.count(target), 1)

        let other = try query(c, target, #"{"filter":{"a":2}}"#)
        XCTAssertFalse(isHit(other))
        XCTAssertEqual(other.text, #"{"filter":{"a":2}}"#, "another body: another answer, never the first's")
        let asText = try query(c, target, body, type: "text/plain")
        XCTAssertFalse(isHit(asText), "the same bytes as another media type: another query")
        XCTAssertFalse(isHit(try query(c, target, body, type: nil)), "and with no Content-Type")
        XCTAssertTrue(isHit(try query(c, target, body, type: "text/plain")))
        let spaced = try query(c, target, "a b", type: "text/plain")
        XCTAssertFalse(isHit(try query(c, target, "a  b", type: "text/plain")), "other than JSON, the bytes key it: \(spaced.status)")
        XCTAssertEqual(try origin.count(target), 6)
        let last = try origin.lastRequest(target)
        XCTAssertEqual(last["method"] as? String, "QUERY", "sent upstream as a QUERY")
        XCTAssertEqual(last["body_length"] as? Int, 4, "with its body")

        // A GET of the URL is another resource's representation.
        let get = try c.get(target)
        XCTAssertFalse(isHit(get))
        XCTAssertEqual(get.text, "")
    }

    func testAStoredQueryIsRevalidatedWithItsBody() throws {
        let c = try larder.client()
        let target = "/echo?revalidate=1&cc=no-cache&etag=q1"
        let body = "name=larder"
        XCTAssertEqual(try query(c, target, body, type: "application/x-www-form-urlencoded").text, body)
        let validated = try query(c, target, body, type: "application/x-www-form-urlencoded")
        XCTAssertEqual(validated.status, 200)
        XCTAssertEqual(validated.text, body, "the stored body, after the origin's 304")
        XCTAssertTrue(validated.header("cache-status")?.contains("fwd=stale; fwd-status=304") == true,
                      validated.header("cache-status") ?? "")
        let last = try origin.lastRequest(target)
        XCTAssertEqual(last["method"] as? String, "QUERY")
        XCTAssertEqual(last["body_length"] as? Int, body.utf8.count, "the body goes with the conditional request")
        let sent = (last["headers"] as? [[String]]) ?? []
        XCTAssertTrue(sent.contains(["if-none-match", "\"q1\""]), "\(sent)")
        XCTAssertEqual(try origin.count(target), 2)
        // The client's own validator: answered here from the stored response.
        let conditional = try query(c, target, body, type: "application/x-www-form-urlencoded", headers: ["If-None-Match: \"q1\""])
        XCTAssertEqual(conditional.status, 304)
    }

    func testAWriteToTheURLInvalidatesItsQueriesAndAQueryInvalidatesNothing() throws {
        let c = try larder.client()
        let target = "/echo?writes=1"
        _ = try query(c, target, #"{"q":1}"#)
        _ = try c.get(target)
        XCTAssertTrue(isHit(try c.get(target)))
        XCTAssertTrue(isHit(try query(c, target, #"{"q":1}"#)))
        // A QUERY, safe, leaves the URL's GET response stored (and its own).
        _ = try query(c, target, #"{"q":2}"#)
        XCTAssertTrue(isHit(try c.get(target)), "a QUERY is safe: it invalidates nothing")
        XCTAssertTrue(isHit(try query(c, target, #"{"q":1}"#)))

        try c.send("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx")
        XCTAssertEqual(try c.readResponse(method: "POST").status, 200)
        XCTAssertFalse(isHit(try query(c, target, #"{"q":1}"#)), "the POST invalidated the URL's stored queries")
        XCTAssertFalse(isHit(try query(c, target, #"{"q":2}"#)))
        XCTAssertFalse(isHit(try c.get(target)), "and its GET response")

        // A purge of the URL reaches every body's answer.
        XCTAssertTrue(isHit(try query(c, target, #"{"q":1}"#)))
        let purged = try larder.adminClient().request("POST", "/purge?url=%2Fecho%3Fwrites%3D1")
        XCTAssertTrue(purged.text.contains("\"purged\": 3"), purged.text)
        XCTAssertFalse(isHit(try query(c, target, #"{"q":1}"#)))
    }

    func testABodyOverMaxPostBodyGoesThroughUncachedAndContentLocationIsPassedOn() throws {
        let c = try larder.client()
        let target = "/echo?large=1"
        let large = String(repeating: "q", count: 70_000)  // over the default 64 KiB
        for _ in 0..<2 {
            let r = try query(c, target, large, type: "text/plain")
            XCTAssertEqual(r.text, large)
            XCTAssertFalse(isHit(r))
        }
        XCTAssertEqual(try origin.count(target), 2)
        // Chunked, outgrowing the limit while held: the bytes so far go first.
        try c.send("QUERY \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                   + "ea60\r\n" + String(repeating: "a", count: 60_000) + "\r\n"
                   + "2710\r\n" + String(repeating: "b", count: 10_000) + "\r\n0\r\n\r\n")
        let chunked = try c.readResponse(method: "QUERY")
        XCTAssertEqual(chunked.text, String(repeating: "a", count: 60_000) + String(repeating: "b", count: 10_000))
        XCTAssertFalse(isHit(chunked))

        // Content-Location names where the result can be had with GET: passed
        // on, and never stored as that URL's GET response.
        let located = "/echo?located=1&extra=Content-Location:%2Fresults%2F7"
        let r = try query(c, located, #"{"id":7}"#)
        XCTAssertEqual(r.header("content-location"), "/results/7")
        XCTAssertFalse(isHit(try c.get("/results/7")))
        XCTAssertEqual(try origin.count("/results/7"), 1)
        XCTAssertTrue(isHit(try query(c, located, #"{"id":7}"#)))
    }

    func testIdenticalQueriesAtOnceCollapseAndAStaleOneIsRefreshedWithItsBody() throws {
        let target = "/echo?slow=1&delay=0.5"
        let body = #"{"q":"slow"}"#
        let clients = try (0..<3).map { _ in try larder.client() }
        for c in clients {
            try c.send("QUERY \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        }
        for c in clients { XCTAssertEqual(try c.readResponse(method: "QUERY").text, body) }
        XCTAssertEqual(try origin.count(target), 1, "collapsed onto one fetch")

        // stale-while-revalidate: served stale at once, refreshed in the
        // background as the same QUERY, body and all.
        let clocked = try startLarder(upstream: origin.url, environment: LarderProcess.testClock)
        let swr = "/echo?swr=1&cc=max-age%3D10%2Cstale-while-revalidate%3D600"
        XCTAssertEqual(try query(try clocked.client(), swr, body).text, body)
        try clocked.advanceClock(20)
        let stale = try query(try clocked.client(), swr, body)
        XCTAssertEqual(stale.text, body)
        XCTAssertTrue(isHit(stale), stale.header("cache-status") ?? "")
        let deadline = Date().addingTimeInterval(10)
        while try origin.count(swr) < 2 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try origin.count(swr), 2, "refreshed once")
        let last = try origin.lastRequest(swr)
        XCTAssertEqual(last["method"] as? String, "QUERY")
        XCTAssertEqual(last["body_length"] as? Int, body.utf8.count)
    }

    func testOverHTTP2TooAQueryIsAHit() throws {
        func h2(_ body: String) throws -> String {
            try runProgram(["curl", "-sS", "--http2-prior-knowledge", "-X", "QUERY", "-H", "Content-Type: application/json",
                            "--data-binary", body, "-o", "/dev/null", "-w", "%{http_version} %header{cache-status}",
                            "http://127.0.0.1:\(larder.port)/echo?h2=1"]).stdout
        }
        XCTAssertTrue(try h2(#"{"a":1,"b":2}"#).hasPrefix("2 larder; fwd=uri-miss"))
        let hit = try h2(#"{"b":2,"a":1}"#)
        XCTAssertTrue(hit.hasPrefix("2 ") && hit.contains("; hit"), hit)
        XCTAssertTrue(isHit(try query(try larder.client(), "/echo?h2=1", #"{"a":1,"b":2}"#)), "one entry for every protocol")
        XCTAssertEqual(try origin.count("/echo?h2=1"), 1)
    }
}
