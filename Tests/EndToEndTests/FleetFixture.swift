import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Nodes of a fleet on one real redis-server, started per test.
class FleetTestCase: ConfiguredTestCase {
    var origin: Origin!
    var redis: RedisServer!

    override func setUpWithError() throws {
        try super.setUpWithError()
        origin = try startOrigin()
        redis = try RedisServer(extra: ["--appendonly", "yes"])
        let server = redis!
        addTeardownBlock { server.stop() }
    }

    func fleetConfig(_ node: String, extra: String = "") throws -> String {
        try writeConfig("""
            [fleet]
            redis = "redis://127.0.0.1:\(redis.port)"
            name = "e2e"
            node = "\(node)"
            \(extra)
            """)
    }

    /// A node, once it reads the fleet's purges (its `/stats` says so).
    func node(_ name: String, cacheDir: String? = nil, extra: String = "", arguments: [String] = []) throws -> LarderProcess {
        let l = try startLarder(upstream: origin.url,
                                ["--config", try fleetConfig(name, extra: extra)] + (cacheDir.map { ["--cache-dir", $0] } ?? []) + arguments)
        XCTAssertTrue(waitUntil {
            let stats = try? self.fleetStats(l)
            return stats?["connected"] as? Bool == true && stats?["shared_connections"] as? Int == 2
        }, "node \(name) joins the fleet (its two workers too)")
        return l
    }

    func fleetStats(_ l: LarderProcess) throws -> [String: Any]? {
        let r = try l.adminClient().request("GET", "/stats")
        return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["fleet"] as? [String: Any]
    }

    /// Bounded: 10 s.
    func waitUntil(_ done: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if done() { return true }
            usleep(20_000)
        }
        return done()
    }

    func purge(_ l: LarderProcess, _ query: String) throws -> [String: Any] {
        let r = try l.adminClient().request("POST", "/purge?" + query)
        XCTAssertEqual(r.status, 200, r.text)
        return try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any] ?? [:]
    }

    func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }
    func isFleetHit(_ r: HTTPResponse) -> Bool { isHit(r) && (r.header("cache-status")?.contains("detail=fleet") ?? false) }

    /// Waits (bounded) until `l`'s shared tier has taken `count` responses.
    func waitForSharedStores(_ l: LarderProcess, _ count: Int) -> Bool {
        waitUntil { (try? self.fleetStats(l))?["shared_stores"] as? Int ?? 0 >= count }
    }

    /// Runs redis-cli against the test's Redis; its output.
    @discardableResult
    func redisCLI(_ arguments: [String]) throws -> String {
        let child = try startChild("/usr/bin/redis-cli", ["-p", String(redis.port)] + arguments)
        XCTAssertEqual(child.waitForExit(timeout: 10), 0, "redis-cli \(arguments)")
        return child.stdout
    }

}
