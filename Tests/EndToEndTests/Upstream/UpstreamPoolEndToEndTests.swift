import Foundation
import TestSupport
import XCTest

/// Named upstreams against several origin processes: requests spread over
/// a pool's servers, a server that stops is left out while the others
/// answer, a route sends its requests to another pool, and /stats and
/// /metrics show each server.
final class UpstreamPoolEndToEndTests: ConfiguredTestCase {
    private func servers(_ larder: LarderProcess) throws -> [String: [String: Any]] {
        let r = try larder.adminClient().get("/stats")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        var out: [String: [String: Any]] = [:]
        for pool in json["upstreams"] as? [[String: Any]] ?? [] {
            for server in pool["servers"] as? [[String: Any]] ?? [] {
                out["\(pool["name"] as? String ?? "")|\(server["url"] as? String ?? "")"] = server
            }
        }
        return out
    }

    /// A pool with a server that accepts and never answers: a request sent
    /// to it waits upstream_timeout, then goes to the pool's next server
    /// (a third of them were 504s); the hung server is left out after it.
    func testARequestToAHungServerIsRetriedOnTheNextServer() throws {
        let hung = try SilentServer(), healthy = try startOrigin()
        let config = try writeConfig("""
            upstream = "api"
            upstream_timeout = "1s"

            [upstreams.api]
            servers = ["\(hung.url)", "\(healthy.url)"]
            fail_timeout = "60s"
            """)
        let larder = try startLarder(upstream: "api", ["--config", config, "--workers", "1"])
        let client = try larder.client()
        for i in 0..<4 {
            let r = try client.get("/hung/\(i)")
            XCTAssertEqual(r.status, 200, "request \(i): \(r.headers)")
        }
        XCTAssertEqual(try (0..<4).reduce(0) { $0 + (try healthy.count("/hung/\($1)")) }, 4, "every one answered by the healthy server")
        let figures = try XCTUnwrap(try servers(larder)["api|\(hung.url)"])
        XCTAssertEqual(figures["errors"] as? Int, 1, "one timeout, then left out")
        XCTAssertEqual(figures["marked_down"] as? Int, 1)
        XCTAssertEqual(figures["up"] as? Bool, false)
        XCTAssertNil(figures["healthy"], "no health check: no health to show")
        hung.stop()
    }

    func testRequestsSpreadOverAPoolAndAStoppedServerIsLeftOut() throws {
        let a = try startOrigin(), b = try startOrigin(), c = try startOrigin()
        let config = try writeConfig("""
            upstream = "api"

            [upstreams.api]
            servers = ["\(a.url)", "\(b.url)"]
            fail_timeout = "60s"

            [upstreams.other]
            servers = ["\(c.url)"]

            [[route]]
            prefix = "/other/"
            upstream = "other"
            """)
        let larder = try startLarder(upstream: "api", ["--config", config, "--workers", "1"])
        let client = try larder.client()
        for i in 0..<10 { XCTAssertEqual(try client.get("/pool/\(i)").status, 200) }
        let onA = try (0..<10).reduce(0) { $0 + (try a.count("/pool/\($1)")) }
        let onB = try (0..<10).reduce(0) { $0 + (try b.count("/pool/\($1)")) }
        XCTAssertEqual(onA + onB, 10)
        XCTAssertEqual(onA, 5, "round robin: every other request")
        XCTAssertEqual(try client.get("/other/x").status, 200)
        XCTAssertEqual(try c.count("/other/x"), 1, "the route's pool")
        XCTAssertEqual(try a.count("/other/x") + b.count("/other/x"), 0)

        // b stops: every request is still answered (a failed connection is
        // retried on the other server), and b is left out.
        b.stop()
        for i in 10..<20 {
            let r = try client.get("/pool/\(i)")
            XCTAssertEqual(r.status, 200, "request \(i): \(r.text)")
        }
        XCTAssertEqual(try (10..<20).reduce(0) { $0 + (try a.count("/pool/\($1)")) }, 10, "a answered them all")
        let figures = try servers(larder)
        let stopped = try XCTUnwrap(figures["api|\(b.url)"], "\(figures)")
        XCTAssertEqual(stopped["up"] as? Bool, false)
        XCTAssertEqual(stopped["errors"] as? Int, 1, "one failed connection, then left out")
        XCTAssertEqual(figures["api|\(a.url)"]?["up"] as? Bool, true)
        XCTAssertEqual(figures["api|\(a.url)"]?["requests"] as? Int, 15)
        XCTAssertEqual(figures["other|\(c.url)"]?["requests"] as? Int, 1)
        let metrics = try larder.adminClient().get("/metrics").text
        XCTAssertTrue(metrics.contains("larder_upstream_server_up{upstream=\"api\",server=\"\(b.url)\"} 0"), metrics)
        XCTAssertTrue(metrics.contains("larder_upstream_server_requests_total{upstream=\"other\",server=\"\(c.url)\"} 1"))
    }

