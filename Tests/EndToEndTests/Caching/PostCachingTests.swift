import Foundation
import XCTest

/// Cached GraphQL and JSON-RPC queries (a route's `cache_post`) against a
/// GraphQL-style origin (`/echo` answers a POST with its body, fresh for a
/// minute): a query is keyed by its body's digest (its JSON normalized),
/// a write is never cached and invalidates the URL's queries, a purge of
/// the URL reaches every body, identical queries at once collapse, and a
/// body over the limit goes through.
final class PostCachingTests: ConfiguredTestCase {
    private func post(_ c: HTTPClient, _ target: String, _ body: String) throws -> HTTPResponse {
        try c.send("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        return try c.readResponse(method: "POST")
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    func testQueriesAreCachedByTheirBodyAndWritesAreNot() throws {
        let origin = try startOrigin()
        let config = try writeConfig("""
            upstream = "\(origin.url)"

            [[route]]
            prefix = "/echo"
            cache_post = true
            normalize_json = true
            max_post_body = "1KiB"
            uncached_rpc_methods = ["send"]
            """)
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let c = try larder.client()
        let target = "/echo?api=1"
        let query = #"{"query":"{ user(id: 1) { name } }","variables":{"a":1,"b":2}}"#
        let first = try post(c, target, query)
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.text, query)
        XCTAssertFalse(isHit(first))
        let again = try post(c, target, query)
        XCTAssertTrue(isHit(again), again.header("cache-status") ?? "")
        XCTAssertEqual(again.text, query)
        XCTAssertTrue(again.header("cache-status")?.contains("key=\"body-json-sha256:") == true, again.header("cache-status") ?? "")
        let relaid = try post(c, target, "{ \"variables\" : {\"b\":2, \"a\":1}, \"query\" : \"{ user(id: 1) { name } }\" }")
        XCTAssertTrue(isHit(relaid), "the same JSON laid out otherwise: one key")
        XCTAssertEqual(relaid.text, query, "the stored answer")
        let other = try post(c, target, #"{"query":"{ user(id: 2) { name } }"}"#)
        XCTAssertFalse(isHit(other))
        XCTAssertEqual(other.text, #"{"query":"{ user(id: 2) { name } }"}"#, "another body: another answer, never the first's")
        XCTAssertEqual(try origin.count(target), 2)

        // A write goes through, uncached, and invalidates the URL's queries.
        let mutation = #"{"query":"mutation { rename(id: 1, name: \"x\") }"}"#
        XCTAssertFalse(isHit(try post(c, target, mutation)))
        XCTAssertFalse(isHit(try post(c, target, mutation)))
        XCTAssertEqual(try origin.count(target), 4)
        XCTAssertFalse(isHit(try post(c, target, query)), "the write invalidated the stored query")
        XCTAssertTrue(isHit(try post(c, target, query)))
        let rpc = #"{"jsonrpc":"2.0","method":"send","params":[1],"id":7}"#
        _ = try post(c, target, rpc)
        XCTAssertFalse(isHit(try post(c, target, query)), "a listed JSON-RPC method is a write too")
        XCTAssertEqual(try origin.count(target), 7)

        // A body over max_post_body goes through whole, uncached: an
        // unsafe request as any POST, it invalidates the URL's queries.
        let large = "{\"query\":\"{ a }\",\"pad\":\"" + String(repeating: "p", count: 2000) + "\"}"
        for _ in 0..<2 {
            let r = try post(c, target, large)
            XCTAssertEqual(r.text, large)
            XCTAssertFalse(isHit(r))
        }
        XCTAssertFalse(isHit(try post(c, target, query)))

        // A purge of the URL reaches every body's answer.
        XCTAssertTrue(isHit(try post(c, target, query)))
        XCTAssertFalse(isHit(try post(c, target, #"{"query":"{ b }"}"#)))
        let purged = try larder.adminClient().request("POST", "/purge?url=%2Fecho%3Fapi%3D1")
        XCTAssertTrue(purged.text.contains("\"purged\": 2"), purged.text)
        XCTAssertFalse(isHit(try post(c, target, query)))
    }

    func testIdenticalQueriesAtOnceAskTheUpstreamOnce() throws {
        let origin = try startOrigin()
        let config = try writeConfig("upstream = \"\(origin.url)\"\n[[route]]\nprefix = \"/echo\"\ncache_post = true\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let target = "/echo?slow=1&delay=0.5"
        let query = #"{"query":"{ slow }"}"#
        let clients = try (0..<3).map { _ in try larder.client() }
        for c in clients {
            try c.send("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(query.utf8.count)\r\n\r\n\(query)")
        }
        for c in clients { XCTAssertEqual(try c.readResponse(method: "POST").text, query) }
        XCTAssertEqual(try origin.count(target), 1, "collapsed onto one fetch")
        // Without cache_post a POST is never a cached query.
        let plain = try startLarder(upstream: origin.url)
        for _ in 0..<2 { _ = try post(try plain.client(), "/echo?plain=1", query) }
        XCTAssertEqual(try origin.count("/echo?plain=1"), 2)
    }

    /// Query bodies held to key them count against request_buffer_total
    /// with the bodies held for the upstream: connections each holding one
    /// just under max_post_body cannot take memory without bound.
    func testHeldQueryBodiesCountAgainstTheTotal() throws {
        let origin = try startOrigin()
        let config = try writeConfig("""
            upstream = "\(origin.url)"
            request_buffer_total = "64KiB"
            [[route]]
            prefix = "/echo"
            cache_post = true
            max_post_body = "1MiB"
            """)
        // One worker (a flag: the harness's --workers 2 would win over the
        // file): the holder's bytes, sent first, are read before any other
        // client's (with two, a query read first could leave the holder
        // beyond the total, streamed, and nothing over it after).
        let larder = try startLarder(upstream: origin.url, ["--config", config, "--workers", "1"])
        func query(_ size: Int, _ fill: Character) -> String {
            #"{"query":"{ f"# + String(repeating: fill, count: size) + #" }"}"#
        }
        // One client holds most of the total with a query it has not finished sending.
        let holder = try larder.client()
        let held = query(60 << 10, "a")
        let heldBytes = Array(held.utf8)
        try holder.send(Array("POST /echo HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(heldBytes.count)\r\n\r\n".utf8)
                        + heldBytes[0..<(50 << 10)])
        let c = try larder.client()
        // Fresh queries, each asked twice, until the holder's bytes are counted:
        // then a query is not held to be keyed, so never stored.
        let deadline = Date().addingTimeInterval(10)
        var overTotal = false, n = 0
        while !overTotal && Date() < deadline {
            let other = query(20 << 10, Character(String(n % 10)))
            n += 1
            XCTAssertEqual(try post(c, "/echo?n=\(n)", other).text, other, "answered whole either way")
            overTotal = !isHit(try post(c, "/echo?n=\(n)", other))
        }
        XCTAssertTrue(overTotal, "beyond the total a query goes through uncached")
        let stats = try JSONSerialization.jsonObject(with: Data(try larder.adminClient().get("/stats").body)) as? [String: Any]
        XCTAssertGreaterThanOrEqual(stats?["streamed_request_bodies"] as? Int ?? 0, 1, "and is counted")
        // The holder finishes: its query is answered, and once its exchange
        // has ended (just after its answer) the total is free again.
        try holder.send(Array(heldBytes[(50 << 10)...]))
        XCTAssertEqual(try holder.readResponse(method: "POST").text, held)
        var stored = false
        while !stored && Date() < deadline.addingTimeInterval(10) {
            let other = query(20 << 10, Character(String(n % 10)))
            n += 1
            XCTAssertFalse(isHit(try post(c, "/echo?n=\(n)", other)))
            stored = isHit(try post(c, "/echo?n=\(n)", other))
        }
        XCTAssertTrue(stored, "held and keyed once the total allows")
    }
}
