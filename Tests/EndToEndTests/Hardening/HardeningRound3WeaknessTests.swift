import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 42's weaknesses, on the real binary. Each test failed before.
final class HardeningRound3WeaknessTests: ConfiguredTestCase {
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

/// An upstream outage under load wrote three log lines per request at info
/// (two retries and the failure), none of them a warning: now one warning
/// per kind of fault every 10 s, with how many there were.
final class UpstreamOutageLogTests: ConfiguredTestCase {
    func testAnOutageIsLoggedOncePerIntervalWithCounts() throws {
        let dead = unusedPort()
        let larder = try startLarder(upstream: "http://127.0.0.1:\(dead)", ["--log-level", "info"])
        let c = try larder.client()
        for i in 0..<300 { XCTAssertEqual(try c.get("/down/\(i)").status, 502) }
        XCTAssertNotNil(larder.child.waitFor("(upstream error from http://127.0.0.1:\(dead): .* times since the last such line|upstream error from http://127.0.0.1:\(dead): .*once)"), "the server named")
        let lines = larder.child.stderr.split(separator: "\n").filter { $0.contains("upstream") && !$0.contains("listening on") }
        XCTAssertLessThanOrEqual(lines.count, 3, lines.prefix(5).joined(separator: "\n"))
        XCTAssertTrue(lines.allSatisfy { $0.contains("warning") }, lines.joined(separator: "\n"))
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

/// Held request bodies had no total bound: 2,000 connections each holding
/// a body just under request_buffer_size took 2 GB. Beyond
/// request_buffer_total, bodies stream as larger ones do, and are counted.
final class HeldBodyTotalTests: ConfiguredTestCase {
    func testBodiesBeyondTheTotalStreamAndAreCounted() throws {
        let (origin, larder) = try start(config: "request_buffer_size = \"1MiB\"\nrequest_buffer_total = \"2MiB\"\n")
        let length = 900 << 10
        let body = [UInt8](repeating: 0x62, count: length)
        var clients: [HTTPClient] = []
        for _ in 0..<5 {
            let c = try larder.client()
            try c.send(Array("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: \(length)\r\n\r\n".utf8) + body[0..<(100 << 10)])
            clients.append(c)
        }
        func streamed() throws -> Int {
            let r = try larder.adminClient().get("/stats")
            return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["streamed_request_bodies"] as? Int ?? -1
        }
        let deadline = Date().addingTimeInterval(10)
        while try streamed() < 3 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try streamed(), 3, "two bodies of 900 KiB fit 2 MiB; the other three stream")
        for c in clients {
            try c.send(Array(body[(100 << 10)...]))
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body.count, length, "every body reaches the upstream whole")
        }
        XCTAssertEqual(try origin.count("/echo"), 5)
    }
}
