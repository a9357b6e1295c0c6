import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The admin API and `larder purge` / `larder stats` with the real binary.
/// Origin request counts prove what a purge removed.
final class AdminEndToEndTests: ConfiguredTestCase {
    var origin: Origin!
    var directory = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try startOrigin()
        directory = temporaryPath("larder-e2e-admin")
    }

    private func start(_ extra: [String] = [], environment: [String: String] = [:]) throws -> LarderProcess {
        try startLarder(upstream: origin.url, ["--cache-dir", directory] + extra, environment: environment)
    }

    private func restart(_ l: LarderProcess) throws -> LarderProcess {
        kill(l.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(l.child.waitForExit(timeout: 20), 0)
        return try start()
    }

    private func admin(_ l: LarderProcess, _ method: String, _ target: String, token: String? = nil) throws -> HTTPResponse {
        try l.adminClient().request(method, target, headers: token.map { ["Authorization: Bearer \($0)"] } ?? [])
    }

    /// The number in `{"name": N}`.
    private func count(_ name: String, _ r: HTTPResponse) -> Int? {
        (try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?[name] as? Int
    }

    /// Stored responses in the disk tier, from /stats.
    private func diskObjects(_ l: LarderProcess) -> Int {
        guard let r = try? admin(l, "GET", "/stats"),
              let json = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] else { return -1 }
        return (json["disk"] as? [String: Any])?["objects"] as? Int ?? -1
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    private func tokenFile(_ token: String) throws -> String {
        let path = directory + "-token"
        try (token + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    // MARK: purge kinds

    /// Every purge kind against entries in memory, then against entries
    /// only on disk (after a restart). `onDisk` picks which.
    private func checkPurgeKinds(onDisk: Bool) throws {
        var l = try start()
        let targets = ["/p/1?tags=red", "/p/2", "/q/1?ctag=red,blue", "/r/1", "/r/2"]
        for t in targets { XCTAssertEqual(try l.client().get(t).status, 200) }
        if onDisk { l = try restart(l) }
        let c = try l.client()
        func refetched(_ t: String) throws -> Bool {
            let before = try origin.count(t)
            _ = try c.get(t)
            return try origin.count(t) == before + 1
        }

        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=red")), 2)
        XCTAssertTrue(try refetched("/p/1?tags=red"))
        XCTAssertTrue(try refetched("/q/1?ctag=red,blue"))
        XCTAssertFalse(try refetched("/p/2"), "untagged entries stay")

        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?prefix=/p/")), 2)
        XCTAssertTrue(try refetched("/p/2"))
        XCTAssertTrue(try refetched("/p/1?tags=red"))
        XCTAssertFalse(try refetched("/r/1"))

        XCTAssertEqual(count("purged", try admin(l, "PURGE", "/r/1")), 1)
        XCTAssertTrue(try refetched("/r/1"))
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?url=%2Fr%2F2")), 1)
        XCTAssertTrue(try refetched("/r/2"))

        let all = try admin(l, "POST", "/purge?all=true")
        XCTAssertEqual(count("purged", all), targets.count)
        for t in targets { XCTAssertTrue(try refetched(t), t) }
    }

    func testEachPurgeKindInMemory() throws { try checkPurgeKinds(onDisk: false) }

    func testEachPurgeKindOnDiskAfterARestart() throws { try checkPurgeKinds(onDisk: true) }

    func testPurgeByURLRemovesEveryVariant() throws {
        let l = try start()
        let c = try l.client()
        let target = "/v?vary=Accept-Language"
        for lang in ["en", "fr", "de"] { _ = try c.get(target, headers: ["Accept-Language: \(lang)"]) }
        XCTAssertTrue(isHit(try c.get(target, headers: ["Accept-Language: fr"])))
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?url=http%3A%2F%2Fanything%2Fv%3Fvary%3DAccept-Language")), 3)
        for lang in ["en", "fr", "de"] { XCTAssertFalse(isHit(try c.get(target, headers: ["Accept-Language: \(lang)"])), lang) }
        XCTAssertEqual(try origin.count(target), 6)
    }

    // MARK: tags

    func testTagHeadersAreStrippedAndBothKindsTag() throws {
        let l = try start()
        let c = try l.client()
        let skey = "/t1?skey=alpha%20beta", ctag = "/t2?ctag=gamma,%20delta"
        for t in [skey, ctag] {
            for _ in 0..<2 {  // the miss and the hit
                let r = try c.get(t)
                XCTAssertNil(r.header("surrogate-key"), t)
                XCTAssertNil(r.header("cache-tag"), t)
            }
        }
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=beta")), 1)
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=delta")), 1)
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=alpha")), 0, "already gone")
        XCTAssertFalse(isHit(try c.get(skey)))
        XCTAssertFalse(isHit(try c.get(ctag)))
    }

    func testRouteTagsAndKeepingTagHeaders() throws {
        let config = directory + ".toml"
        try """
            strip_tag_headers = false
            [[route]]
            prefix = "/api/"
            tags = ["api", "v1"]
            """.write(toFile: config, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: config) }
        let l = try start(["--config", config])
        let c = try l.client()
        XCTAssertEqual(try c.get("/api/x?skey=own").header("surrogate-key"), "own", "strip_tag_headers = false passes them on")
        _ = try c.get("/other")
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=v1")), 1)
        XCTAssertFalse(isHit(try c.get("/api/x?skey=own")))
        XCTAssertTrue(isHit(try c.get("/other")))
    }

    // MARK: soft purge, races

    func testSoftPurgeCausesRevalidation() throws {
        let l = try start()
        let c = try l.client()
        let target = "/soft?etag=v1&tags=s"
        let first = try c.get(target)
        XCTAssertEqual(count("purged", try admin(l, "POST", "/purge?tag=s&soft=true")), 1)
        let revalidated = try c.get(target)
        XCTAssertEqual(revalidated.header("cache-status"), "larder; fwd=stale; fwd-status=304; stored")
        XCTAssertEqual(revalidated.body, first.body)
        XCTAssertEqual(try originHeaders(target)["if-none-match"], "\"v1\"", "a conditional request, not a plain refetch")
        XCTAssertTrue(isHit(try c.get(target)), "fresh again after the 304")
        XCTAssertEqual(try origin.count(target), 2)
    }

    private func originHeaders(_ target: String) throws -> [String: String] {
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        return Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
    }

    func testAPurgeDuringAFetchIsNotUndoneByIt() throws {
        let l = try start()
        let target = "/racing?delay=1.5"
        let done = expectation(description: "slow fetch answered")
        let port = l.port
        Thread {
            _ = try? HTTPClient(port: port).get(target)
            done.fulfill()
        }.start()
        // The fetch is at the origin (counted before its delay): purge now.
        let deadline = Date().addingTimeInterval(10)
        while try origin.count(target) < 1 && Date() < deadline { usleep(10_000) }
        XCTAssertEqual(try origin.count(target), 1)
        _ = try admin(l, "POST", "/purge?prefix=/racing")
        wait(for: [done], timeout: 20)
        let after = try l.client().get(target)
        XCTAssertFalse(isHit(after), "the response fetched across the purge was not stored")
        XCTAssertEqual(try origin.count(target), 2)
    }

    // MARK: memory, prune, stats, metrics

    func testMemoryClearKeepsTheDiskTier() throws {
        let l = try start()
        let c = try l.client()
        _ = try c.get("/m?size=2000")
        // The disk write happens in the background: wait (bounded) until it is there.
        let deadline = Date().addingTimeInterval(10)
        while diskObjects(l) < 1 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(diskObjects(l), 1)
        XCTAssertEqual(count("dropped", try admin(l, "POST", "/memory/clear")), 1)
        let again = try c.get("/m?size=2000")
        XCTAssertTrue(isHit(again), "served from the disk tier")
        XCTAssertEqual(try origin.count("/m?size=2000"), 1)
    }

    func testPruneByAge() throws {
        let l = try start()
        let c = try l.client()
        _ = try c.get("/old")
        XCTAssertEqual(count("pruned", try admin(l, "POST", "/prune?older-than=1h")), 0)
        // Everything stored more than 0 s ago: wait until /old is at least 1 s old.
        let stored = Date()
        while Date().timeIntervalSince(stored) < 1.1 { usleep(50_000) }
        XCTAssertEqual(count("pruned", try admin(l, "POST", "/prune?older-than=0s")), 1)
        XCTAssertFalse(isHit(try c.get("/old")))
    }

    func testStatsAndPrometheusMetrics() throws {
        let l = try start()
        let c = try l.client()
        _ = try c.get("/s1")
        _ = try c.get("/s1")
        _ = try c.get("/s2")
        let stats = try admin(l, "GET", "/stats")
        XCTAssertEqual(stats.status, 200)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        XCTAssertEqual(json["hits"] as? Int, 1)
        XCTAssertEqual(json["misses"] as? Int, 2)
        XCTAssertEqual((json["memory"] as? [String: Any])?["objects"] as? Int, 2)
        XCTAssertNotNil((json["disk"] as? [String: Any])?["limit_bytes"] as? Int)
        XCTAssertNotNil(json["uptime_seconds"] as? Int)

        let metrics = try admin(l, "GET", "/metrics")
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.header("content-type")?.hasPrefix("text/plain; version=0.0.4") ?? false)
        // Prometheus text format: comments, or `name value`.
        var values: [String: Double] = [:]
        var types: [String: String] = [:]
        for line in metrics.text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                types[String(parts[2])] = String(parts[3])
            } else if !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                XCTAssertEqual(parts.count, 2, String(line))
                let name = parts[0].prefix { $0 != "{" }
                XCTAssertNotNil(name.wholeMatch(of: #/[a-zA-Z_:][a-zA-Z0-9_:]*/#), String(line))
                values[String(parts[0])] = Double(parts[1])
            }
        }
        XCTAssertEqual(values["larder_hits_total"], 1)
        XCTAssertEqual(values["larder_misses_total"], 2)
        XCTAssertEqual(values["larder_memory_objects"], 2)
        XCTAssertEqual(types["larder_hits_total"], "counter")
        XCTAssertEqual(types["larder_memory_bytes"], "gauge")
        // Larder's own, and the process metrics under the names Prometheus' client libraries use.
        XCTAssertTrue(values.keys.allSatisfy { $0.hasPrefix("larder_") || $0.hasPrefix("process_") }, "\(values.keys)")

        XCTAssertEqual(try admin(l, "GET", "/healthz").text, "ok\n")
    }

    // MARK: authentication

    func testTheTokenIsRequiredWhenSet() throws {
        let l = try start(["--admin-token-file", try tokenFile("file-token-123")])
        XCTAssertEqual(try admin(l, "GET", "/stats").status, 401)
        XCTAssertEqual(try admin(l, "POST", "/purge?all=true", token: "wrong-token").status, 401)
        let stats = try admin(l, "GET", "/stats", token: "file-token-123")
        XCTAssertEqual(stats.status, 200)
        XCTAssertEqual(count("admin_failed_sign_ins", stats), 2, "both refusals counted")
        XCTAssertNotNil(l.child.waitFor("refused a request with a missing or wrong token \\(401\\).*GET /stats from 127.0.0.1"),
                        "a failed sign-in is logged, with who and what: \(l.child.stderr)")
    }

    /// The admin API is served by the proxy's HTTP/1.1 transport: requests
    /// pipelined on one connection are answered in order, a HEAD without
    /// its body; an unauthorized answer ends the connection, so a client
    /// without the token holds no descriptor.
    func testAdminRequestsArePipelinedAndAnUnauthorizedAnswerCloses() throws {
        let l = try start(["--admin-token-file", try tokenFile("pipe-token-1")])
        let c = try l.adminClient()
        let auth = "Authorization: Bearer pipe-token-1\r\n"
        try c.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nHEAD /stats HTTP/1.1\r\nHost: a\r\n\(auth)\r\n"
                   + "GET /stats HTTP/1.1\r\nHost: a\r\n\(auth)\r\n")
        XCTAssertEqual(try c.readResponse().text, "ok\n")
        let head = try c.readResponse(method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertTrue(head.body.isEmpty, "a HEAD's answer has no body")
        let stats = try c.readResponse()
        XCTAssertEqual(stats.status, 200)
        XCTAssertNotNil(head.header("content-length"), "a HEAD's length is said")
        XCTAssertNotNil(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any], "the third answer is /stats'")
        try c.send("GET /stats HTTP/1.1\r\nHost: a\r\n\r\n")
        let refused = try c.readResponse()
        XCTAssertEqual(refused.status, 401)
        XCTAssertEqual(refused.header("connection"), "close")
        XCTAssertTrue(c.isClosedByPeer())
    }

    func testTheTokenFromTheEnvironment() throws {
        let l = try start([], environment: ["LARDER_ADMIN_TOKEN": "env-token-456"])
        XCTAssertEqual(try admin(l, "GET", "/stats").status, 401)
        XCTAssertEqual(try admin(l, "GET", "/stats", token: "env-token-456").status, 200)
        XCTAssertEqual(try admin(l, "GET", "/healthz").status, 200, "health checks need no token")
    }

    func testAReadTokenForMonitoringAndHealthChecksThatMayNeedNone() throws {
        let config = try writeConfig("""
            admin_read_token_file = "\(try tokenFile("read-token-789"))"
            admin_healthz_public = false
            """)
        let l = try start(["--config", config], environment: ["LARDER_ADMIN_TOKEN": "admin-token-789"])
        XCTAssertEqual(try admin(l, "GET", "/metrics", token: "read-token-789").status, 200)
        XCTAssertEqual(try admin(l, "GET", "/stats", token: "read-token-789").status, 200)
        XCTAssertEqual(try admin(l, "POST", "/purge?all=true", token: "read-token-789").status, 401, "the read token cannot purge")
        XCTAssertEqual(try admin(l, "POST", "/purge?all=true", token: "admin-token-789").status, 200)
        XCTAssertEqual(try admin(l, "GET", "/healthz").status, 401, "admin_healthz_public = false")
        XCTAssertEqual(try admin(l, "GET", "/healthz", token: "read-token-789").status, 200)
    }

    func testANonLoopbackAdminAddressWithoutATokenIsRefused() throws {
        let child = try ChildProcess(Paths.larder, ["serve", "--listen", "127.0.0.1:0", "--upstream", origin.url,
                                                    "--admin-listen", "0.0.0.0:0"], environment: ["LARDER_ADMIN_TOKEN": ""])
        XCTAssertEqual(child.waitForExit(timeout: 15), 78)
        XCTAssertNotNil(child.waitFor("not a loopback address and no admin token", timeout: 2), child.stderr)
    }

    func testTheAdminAPICanBeTurnedOff() throws {
        let l = try start(["--admin-listen", "none"])
        XCTAssertNil(l.adminPort)
        XCTAssertEqual(try l.client().get("/x").status, 200)
    }

    // MARK: command line

    private func cli(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32?, out: String, err: String) {
        let child = try ChildProcess(Paths.larder, arguments, environment: environment)
        let status = child.waitForExit(timeout: 30)
        if status == nil { child.stop() }
        child.drainOutput()
        return (status, child.stdout, child.stderr)
    }

    func testPurgeAndStatsCommands() throws {
        let token = "cli-token-789"
        let file = try tokenFile(token)
        let l = try start(["--admin-token-file", file])
        let c = try l.client()
        _ = try c.get("/cli/a?tags=grp")
        _ = try c.get("/cli/b?x=1")

        var r = try cli(["purge", "/cli/b?x=1", "--admin", l.adminURL, "--admin-token-file", file])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "purged 1 stored response\n")
        r = try cli(["purge", "--tag", "grp", "--soft", "--admin", l.adminURL], environment: ["LARDER_ADMIN_TOKEN": token])
        XCTAssertEqual(r.status, 0, r.err)
        XCTAssertEqual(r.out, "marked stale 1 stored response\n")
        XCTAssertFalse(isHit(try c.get("/cli/b?x=1")))

        r = try cli(["stats", "--admin", l.adminURL, "--admin-token-file", file])
        XCTAssertEqual(r.status, 0, r.err)
        let json = try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any]
        XCTAssertNotNil(json?["hits"])

        // Refused token: 77. No token at all: also 77.
        r = try cli(["stats", "--admin", l.adminURL], environment: ["LARDER_ADMIN_TOKEN": "nope"])
        XCTAssertEqual(r.status, 77, r.err)
        XCTAssertTrue(r.err.contains("refused the token"), r.err)
        r = try cli(["purge", "--all", "--admin", l.adminURL], environment: ["LARDER_ADMIN_TOKEN": ""])
        XCTAssertEqual(r.status, 77, r.err)

        // Nothing listening: 69.
        let closed = unusedPort()
        r = try cli(["stats", "--admin", "http://127.0.0.1:\(closed)"])
        XCTAssertEqual(r.status, 69, r.err)
        XCTAssertTrue(r.err.contains("cannot reach the admin API"), r.err)

        // Bad usage: 64.
        XCTAssertEqual(try cli(["purge", "--prefix", "/a", "--tag", "b"]).status, 64)
        XCTAssertEqual(try cli(["purge"]).status, 64)
    }
}
