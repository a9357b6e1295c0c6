import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Three `larder serve` nodes sharing one real redis-server (`[fleet]`):
/// a purge on one node reaches the others before its answer, a node that
/// was stopped never serves what was purged meanwhile, Redis going away
/// stops nothing but the fan-out, and a bad fleet configuration is refused.
final class FleetEndToEndTests: ConfiguredTestCase {
    private var origin: Origin!
    private var redis: RedisServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try startOrigin()
        redis = try RedisServer(extra: ["--appendonly", "yes"])
        let server = redis!
        addTeardownBlock { server.stop() }
    }

    private func fleetConfig(_ node: String, extra: String = "") throws -> String {
        try writeConfig("""
            [fleet]
            redis = "redis://127.0.0.1:\(redis.port)"
            name = "e2e"
            node = "\(node)"
            \(extra)
            """)
    }

    /// A node, once it reads the fleet's purges (its `/stats` says so).
    private func node(_ name: String, cacheDir: String? = nil) throws -> LarderProcess {
        let l = try startLarder(upstream: origin.url, ["--config", try fleetConfig(name)] + (cacheDir.map { ["--cache-dir", $0] } ?? []))
        XCTAssertTrue(waitUntil { (try? self.fleetStats(l))?["connected"] as? Bool == true }, "node \(name) joins the fleet")
        return l
    }

    private func fleetStats(_ l: LarderProcess) throws -> [String: Any]? {
        let r = try l.adminClient().request("GET", "/stats")
        return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["fleet"] as? [String: Any]
    }

    /// Bounded: 10 s.
    private func waitUntil(_ done: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if done() { return true }
            usleep(20_000)
        }
        return done()
    }

    private func purge(_ l: LarderProcess, _ query: String) throws -> [String: Any] {
        let r = try l.adminClient().request("POST", "/purge?" + query)
        XCTAssertEqual(r.status, 200, r.text)
        return try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] ?? [:]
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    func testAPurgeOnOneNodeReachesEveryNodeBeforeItsAnswer() throws {
        let nodes = try ["a", "b", "c"].map { try node($0) }
        let kinds: [(query: String, target: String)] = [
            ("url=%2Fk%2Furl", "/k/url"), ("prefix=%2Fk%2Fpre", "/k/prefix-1"), ("tag=blue", "/k/tagged?tags=blue"), ("all=true", "/k/all"),
        ]
        for (query, target) in kinds {
            for l in nodes {
                _ = try l.client().get(target)
                XCTAssertTrue(isHit(try l.client().get(target)), "\(target) stored on every node")
            }
            let answer = try purge(nodes[0], query)
            XCTAssertEqual(answer["purged"] as? Int, 1, "\(query): purged here")
            let fleet = answer["fleet"] as? [String: Any]
            XCTAssertEqual(fleet?["nodes"] as? Int, 3, "\(query): \(answer)")
            XCTAssertEqual(fleet?["acknowledged"] as? Int, 3, "\(query): every node applied it before the answer")
            for l in nodes.dropFirst() {
                XCTAssertFalse(isHit(try l.client().get(target)), "\(query): \(target) purged on the other nodes too")
            }
        }
        XCTAssertEqual(try fleetStats(nodes[1])?["purges_received"] as? Int, kinds.count)
        XCTAssertEqual(try fleetStats(nodes[0])?["purges_sent"] as? Int, kinds.count)
    }

    func testANodeStoppedDuringAPurgeNeverServesThePurgedResponse() throws {
        let a = try node("a")
        let directory = temporaryPath("larder-fleet-b")
        var b = try node("b", cacheDir: directory)
        _ = try b.client().get("/gone")
        XCTAssertTrue(isHit(try b.client().get("/gone")))
        let storedOnDisk = waitUntil {
            let r = try? b.adminClient().request("GET", "/stats")
            let json = r.flatMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
            return ((json?["disk"] as? [String: Any])?["objects"] as? Int ?? 0) >= 1
        }
        XCTAssertTrue(storedOnDisk)
        kill(b.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(b.child.waitForExit(timeout: 20), 0)

        let answer = try purge(a, "url=%2Fgone")
        XCTAssertEqual((answer["fleet"] as? [String: Any])?["acknowledged"] as? Int, 1, "only a applied it: \(answer)")

        let before = try origin.count("/gone")
        b = try node("b", cacheDir: directory)
        XCTAssertFalse(isHit(try b.client().get("/gone")), "b applied the purge it missed before serving from disk")
        XCTAssertEqual(try origin.count("/gone"), before + 1)
    }

    func testNodesKeepServingWithoutRedisAndFanOutResumesWhenItIsBack() throws {
        let a = try node("a"), b = try node("b")
        _ = try b.client().get("/later")
        let port = redis.port, directory = redis.directory
        redis.stop()
        XCTAssertTrue(waitUntil { (try? self.fleetStats(a))?["connected"] as? Bool == false })
        XCTAssertTrue(isHit(try b.client().get("/later")), "hits go on")
        XCTAssertEqual(try a.client().get("/miss-without-redis").status, 200, "misses go on")
        let queued = try purge(a, "url=%2Flater")
        XCTAssertEqual((queued["fleet"] as? [String: Any])?["queued"] as? Bool, true, "\(queued)")

        let back = try RedisServer(extra: ["--appendonly", "yes"], port: port, directory: directory)
        addTeardownBlock { back.stop() }
        XCTAssertTrue(waitUntil { !self.isHit((try? b.client().get("/later")) ?? HTTPResponse(status: 0, headers: [], body: [])) },
                      "the purge held while Redis was down reaches b once it is back")
        XCTAssertTrue(waitUntil { (try? self.fleetStats(a))?["connected"] as? Bool == true })
        _ = try b.client().get("/again")
        XCTAssertTrue(isHit(try b.client().get("/again")))
        let answer = try purge(a, "url=%2Fagain")
        XCTAssertEqual((answer["fleet"] as? [String: Any])?["acknowledged"] as? Int, 2, "\(answer)")
        XCTAssertFalse(isHit(try b.client().get("/again")))
    }

    func testABadFleetConfigurationIsRefused() throws {
        func refusal(_ config: String) throws -> String {
            let child = try startChild(Paths.larder, ["check-config", "--config", try writeConfig(config)])
            XCTAssertEqual(child.waitForExit(timeout: 20), 78, config)
            return child.stderr
        }
        XCTAssertTrue(try refusal("[fleet]\nname = \"x\"\n").contains("needs redis"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"http://127.0.0.1\"\n").contains("unknown scheme"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\nnode = \"a b\"\n").contains("fleet.node"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\ntimeout = \"forever\"\n").contains("fleet.timeout"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\nreplicas = 3\n").contains("unknown fleet key"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://10.1.2.3\"\n").contains("no password"),
                      "Redis other machines reach needs a password")

        // serve refuses it too, before listening; a wrong password is a fault to log, not a refusal.
        let open = try startChild(Paths.larder, ["serve", "--upstream", origin.url, "--listen", "127.0.0.1:0", "--admin-listen", "none",
                                                 "--config", try writeConfig("[fleet]\nredis = \"redis://10.1.2.3\"\n")])
        XCTAssertEqual(open.waitForExit(timeout: 20), 78)
        let passwordFile = temporaryPath("larder-redis-password")
        try "wrong\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let l = try startLarder(upstream: origin.url, ["--config", try fleetConfig("p", extra: "password_file = \"\(passwordFile)\"")])
        XCTAssertEqual(try l.client().get("/served").status, 200, "a node Redis refuses still serves")
        XCTAssertTrue(waitUntil { ((try? self.fleetStats(l))?["last_error"] as? String)?.contains("AUTH") ?? false })
    }
}
