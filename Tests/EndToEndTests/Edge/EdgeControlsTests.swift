import Foundation
import XCTest

/// Edge controls on the real binary: access lists and rate limits by
/// source address (127.0.0.2, 127.0.0.3), header rules, cookie rules and
/// purges by regular expression.
final class EdgeControlsTests: ConfiguredTestCase {
    private func get(_ larder: LarderProcess, _ target: String, from source: String = "127.0.0.1",
                     _ headers: [String] = []) throws -> HTTPResponse {
        try HTTPClient(port: larder.port, source: source).get(target, headers: headers)
    }

    func testAccessListsRefuseBeforeAnyLookupDenyFirst() throws {
        let (origin, larder) = try start(config: """
            allow = ["127.0.0.0/8", "::1/128"]
            deny = ["127.0.0.2/32"]
            [[route]]
            prefix = "/open/"
            allow = ["127.0.0.2"]
            """)
        XCTAssertEqual(try get(larder, "/a", from: "127.0.0.3").status, 200)
        let refused = try get(larder, "/a", from: "127.0.0.2")
        XCTAssertEqual(refused.status, 403)
        XCTAssertTrue(refused.text.contains("127.0.0.2"), refused.text)
        XCTAssertEqual(try origin.count("/a"), 1, "the refused request reached neither the cache nor the upstream")
        let fresh = try get(larder, "/b", from: "127.0.0.2")
        XCTAssertEqual(fresh.status, 403)
        XCTAssertEqual(try origin.count("/b"), 0)
        // A route's lists replace the global ones.
        XCTAssertEqual(try get(larder, "/open/x", from: "127.0.0.2").status, 200)
        XCTAssertEqual(try get(larder, "/open/x", from: "127.0.0.3").status, 403)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "access_denied"), 3)
    }

    func testTrustedProxiesLetForwardedForNameTheClient() throws {
        let (_, larder) = try start(config: """
            trusted_proxies = ["127.0.0.3"]
            deny = ["192.0.2.9"]
            """)
        XCTAssertEqual(try get(larder, "/t", from: "127.0.0.3", ["X-Forwarded-For: 192.0.2.9"]).status, 403)
        XCTAssertEqual(try get(larder, "/t", from: "127.0.0.3", ["Forwarded: for=192.0.2.9"]).status, 403)
        // Only from the right, skipping trusted hops: the left end is the client's own claim.
        XCTAssertEqual(try get(larder, "/t", from: "127.0.0.3", ["X-Forwarded-For: 192.0.2.9, 198.51.100.1"]).status, 200)
        // An untrusted peer's X-Forwarded-For is ignored.
        XCTAssertEqual(try get(larder, "/t", from: "127.0.0.2", ["X-Forwarded-For: 192.0.2.9"]).status, 200)
    }

    func testRateLimitsCountHitsPerClientAnd429WithRetryAfter() throws {
        let log = temporaryPath("edge-access") + ".log"
        let (origin, larder) = try start(config: """
            access_log = "\(log)"
            rate_limit = { requests = 2, per = "1m", burst = 1 }
            [[route]]
            prefix = "/keyed/"
            rate_limit = { requests = 1, per = "1m", key = "header:X-Api-Key" }
            """)
        // burst = 1: two at once, then one every 30 s.
        XCTAssertEqual(try get(larder, "/r", from: "127.0.0.2").status, 200)
        let hit = try get(larder, "/r", from: "127.0.0.2")
        XCTAssertEqual(hit.status, 200)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "a hit, and it counted: \(hit.headers)")
        let limited = try get(larder, "/r", from: "127.0.0.2")
        XCTAssertEqual(limited.status, 429)
        let retry = Int(limited.header("retry-after") ?? "") ?? 0
        XCTAssertTrue((1...30).contains(retry), "Retry-After: \(limited.header("retry-after") ?? "none")")
        XCTAssertEqual(try origin.count("/r"), 1)
        // Another address has its own bucket.
        XCTAssertEqual(try get(larder, "/r", from: "127.0.0.3").status, 200)
        // By a request field: each key its own bucket, whatever the address.
        XCTAssertEqual(try get(larder, "/keyed/a", from: "127.0.0.2", ["X-Api-Key: one"]).status, 200)
        XCTAssertEqual(try get(larder, "/keyed/a", from: "127.0.0.3", ["X-Api-Key: one"]).status, 429)
        XCTAssertEqual(try get(larder, "/keyed/a", from: "127.0.0.2", ["X-Api-Key: two"]).status, 200)
        XCTAssertEqual(try statsFigure(larder, "rate_limited"), 2)
        let metrics = try larder.adminClient().get("/metrics").text
        XCTAssertTrue(metrics.contains("larder_rate_limited_total 2"), metrics)
        let lines = lines(atLeast: 7, in: log)
        XCTAssertEqual(lines.filter { $0.contains(" 429 ") }.count, 2, lines.joined(separator: "\n"))
    }

    /// A 429 is a whole answer on a connection that goes on (HTTP/1.1, and
    /// HTTP/1.0 that asked for keep-alive), and the response rules hold on it.
    func testA429KeepsTheConnectionAndCarriesTheResponseRules() throws {
        let (origin, larder) = try start(config: """
            rate_limit = { requests = 1, per = "1d" }
            response_headers = { set = { "X-Frame-Options" = "DENY" } }
            [[route]]
            prefix = "/id/"
            rate_limit = { requests = 1, per = "1d" }
            response_headers = { add = { "X-Request-Id" = "$request_id" } }
            [[route]]
            prefix = "/quiet/"
            rate_limit = { requests = 1, per = "1d" }
            response_headers = { remove = ["Retry-After"] }
            """)
        let client = try HTTPClient(port: larder.port, source: "127.0.0.2")
        XCTAssertEqual(try client.get("/k").status, 200)
        for _ in 0..<3 {
            let limited = try client.get("/k")
            XCTAssertEqual(limited.status, 429)
            XCTAssertEqual(limited.header("x-frame-options"), "DENY", "\(limited.headers)")
            XCTAssertNotNil(Int(limited.header("retry-after") ?? ""), "\(limited.headers)")
            XCTAssertEqual(limited.header("content-length"), String(limited.body.count))
            XCTAssertTrue(limited.text.contains("too many requests"), limited.text)
        }
        XCTAssertEqual(try origin.count("/k"), 1)
        let old = try HTTPClient(port: larder.port, source: "127.0.0.2")
        for _ in 0..<2 {
            try old.send("GET /k HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n")
            let limited = try old.readResponse()
            XCTAssertEqual(limited.status, 429)
            XCTAssertEqual(limited.header("connection")?.lowercased(), "keep-alive", "\(limited.headers)")
        }
        try old.send("GET /k HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertEqual(try old.readResponse().status, 429)
        XCTAssertTrue(old.readUntilClosed().isEmpty, "HTTP/1.0 without keep-alive: closed after its answer")
        // Variables rendered for a 429 too.
        XCTAssertEqual(try get(larder, "/id/x", from: "127.0.0.3").status, 200)
        let rendered = try get(larder, "/id/x", from: "127.0.0.3")
        XCTAssertEqual(rendered.status, 429)
        XCTAssertFalse((rendered.header("x-request-id") ?? "").isEmpty, "\(rendered.headers)")
        // A rule that removes Retry-After is obeyed.
        XCTAssertEqual(try get(larder, "/quiet/x", from: "127.0.0.3").status, 200)
        let quiet = try get(larder, "/quiet/x", from: "127.0.0.3")
        XCTAssertEqual(quiet.status, 429)
        XCTAssertNil(quiet.header("retry-after"), "\(quiet.headers)")
    }

    func testHeaderRulesGoUpstreamAndToClientsOnHitsAndMisses() throws {
        let (origin, larder) = try start(config: """
            request_headers = { set = { "X-Env" = "prod" }, add = { "X-Client" = "$client_addr" }, remove = ["X-Debug"] }
            response_headers = { set = { "Strict-Transport-Security" = "max-age=63072000" }, remove = ["Server", "X-Internal"], add = { "X-Request-Id" = "$request_id" } }
            [[route]]
            prefix = "/api/"
            response_headers = { set = { "Access-Control-Allow-Origin" = "*" } }
            """)
        let target = "/api/h?extra=X-Internal:secret"
        let miss = try get(larder, target, ["X-Debug: 1", "X-Env: dev"])
        XCTAssertEqual(miss.status, 200)
        let seen = try ProxyLike(origin).headers(target)
        XCTAssertEqual(seen["x-env"], "prod")
        XCTAssertNil(seen["x-debug"])
        XCTAssertEqual(seen["x-client"], "127.0.0.1")
        let hit = try get(larder, target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        for answer in [miss, hit] {
            XCTAssertEqual(answer.header("strict-transport-security"), "max-age=63072000")
            XCTAssertEqual(answer.header("access-control-allow-origin"), "*", "a route's rules apply over the global ones")
            XCTAssertNil(answer.header("server"), "\(answer.headers)")
            XCTAssertNil(answer.header("x-internal"))
            XCTAssertEqual(answer.header("x-request-id")?.count, 32)
            XCTAssertEqual(answer.headers.filter { $0.0 == "strict-transport-security" }.count, 1)
        }
        XCTAssertNotEqual(miss.header("x-request-id"), hit.header("x-request-id"))
        XCTAssertEqual(try origin.count(target), 1)
        // Answers made here carry them too.
        let notFound = try get(larder, "/api/h", ["Cache-Control: only-if-cached"])
        XCTAssertEqual(notFound.status, 504)
        XCTAssertEqual(notFound.header("strict-transport-security"), "max-age=63072000")
    }

    func testResponseRulesHoldOverHTTP2HitsAndMisses() throws {
        let (_, larder) = try start(config: """
            response_headers = { set = { "X-Frame-Options" = "DENY" }, remove = ["Server", "Content-Type"] }
            """)
        for round in ["miss", "hit"] {
            let r = try runProgram(["curl", "-s", "-D", "-", "-o", "/dev/null", "--http2-prior-knowledge",
                                    "http://127.0.0.1:\(larder.port)/h2?type=text/plain"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let head = r.stdout.lowercased()
            XCTAssertTrue(head.hasPrefix("http/2 200"), head)
            XCTAssertTrue(head.contains("x-frame-options: deny"), "\(round): \(head)")
            XCTAssertFalse(head.contains("server:"), "\(round): \(head)")
            XCTAssertFalse(head.contains("content-type:"), "\(round): \(head)")
            XCTAssertEqual(head.contains("; hit"), round == "hit", head)
        }
    }

    /// Response rules are applied when answering, never stored: a reload
    /// that drops one gives the next hit the field back.
    func testAReloadChangesTheRulesOfStoredResponses() throws {
        let origin = try startOrigin()
        let config = try writeConfig("response_headers = { remove = [\"Server\"] }\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        XCTAssertNil(try get(larder, "/kept").header("server"))
        XCTAssertNil(try get(larder, "/kept").header("server"))
        try "deny = [\"127.0.0.2\"]\n".write(toFile: config, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        // The new rules hold once 127.0.0.2 is refused (bounded wait).
        let deadline = Date().addingTimeInterval(10)
        while try get(larder, "/other", from: "127.0.0.2").status != 403 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try get(larder, "/kept", from: "127.0.0.2").status, 403)
        let hit = try get(larder, "/kept")
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        XCTAssertNotNil(hit.header("server"), "the stored response kept the origin's field")
        XCTAssertEqual(try origin.count("/kept"), 1)
    }

    func testCookieRules() throws {
        let (origin, larder) = try start(config: """
            [[route]]
            prefix = "/strip/"
            strip_cookies = true
            [[route]]
            prefix = "/lang/"
            key_cookies = ["lang"]
            """)
        // strip_cookies: no Cookie upstream, no Set-Cookie to clients, and the response is stored.
        let first = try get(larder, "/strip/a?cookie=1", ["Cookie: session=secret"])
        XCTAssertEqual(first.status, 200)
        XCTAssertNil(first.header("set-cookie"))
        XCTAssertNil(try ProxyLike(origin).headers("/strip/a?cookie=1")["cookie"])
        let again = try get(larder, "/strip/a?cookie=1", ["Cookie: session=other"])
        XCTAssertTrue(again.header("cache-status")?.contains("hit") ?? false, "stored without its Set-Cookie: \(again.headers)")
        XCTAssertNil(again.header("set-cookie"))
        XCTAssertEqual(try origin.count("/strip/a?cookie=1"), 1)
        // key_cookies: the lang cookie's value selects the response; other cookies do not.
        XCTAssertEqual(try get(larder, "/lang/p", ["Cookie: lang=de; session=1"]).status, 200)
        let same = try get(larder, "/lang/p", ["Cookie: session=2; lang=de"])
        XCTAssertTrue(same.header("cache-status")?.contains("hit") ?? false, "\(same.headers)")
        let other = try get(larder, "/lang/p", ["Cookie: lang=fr"])
        XCTAssertFalse(other.header("cache-status")?.contains("hit") ?? true, "\(other.headers)")
        _ = try get(larder, "/lang/p")
        XCTAssertEqual(try origin.count("/lang/p"), 3, "de, fr and none: three responses")
        XCTAssertTrue(try get(larder, "/lang/p", ["Cookie: lang=fr; x=y"]).header("cache-status")?.contains("hit") ?? false)
    }

    func testPurgeByRegularExpression() throws {
        let (origin, larder) = try start(config: "")
        for target in ["/a/1", "/a/2?x=1", "/a/b", "/c/1"] { XCTAssertEqual(try get(larder, target).status, 200) }
        let admin = try larder.adminClient()
        let purged = try admin.request("POST", "/purge?regex=" + "^/a/[0-9]".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertEqual(purged.status, 200, purged.text)
        XCTAssertTrue(purged.text.contains("\"purged\": 2"), purged.text)
        for target in ["/a/1", "/a/2?x=1", "/a/b", "/c/1"] { _ = try get(larder, target) }
        XCTAssertEqual(try origin.count("/a/1"), 2)
        XCTAssertEqual(try origin.count("/a/2?x=1"), 2)
        XCTAssertEqual(try origin.count("/a/b"), 1)
        XCTAssertEqual(try origin.count("/c/1"), 1)
        // Soft: marked stale, revalidated before reuse.
        let soft = try admin.request("POST", "/purge?soft=true&regex=" + "b$".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertTrue(soft.text.contains("\"purged\": 1"), soft.text)
        // The command line tool.
        let tool = try startChild(Paths.larder, ["purge", "--regex", "^/c/", "--admin", larder.adminURL])
        XCTAssertEqual(tool.waitForExit(timeout: 30), 0, tool.stderr)
        _ = try get(larder, "/c/1")
        XCTAssertEqual(try origin.count("/c/1"), 2)
        // One that does not compile: 400 with the engine's reason.
        let bad = try admin.request("POST", "/purge?regex=" + "(a".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertEqual(bad.status, 400)
        XCTAssertTrue(bad.text.contains("regex does not compile"), bad.text)
        // A back-reference (exponential matching): refused, the time a purge takes stays bounded.
        let slow = try admin.request("POST", "/purge?regex=" + "^/(a+)+\\1$".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)
        XCTAssertEqual(slow.status, 400)
        XCTAssertTrue(slow.text.contains("back-references"), slow.text)
    }

    func testAdminAllow() throws {
        let (_, larder) = try start(config: "admin_allow = [\"127.0.0.3\"]\n")
        XCTAssertEqual(try HTTPClient(port: larder.adminPort!, source: "127.0.0.2").get("/stats").status, 403)
        XCTAssertEqual(try HTTPClient(port: larder.adminPort!, source: "127.0.0.3").get("/stats").status, 200)
    }

    func testBadValuesAreRefusedNamingTheKey() throws {
        let cases: [(String, String)] = [
            ("allow = [\"10.0.0.1/8\"]\n", "allow: \"10.0.0.1/8\" is not an address or prefix"),
            ("deny = [\"localhost\"]\n", "deny: \"localhost\" is not an address"),
            ("admin_allow = \"127.0.0.1\"\n", "admin_allow: expected a list of addresses"),
            ("trusted_proxies = [\"::1/200\"]\n", "trusted_proxies:"),
            ("rate_limit = { requests = 0 }\n", "rate_limit.requests:"),
            ("rate_limit = { requests = 5, per = \"soon\" }\n", "rate_limit.per:"),
            ("rate_limit = { requests = 5, key = \"cookie:x\" }\n", "rate_limit.key:"),
            ("rate_limit = { requests = 5, burts = 1 }\n", "rate_limit.burts: unknown rate_limit part (did you mean burst?"),
            ("request_headers = { set = { \"Bad Name\" = \"x\" } }\n", "request_headers.set: \"Bad Name\" is not a field name"),
            ("response_headers = { set = { \"X-A\" = \"$nope\" } }\n", "response_headers.set: X-A: unknown variable $nope"),
            ("response_headers = { remove = [\"Content-Length\"] }\n", "response_headers.remove: Content-Length frames the message"),
            ("response_headers = { sett = {} }\n", "response_headers.sett: unknown"),
            ("strip_cookies = \"yes\"\n", "strip_cookies: expected true or false"),
            ("[[route]]\nprefix = \"/\"\nkey_cookies = [\"a b\"]\n", "route.key_cookies: expected a list of cookie names"),
            ("[[route]]\nprefix = \"/\"\nstrip_cookies = true\nkey_cookies = [\"lang\"]\n", "exclude each other"),
            ("[[route]]\nprefix = \"/\"\nallow = [\"300.1.1.1\"]\n", "route.allow:"),
        ]
        for (text, message) in cases {
            let path = try writeConfig("upstream = \"http://127.0.0.1:9\"\nlisten = \"127.0.0.1:0\"\n" + text)
            for command in ["check-config", "serve"] {
                let child = try startChild(Paths.larder, [command, "--config", path])
                let status = child.waitForExit(timeout: 30)
                child.drainOutput()
                XCTAssertEqual(status, 78, "\(command): \(text)")
                XCTAssertTrue(child.stderr.contains(message), "\(command): \(child.stderr)")
            }
        }
    }
}

/// The origin's view of the last request for a target.
private struct ProxyLike {
    let origin: Origin
    init(_ origin: Origin) { self.origin = origin }

    func headers(_ target: String) throws -> [String: String] {
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        return Dictionary(pairs.map { ($0[0].lowercased(), $0[1]) }, uniquingKeysWith: { a, _ in a })
    }
}