    func testHashBalanceKeepsAURLOnOneServerAndBadNamesAreRefused() throws {
        let a = try startOrigin(), b = try startOrigin()
        let config = try writeConfig("""
            upstream = "api"
            [upstreams.api]
            servers = ["\(a.url)", "\(b.url)"]
            balance = "hash"
            """)
        let larder = try startLarder(upstream: "api", ["--config", config])
        let client = try larder.client()
        for _ in 0..<3 {
            for i in 0..<6 { XCTAssertEqual(try client.get("/hash/\(i)?cc=no-store").status, 200) }
        }
        for i in 0..<6 {
            let onA = try a.count("/hash/\(i)?cc=no-store"), onB = try b.count("/hash/\(i)?cc=no-store")
            XCTAssertTrue((onA == 3 && onB == 0) || (onA == 0 && onB == 3), "/hash/\(i): \(onA) on a, \(onB) on b")
        }
        for (text, message) in [("upstream = \"nowhere\"\n", "no [upstreams.nowhere] table"),
                                ("upstream = \"http://127.0.0.1:9\"\n[[route]]\nprefix = \"/a/\"\nupstream = \"api\"\n",
                                 "route.upstream: no [upstreams.api] table"),
                                ("[upstreams.api]\nservers = []\n", "upstreams.api.servers"),
                                ("[upstreams.api]\nservers = [\"http://127.0.0.1:9\"]\nbalance = \"random\"\n", "round_robin"),
                                ("[[route]]\nprefix = \"/\"\nhosts = [\"a.test:80\"]\n", "route.hosts: \"a.test:80\" is not a host name"),
                                ("[[route]]\nprefix = \"/\"\nhosts = []\n", "route.hosts: expected a list of host names"),
                                ("[[route]]\nprefix = \"/\"\nhosts = \"a.test\"\n", "route.hosts: expected a list of host names"),
                                ("[[route]]\nprefix = \"/\"\nnormalize_json = true\n",
                                 "route.normalize_json: only applies with cache_post = true"),
                                ("[[route]]\nprefix = \"/\"\ncache_post = true\nmax_post_body = \"1GiB\"\n",
                                 "route.max_post_body: expected a size from 1B to 16MiB"),
                                ("[[route]]\nprefix = \"/\"\ncache_post = true\nuncached_rpc_methods = [1]\n",
                                 "route.uncached_rpc_methods: expected a list of JSON-RPC method names")] {
            let check = try startChild(Paths.larder, ["check-config", "--config", try writeConfig(text)])
            XCTAssertEqual(check.waitForExit(timeout: 20), 78, text)
            check.drainOutput()
            XCTAssertTrue(check.stderr.contains(message), "\(text): \(check.stderr)")
        }
    }

    func testAnActiveHealthCheckLeavesOutAServerBeforeAnyRequestFails() throws {
        let a = try startOrigin(), b = try startOrigin()
        let config = try writeConfig("""
            upstream = "api"

            [upstreams.api]
            servers = ["\(a.url)", "\(b.url)"]
            health_check = "/health"
            health_interval = "200ms"
            """)
        let larder = try startLarder(upstream: "api", ["--config", config, "--workers", "1"])
        // Both healthy first (their health path answers 200), then b stops.
        XCTAssertGreaterThanOrEqual(try a.waitForCount("/health", atLeast: 1), 1, "the check asks each server")
        XCTAssertGreaterThanOrEqual(try b.waitForCount("/health", atLeast: 1), 1)
        XCTAssertEqual(try servers(larder)["api|\(b.url)"]?["healthy"] as? Bool, true)
        b.stop()
        XCTAssertTrue(waitUntil { (try? self.servers(larder))?["api|\(b.url)"]?["healthy"] as? Bool == false },
                      "the next check finds b gone")
        let client = try larder.client()
        for i in 0..<6 { XCTAssertEqual(try client.get("/checked/\(i)").status, 200) }
        let figures = try servers(larder)
        XCTAssertEqual(figures["api|\(b.url)"]?["requests"] as? Int, 0, "no client request went to b")
        XCTAssertEqual(figures["api|\(b.url)"]?["errors"] as? Int, 0)
        XCTAssertEqual(figures["api|\(a.url)"]?["requests"] as? Int, 6)
        XCTAssertNotNil(larder.child.waitFor("upstream api: \(NSRegularExpression.escapedPattern(for: b.url)) is unhealthy"),
                        larder.child.stderr)
    }

