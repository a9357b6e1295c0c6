import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

// Attempts to poison or bypass the cache: unkeyed fields, Vary values, codings, POST bodies read as queries, client policies.

/// Cache poisoning: what a client sends but the key does not hold never
/// reaches the upstream, and one host's response is not served for another.
final class PoisoningTests: ConfiguredTestCase {
    func testForwardingFieldsFromTheClientAreDroppedByDefault() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url)
        let c = try larder.client()
        try c.send("GET /poison HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        let fields = try origin.lastRequest("/poison")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-host" }.count, 0, "\(fields)")
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-proto" }.map { $0[1] }, ["http"])
        // Any Host gets the one stored response (the upstream never saw it).
        try c.send("GET /poison HTTP/1.1\r\nHost: other.example\r\n\r\n")
        XCTAssertTrue(try c.readResponse().header("cache-status")?.contains("hit") ?? false)
    }

    func testWithForwardHostEachHostHasItsOwnStoredResponse() throws {
        let (origin, larder) = try start(config: "forward_host = true\n")
        let c = try larder.client()
        func get(_ host: String, _ extra: String = "") throws -> HTTPResponse {
            try c.send("GET /per-host HTTP/1.1\r\nHost: \(host)\r\n\(extra)\r\n")
            return try c.readResponse()
        }
        XCTAssertEqual(try get("a.example", "X-Forwarded-Host: evil.example\r\n").header("cache-status"), "larder; fwd=uri-miss; stored")
        let fields = try origin.lastRequest("/per-host")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-host" }.map { $0[1] }, ["a.example"], "the client's own is replaced")
        XCTAssertEqual(try get("b.example").header("cache-status"), "larder; fwd=vary-miss; stored", "not a.example's")
        XCTAssertTrue(try get("A.Example").header("cache-status")?.contains("hit") ?? false, "host names are case-insensitive")
        XCTAssertEqual(try origin.count("/per-host"), 2)
        // A purge of the URL removes every host's copy.
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?url=%2Fper-host").text, "{\"purged\": 2}\n")
    }

    func testWithPreserveHostTheUpstreamGetsTheClientsHostAndEachHostIsKeyed() throws {
        let (origin, larder) = try start(config: "preserve_host = true\n")
        let c = try larder.client()
        func get(_ host: String) throws -> HTTPResponse {
            try c.send("GET /vhost HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            return try c.readResponse()
        }
        XCTAssertEqual(try get("a.example").header("cache-status"), "larder; fwd=uri-miss; stored")
        let fields = try origin.lastRequest("/vhost")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0].lowercased() == "host" }.map { $0[1] }, ["a.example"], "the client's Host, not 127.0.0.1:PORT")
        XCTAssertEqual(try get("b.example").header("cache-status"), "larder; fwd=vary-miss; stored", "not a.example's")
        XCTAssertTrue(try get("a.example").header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try origin.count("/vhost"), 2)
    }
}

/// Request fields that rewrite the origin's answer do not reach it unkeyed.
final class UnkeyedFieldTests: ConfiguredTestCase {
    private let overrides = ["Forwarded: host=evil.example", "X-Original-URL: /admin", "X-Rewrite-URL: /admin",
                             "X-HTTP-Method-Override: DELETE", "X-Host: evil.example", "X-Forwarded-Scheme: nothttps"]

    func testURLAndMethodOverridesAreDroppedByDefault() throws {
        let (origin, larder) = try start(config: "")
        XCTAssertEqual(try larder.client().get("/poison", headers: overrides).status, 200)
        let seen = Set((try origin.lastRequest("/poison")["headers"] as? [[String]] ?? []).map { $0[0] })
        for field in ["forwarded", "x-original-url", "x-rewrite-url", "x-http-method-override", "x-host", "x-forwarded-scheme"] {
            XCTAssertFalse(seen.contains(field), "\(field) reached the origin")
        }
    }

