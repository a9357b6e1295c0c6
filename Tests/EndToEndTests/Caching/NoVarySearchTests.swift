import Foundation
import XCTest

/// No-Vary-Search (draft-ietf-httpbis-no-vary-search-04) against a real
/// origin: a response that says which query parameters do not count
/// answers requests whose queries differ only in those.
final class NoVarySearchTests: ProxyTestCase {
    /// The origin's `extra=` adds the field (percent-encoded there).
    private func field(_ value: String) -> String {
        "extra=No-Vary-Search:" + value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    private func isHit(_ response: HTTPResponse) -> Bool { response.header("cache-status")?.contains("hit") ?? false }

    func testParametersTheFieldNamesDoNotCount() throws {
        let nvs = field(#"params=("utm_source" "utm_medium")"#)
        let first = try larder.client().get("/nvs/a?\(nvs)&utm_source=mail&q=1")
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("no-vary-search"), #"params=("utm_source" "utm_medium")"#, "the field reaches the client")
        let other = try larder.client().get("/nvs/a?\(nvs)&utm_source=feed&utm_medium=x&q=1")
        XCTAssertTrue(isHit(other), "\(other.headers)")
        XCTAssertEqual(other.body, first.body)
        XCTAssertEqual(try origin.count("/nvs/a?\(nvs)&utm_source=feed&utm_medium=x&q=1"), 0)
        // A parameter that counts: its own entry.
        let differs = try larder.client().get("/nvs/a?\(nvs)&utm_source=mail&q=2")
        XCTAssertFalse(isHit(differs), "\(differs.headers)")
        // Their order still counts without key-order.
        XCTAssertFalse(isHit(try larder.client().get("/nvs/a?q=1&\(nvs)")))
    }

    func testKeyOrderAndExcept() throws {
        let order = field("key-order")
        _ = try larder.client().get("/nvs/b?\(order)&x=1&y=2")
        XCTAssertTrue(isHit(try larder.client().get("/nvs/b?y=2&x=1&\(order)")))
        XCTAssertFalse(isHit(try larder.client().get("/nvs/b?y=2&\(order)")))
        // Only `extra` (the field itself) and `id` count.
        let only = field(#"params, except=("extra" "id")"#)
        _ = try larder.client().get("/nvs/c?\(only)&id=7&session=abc")
        XCTAssertTrue(isHit(try larder.client().get("/nvs/c?\(only)&id=7&session=def&ref=x")))
        XCTAssertFalse(isHit(try larder.client().get("/nvs/c?\(only)&id=8")))
    }

    func testAnInvalidFieldIsIgnored() throws {
        for value in ["params=1", "key-order, other", #"except=("q")"#] {
            let nvs = field(value)
            XCTAssertFalse(isHit(try larder.client().get("/nvs/d?\(nvs)&utm=1")))
            XCTAssertFalse(isHit(try larder.client().get("/nvs/d?\(nvs)&utm=2")), value)
            XCTAssertTrue(isHit(try larder.client().get("/nvs/d?\(nvs)&utm=2")), "the whole query still keys it: \(value)")
        }
    }

    func testAPurgeOfAnEquivalentURLRemovesTheEntry() throws {
        let nvs = field("params")
        _ = try larder.client().get("/nvs/e?\(nvs)&a=1")
        XCTAssertTrue(isHit(try larder.client().get("/nvs/e?b=2")), "params: no parameter counts")
        let target = "/nvs/e?never=asked".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?url=\(target)").status, 200)
        XCTAssertFalse(isHit(try larder.client().get("/nvs/e?b=2")))
    }

    /// A cached POST query stays keyed by its body while paths have variances.
    func testACachedQueryIsKeyedByItsBodyStill() throws {
        let config = try writeConfig("upstream = \"\(origin.url)\"\n[[route]]\nprefix = \"/echo\"\ncache_post = true\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        _ = try larder.client().get("/nvs/f?\(field("params"))")
        XCTAssertTrue(isHit(try larder.client().get("/nvs/f?x=1")), "a variance recorded")
        func post(_ body: String) throws -> HTTPResponse {
            let c = try larder.client()
            try c.send("POST /echo?\(field("params")) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                       + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            return try c.readResponse(method: "POST")
        }
        let one = #"{"query":"{ a }"}"#, two = #"{"query":"{ b }"}"#
        XCTAssertEqual(try post(one).text, one)
        XCTAssertTrue(isHit(try post(one)))
        XCTAssertEqual(try post(two).text, two, "another body: its own answer")
        XCTAssertFalse(isHit(try larder.client().get("/echo?\(field("params"))")), "a query's answer is not the URL's")
    }
}