    func testAReloadKeepsTheServersFiguresAndStartsAHealthCheckItAdds() throws {
        let a = try startOrigin()
        let config = try writeConfig("upstream = \"api\"\n[upstreams.api]\nservers = [\"\(a.url)\"]\n")
        let larder = try startLarder(upstream: "api", ["--config", config])
        XCTAssertEqual(try larder.client().get("/reload/a").status, 200)
        try "upstream = \"api\"\n[upstreams.api]\nservers = [\"\(a.url)\"]\nhealth_check = \"/health\"\nhealth_interval = \"200ms\"\n"
            .write(toFile: config, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        XCTAssertGreaterThanOrEqual(try a.waitForCount("/health", atLeast: 2), 2, "checked from the reload on, without a restart")
        XCTAssertEqual(try servers(larder)["api|\(a.url)"]?["requests"] as? Int, 1, "the server's figures go on after the reload")
    }

    func testVirtualHostsChooseTheirRoutesAndKeepTheirOwnResponses() throws {
        let a = try startOrigin(), b = try startOrigin()
        let config = try writeConfig("""
            upstream = "\(a.url)"

            [upstreams.bees]
            servers = ["\(b.url)"]

            [[route]]
            prefix = "/"
            hosts = ["a.test"]

            [[route]]
            prefix = "/"
            hosts = ["*.b.test"]
            upstream = "bees"
            """)
        let larder = try startLarder(upstream: a.url, ["--config", config, "--workers", "1"])
        let client = try larder.client()
        func get(_ host: String) throws -> HTTPResponse {
            try client.send("GET /vh HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            return try client.readResponse()
        }
        func counts() throws -> [Int] { [try a.count("/vh"), try b.count("/vh")] }
        XCTAssertEqual(try get("A.test:80").status, 200)
        XCTAssertEqual(try get("eu.b.test").status, 200)
        XCTAssertEqual(try counts(), [1, 1], "each host went to its route's upstream: one's answer is not the other's")
        XCTAssertEqual(try get("a.test").status, 200)
        XCTAssertEqual(try get("EU.b.test:8080").status, 200)
        XCTAssertEqual(try counts(), [1, 1], "both hits")
        XCTAssertEqual(try get("other.test").status, 200)
        XCTAssertEqual(try counts(), [2, 1], "a host no route names: the default upstream, a key of its own")

        // A URL with a host purges that host's response; a path, every host's.
        let admin = try larder.adminClient()
        XCTAssertEqual(try admin.request("POST", "/purge?url=http%3A%2F%2Fa.test%2Fvh").status, 200)
        XCTAssertEqual(try get("a.test").status, 200)
        XCTAssertEqual(try get("eu.b.test").status, 200)
        XCTAssertEqual(try counts(), [3, 1], "a.test fetched again, eu.b.test still a hit")
        let purged = try admin.request("POST", "/purge?url=%2Fvh")
        XCTAssertTrue(purged.text.contains("\"purged\": 3"), purged.text)
        XCTAssertEqual(try get("eu.b.test").status, 200)
        XCTAssertEqual(try counts(), [3, 2])

        // An absolute-form target names the host, whatever Host says (RFC 9112 section 3.2.2).
        try client.send("GET http://eu.b.test/vh HTTP/1.1\r\nHost: a.test\r\n\r\n")
        let absolute = try client.readResponse()
        XCTAssertTrue(absolute.header("cache-status")?.hasPrefix("larder; hit") == true, "\(absolute.header("cache-status") ?? "")")
        XCTAssertEqual(try counts(), [3, 2], "eu.b.test's stored response, not a.test's")
        XCTAssertEqual(absolute.header("x-origin-count"), "2", "the second response b gave")
        let other = try larder.client()
        try other.send("GET /vh HTTP/1.1\r\nHost: a b.test\r\n\r\n")
        XCTAssertEqual(try other.readResponse().status, 400, "a Host that is no host name makes no key")
    }

    /// Polls (bounded) until `condition` holds.
    private func waitUntil(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline { return false }
            usleep(50_000)
        }
        return true
    }
}