    func testAPassedFieldGoesUpstreamAndKeysTheResponse() throws {
        let (origin, larder) = try start(config: "pass_request_headers = [\"X-Original-URL\"]\n")
        let c = try larder.client()
        XCTAssertEqual(try c.get("/passed", headers: ["X-Original-URL: /a"]).status, 200)
        let fields = try origin.lastRequest("/passed")["headers"] as? [[String]] ?? []
        XCTAssertTrue(fields.contains { $0 == ["x-original-url", "/a"] })
        XCTAssertFalse(fields.contains { $0[0] == "forwarded" })
        XCTAssertTrue(try c.get("/passed", headers: ["X-Original-URL: /a"]).header("cache-status")?.contains("hit") ?? false)
        let other = try c.get("/passed", headers: ["X-Original-URL: /b"])
        XCTAssertFalse(other.header("cache-status")?.contains("hit") ?? true, "another value is another response")
        XCTAssertEqual(try origin.count("/passed"), 2)
    }

    func testPassRequestHeadersMustBeFieldNames() throws {
        let path = try writeConfig("pass_request_headers = [\"X Bad\"]\n")
        let check = try ChildProcess(Paths.larder, ["check-config", "--config", path])
        XCTAssertEqual(check.waitForExit(), 78)
        XCTAssertNotNil(check.waitFor("pass_request_headers: expected a list of request header names"))
        check.stop()
    }
}

/// 40 requests with attacker values of a Vary field pushed the hot variant
/// out of the 32 kept per URL (oldest first): the most used stay now.
final class VaryVariantsEndToEndTests: ProxyTestCase {
    func testAHotVariantSurvivesAttackerValuesOfItsVaryField() throws {
        let target = "/vary/hot?vary=X-V"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["X-V: hot"]).status, 200)
        for i in 0..<40 {
            XCTAssertEqual(try c.get(target, headers: ["X-V: attacker-\(i)"]).status, 200)
            let hot = try c.get(target, headers: ["X-V: hot"])
            XCTAssertTrue(hot.header("cache-status")?.contains("; hit") ?? false, "after \(i + 1) attacker values")
        }
        XCTAssertEqual(try origin.count(target), 41, "the hot variant was fetched once")
    }
}

/// A stored zstd body (Vary: Accept-Encoding) answered clients that do not
/// take zstd: the variant key told clients apart by gzip and br alone.
final class VaryCodingEndToEndTests: ConfiguredTestCase {
    func testABodyInACodingTheClientDoesNotTakeNeverAnswersIt() throws {
        let (origin, larder) = try start(config: "")
        for coding in ["zstd", "deflate"] {
            let target = "/coded/\(coding)?extra=Content-Encoding:\(coding);Vary:Accept-Encoding"
            let filled = try larder.client().get(target, headers: ["Accept-Encoding: \(coding)"])
            XCTAssertEqual(filled.header("content-encoding"), coding)
            let again = try larder.client().get(target, headers: ["Accept-Encoding: \(coding)"])
            XCTAssertTrue(again.header("cache-status")?.hasPrefix("larder; hit") ?? false, "\(coding): a hit for a client that takes it")
            var fetches = 1
            for accept in [["Accept-Encoding: identity"], [], ["Accept-Encoding: gzip"]] {
                let r = try larder.client().get(target, headers: accept)
                XCTAssertFalse(r.header("cache-status")?.contains("; hit") ?? false,
                               "\(coding) to \(accept): \(r.header("cache-status") ?? "")")
                fetches += 1
                XCTAssertEqual(try origin.count(target), fetches, "\(coding) to \(accept): fetched for it")
            }
        }
    }
}

/// Forty new values of a varied header, sent with no request for the hot
/// variant between them, pushed it out (32 kept, each served one spared
/// only once). The variants never asked for again go first now.
final class VaryBurstEndToEndTests: ConfiguredTestCase {
    func testABurstOfNewValuesKeepsTheHotVariant() throws {
        let (origin, larder) = try start(config: "")
        let target = "/vary/burst?vary=X-V"
        let c = try larder.client()
        _ = try c.get(target, headers: ["X-V: hot"])
        XCTAssertTrue(try c.get(target, headers: ["X-V: hot"]).header("cache-status")?.contains("hit") ?? false)
        for i in 0..<40 { XCTAssertEqual(try c.get(target, headers: ["X-V: burst-\(i)"]).status, 200) }
        let hot = try c.get(target, headers: ["X-V: hot"])
        XCTAssertTrue(hot.header("cache-status")?.contains("hit") ?? false, "the hot variant stayed: \(hot.header("cache-status") ?? "")")
        XCTAssertTrue(hot.text.hasPrefix("X-V=hot"), "its own answer")
        XCTAssertEqual(try origin.count(target), 41)
    }
}

/// The POST cache fails closed: only a body read positively as queries is
/// cached. A mutation whose body was not understood (too deep, NaN, a byte
/// order mark, a raw GraphQL document, a listed method with deep params, a
/// persisted query named by its hash) was cached by its bytes: the second
/// write never reached the upstream.
final class PostCacheFailsClosedEndToEndTests: ConfiguredTestCase {
    private func post(_ c: HTTPClient, _ target: String, _ body: [UInt8], type: String = "application/json") throws -> HTTPResponse {
        try c.send(Array("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
                   + body)
        return try c.readResponse(method: "POST")
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    private func startCaching(_ extra: String = "") throws -> (Origin, LarderProcess) {
        let origin = try startOrigin()
        let config = try writeConfig("""
            upstream = "\(origin.url)"
            [[route]]
            prefix = "/echo"
            cache_post = true
            normalize_json = true
            uncached_rpc_methods = ["send"]
            \(extra)
            """)
        return (origin, try startLarder(upstream: origin.url, ["--config", config]))
    }

    func testEveryKindOfBodyNotReadAsQueriesReachesTheUpstreamEachTime() throws {
        let (origin, larder) = try startCaching()
        let c = try larder.client()
        let deep = String(repeating: #"{"a":"#, count: 70) + "1" + String(repeating: "}", count: 70)
        let kinds: [(String, [UInt8], String)] = [
            ("deep", Array((#"{"query":"mutation { like(id: 1) }","variables":"# + deep + "}").utf8), "application/json"),
            ("nan", Array(#"{"query":"mutation { like(id: 1) }","variables":{"x":NaN}}"#.utf8), "application/json"),
            ("bom", [0xEF, 0xBB, 0xBF] + Array(#"{"query":"mutation { like(id: 1) }"}"#.utf8), "application/json"),
            ("raw", Array("mutation { like(id: 1) }".utf8), "application/graphql"),
            ("rpc", Array((#"{"jsonrpc":"2.0","method":"send","params":"# + deep + #","id":1}"#).utf8), "application/json"),
            ("apq", Array(#"{"operationName":"Like","extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab12"}}}"#.utf8),
             "application/json"),
            ("other", Array(#"{"search":"shoes"}"#.utf8), "application/json"),
        ]
        for (name, body, type) in kinds {
            let target = "/echo?kind=\(name)"
            for _ in 0..<2 {
                let r = try post(c, target, body, type: type)
                XCTAssertEqual(r.status, 200, name)
                XCTAssertTrue(r.body == body, "\(name): the upstream's own answer")
                XCTAssertFalse(isHit(r), "\(name): \(r.header("cache-status") ?? "")")
            }
            XCTAssertEqual(try origin.count(target), 2, "\(name): both writes reached the upstream")
        }
        // Such a body is an unsafe request: it invalidates the URL's stored queries.
        let target = "/echo?kind=mixed"
        let query = Array(#"{"query":"{ user(id: 1) { name } }"}"#.utf8)
        _ = try post(c, target, query)
        XCTAssertTrue(isHit(try post(c, target, query)))
        _ = try post(c, target, kinds[1].1)
        XCTAssertFalse(isHit(try post(c, target, query)), "the write invalidated the stored query")
    }

    func testPersistedQueriesAreCachedOnlyWhenTheRouteSaysSo() throws {
        let (origin, larder) = try startCaching("cache_persisted_queries = true")
        let c = try larder.client()
        let body = Array(#"{"operationName":"Q","extensions":{"persistedQuery":{"version":1,"sha256Hash":"cd34"}}}"#.utf8)
        _ = try post(c, "/echo?apq=1", body)
        XCTAssertTrue(isHit(try post(c, "/echo?apq=1", body)))
        XCTAssertEqual(try origin.count("/echo?apq=1"), 1)
    }

    /// `{"id":1,"\u0069d":2}` (id 2 for a last-wins parser) and
    /// `{"\u0069d":2,"id":1}` (id 1) were normalised to one key: the second
    /// client got the first one's answer.
    func testBodiesThatRepeatAKeyNeverShareAnAnswer() throws {
        let (origin, larder) = try startCaching()
        let c = try larder.client()
        let first = Array(#"{"query":"query ($id: ID) { user(id: $id) { name } }","variables":{"id":1,"\u0069d":2}}"#.utf8)
        let second = Array(#"{"query":"query ($id: ID) { user(id: $id) { name } }","variables":{"\u0069d":2,"id":1}}"#.utf8)
        XCTAssertTrue(try post(c, "/echo?dup=1", first).body == first)
        let other = try post(c, "/echo?dup=1", second)
        XCTAssertTrue(other.body == second, "its own answer, never the first body's")
        XCTAssertFalse(isHit(other))
        XCTAssertEqual(try origin.count("/echo?dup=1"), 2)
        // Keys written with escapes are the same keys: one query, one entry.
        let plain = Array(#"{"query":"{ a }","variables":{"id":1}}"#.utf8)
        let escaped = Array(#"{"variables":{"\u0069d":1},"query":"{ a }"}"#.utf8)
        _ = try post(c, "/echo?esc=1", plain)
        XCTAssertTrue(isHit(try post(c, "/echo?esc=1", escaped)), "decoded keys compared")
    }
}

/// Issue 42's weaknesses, on the real binary. Each test failed before.
final class BypassAndExposureTests: ConfiguredTestCase {
    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    /// With client policies off, a client's no-cache (or Pragma) does not
    /// bypass the cache, as nginx and Varnish do not let it by default.
    func testWithoutClientPoliciesAClientCannotBypassTheCache() throws {
        let (origin, larder) = try start(config: "allow_client_policy = false\n")
        let c = try larder.client()
        XCTAssertEqual(try c.get("/cp/a").status, 200)
        for header in ["Cache-Control: no-cache", "Pragma: no-cache", "Cache-Control: max-age=0"] {
            XCTAssertTrue(isHit(try c.get("/cp/a", headers: [header])), header)
        }
        XCTAssertEqual(try origin.count("/cp/a"), 1)

        // With them on (the default), the client's no-cache still goes upstream (RFC 9111).
        let (open, openLarder) = try start(config: "")
        _ = try openLarder.client().get("/cp/b")
        XCTAssertFalse(isHit(try openLarder.client().get("/cp/b", headers: ["Cache-Control: no-cache"])))
        XCTAssertEqual(try open.count("/cp/b"), 2)
    }

    /// An ignored query parameter holding a ';' is not ignored: an origin
    /// that also splits on ';' reads another parameter in it, and a key
    /// without it would be a poisoned entry (`?x=1&utm=a;x=evil` stored as `?x=1`).
    func testIgnoredQueryParametersCannotCloakAnother() throws {
        let (origin, larder) = try start(config: """
            [[route]]
            prefix = "/q/"
            ignore_query_params = ["utm"]
            """)
        let c = try larder.client()
        XCTAssertEqual(try c.get("/q/a?x=1&utm=a").status, 200)
        XCTAssertTrue(isHit(try c.get("/q/a?x=1&utm=b")), "the ignored parameter is ignored")
        let cloaked = try c.get("/q/a?x=1&utm=a;x=evil")
        XCTAssertFalse(isHit(cloaked), "not the entry of ?x=1")
        XCTAssertEqual(try origin.count("/q/a?x=1&utm=a;x=evil"), 1)
        XCTAssertTrue(isHit(try c.get("/q/a?x=1&utm=a")), "the real entry is untouched")
    }

    /// Without a token (the default, on loopback) a web page could purge
    /// through its visitor's browser, and read /stats by DNS rebinding.
    func testTheAdminAPIRefusesCrossSiteAndRebindingRequests() throws {
        let (origin, larder) = try start(config: "admin_hosts = [\"cache-admin.test\"]\n")
        let c = try larder.client()
        _ = try c.get("/adm/a")
        let admin = try larder.adminClient()
        for header in ["Origin: https://evil.example", "Sec-Fetch-Site: cross-site", "Content-Type: application/x-www-form-urlencoded",
                       "Content-Type: text/plain;charset=UTF-8", "Origin: null"] {
            let r = try admin.request("POST", "/purge?all=true", headers: [header])
            XCTAssertEqual(r.status, 403, header)
        }
        XCTAssertTrue(isHit(try c.get("/adm/a")), "nothing was purged")
        func read(_ host: String) throws -> Int {
            try admin.send("GET /stats HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            return try admin.readResponse().status
        }
        XCTAssertEqual(try read("evil.example"), 403)
        XCTAssertEqual(try read("evil.example:\(larder.adminPort ?? 0)"), 403)
        for host in ["127.0.0.1:\(larder.adminPort ?? 0)", "localhost", "[::1]:8081", "cache-admin.test", "CACHE-ADMIN.test:1"] {
            XCTAssertEqual(try read(host), 200, host)
        }
        // Tools and same-origin pages go on.
        let page = "127.0.0.1:\(larder.adminPort ?? 0)"
        try admin.send("POST /purge?url=%2Fadm%2Fa HTTP/1.1\r\nHost: \(page)\r\nOrigin: http://\(page)\r\n"
                       + "Sec-Fetch-Site: same-origin\r\nContent-Length: 0\r\n\r\n")
        let sameOrigin = try admin.readResponse()
        XCTAssertEqual(sameOrigin.status, 200, sameOrigin.text)
        let tool = try startChild(Paths.larder, ["purge", "--all", "--admin", larder.adminURL])
        XCTAssertEqual(tool.waitForExit(timeout: 20), 0, tool.stderr)
        XCTAssertEqual(try origin.count("/adm/a"), 1)
    }

    /// A Redis password file others can read is accepted, with a warning
    /// (as ssh warns of a private key).
    func testAPasswordFileReadableByOthersIsWarnedAbout() throws {
        let file = temporaryPath("larder-redis-password")
        try "secret\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o644)
        let config = try writeConfig("""
            [fleet]
            redis = "redis://127.0.0.1:1"
            password_file = "\(file)"
            """)
        let check = try startChild(Paths.larder, ["check-config", "--config", config])
        XCTAssertEqual(check.waitForExit(timeout: 20), 0)
        XCTAssertTrue(check.stderr.contains("mode 0644") && check.stderr.contains("chmod 600"), check.stderr)
        chmod(file, 0o600)
        let quiet = try startChild(Paths.larder, ["check-config", "--config", config])
        XCTAssertEqual(quiet.waitForExit(timeout: 20), 0)
        XCTAssertFalse(quiet.stderr.contains("mode 0"), quiet.stderr)
    }
}
