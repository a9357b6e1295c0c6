import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A fleet on a replicated Redis: a real master, a replica and three real
/// sentinels (quorum 2, short timeouts). Killing the master under load, the
/// sentinels promote the replica, the nodes follow, no client request
/// fails, and every purge (sent before, during and after) reaches every
/// node, one restarted meanwhile too.
final class FleetSentinelTests: FleetTestCase {
    private var master: RedisServer!
    private var replica: RedisServer!
    private var sentinels: [RedisSentinel] = []

    /// The Redis password (master and replica) and the sentinels' own, when set.
    private var password: String?
    private var sentinelPassword: String?

    /// A master, its replica and three sentinels that see each other.
    private func startReplicatedRedis(password: String? = nil, sentinelPassword: String? = nil) throws {
        (self.password, self.sentinelPassword) = (password, sentinelPassword)
        let auth = password.map { ["--requirepass", $0, "--masterauth", $0] } ?? []
        master = try RedisServer(extra: auth)
        replica = try RedisServer(extra: auth + ["--replicaof", "127.0.0.1", String(master.port)])
        let (m, r) = (master!, replica!)
        addTeardownBlock { m.stop(); r.stop() }
        // Following, and acknowledging writes (WAIT counts it).
        XCTAssertTrue(waitUntil {
            self.info(m.port, "connected_slaves") == "1" && self.cli(m.port, ["WAIT", "1", "100"]).hasPrefix("1")
        }, "the replica follows the master")
        for _ in 0..<3 {
            sentinels.append(try RedisSentinel(monitoring: "cache", at: master.port, password: sentinelPassword, masterPassword: password))
        }
        let all = sentinels
        addTeardownBlock { all.forEach { $0.stop() } }
        // A failover needs each sentinel to know the replica and the two others (hello messages every 2 s).
        let ready = waitUntil(seconds: 30) {
            all.allSatisfy { self.sentinelField($0.port, "num-other-sentinels") == "2" && self.sentinelField($0.port, "num-slaves") == "1" }
        }
        XCTAssertTrue(ready, "the sentinels see each other and the replica: \(all.first?.log.suffix(2000) ?? "")")
    }

    override func fleetConfig(_ node: String, extra: String = "") throws -> String {
        try writeConfig("""
            [fleet]
            sentinels = [\(sentinels.map { "\"127.0.0.1:\($0.port)\"" }.joined(separator: ", "))]
            master = "cache"
            name = "ha"
            node = "\(node)"
            timeout = "500ms"
            connect_timeout = "500ms"
            \(extra)
            """)
    }

    private func cli(_ port: Int, _ arguments: [String]) -> String {
        let secret = sentinels.contains { $0.port == port } ? sentinelPassword : password
        let auth = secret.map { ["-a", $0, "--no-auth-warning"] } ?? []
        guard let child = try? startChild("/usr/bin/redis-cli", ["-p", String(port)] + auth + arguments), child.waitForExit(timeout: 10) == 0
        else { return "" }
        return child.stdout
    }

    private func info(_ port: Int, _ field: String) -> String? {
        cli(port, ["INFO", "replication"]).split(separator: "\r\n").flatMap { $0.split(separator: "\n") }
            .first { $0.hasPrefix(field + ":") }.map { String($0.dropFirst(field.count + 1)) }
    }

    /// A field of `SENTINEL master cache` (redis-cli prints names and values on alternate lines).
    private func sentinelField(_ port: Int, _ field: String) -> String? {
        let lines = cli(port, ["SENTINEL", "master", "cache"]).split(separator: "\n").map(String.init)
        guard let at = lines.firstIndex(of: field), at + 1 < lines.count else { return nil }
        return lines[at + 1]
    }

    private func waitUntil(seconds: TimeInterval, _ done: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if done() { return true }
            usleep(50_000)
        }
        return done()
    }

    private func masterInUse(_ l: LarderProcess) -> String? { (try? fleetStats(l))??["master"] as? String }

    func testNodesFollowAFailoverAndLoseNoPurge() throws {
        try startReplicatedRedis()
        let a = try node("a"), b = try node("b")
        let directory = temporaryPath("larder-sentinel-c")
        var c = try node("c", cacheDir: directory)
        for l in [a, b, c] { XCTAssertEqual(masterInUse(l), "redis://127.0.0.1:\(master.port)") }
        let targets = ["/ha/before", "/ha/during", "/ha/after"]
        for target in targets {
            for l in [a, b, c] { _ = try l.client().get(target) }
            for l in [a, b, c] { XCTAssertTrue(isHit(try l.client().get(target)), "\(target) stored on every node") }
        }
        XCTAssertTrue(waitUntil(seconds: 10) {
            let r = try? c.adminClient().request("GET", "/stats")
            let json = r.flatMap { try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any] }
            return ((json?["disk"] as? [String: Any])?["objects"] as? Int ?? 0) >= targets.count
        }, "c holds them on disk")

        // A purge before: every node has it, and the replica holds it (WAIT 1).
        let before = (try purge(a, "url=%2Fha%2Fbefore")["fleet"] as? [String: Any]) ?? [:]
        XCTAssertEqual(before["acknowledged"] as? Int, 3, "\(before): \(a.child.stderr.suffix(3000))")
        XCTAssertEqual(before["replicas"] as? Int, 1, "on the replica before the answer: \(before)")

        // Clients keep asking all along; none may fail.
        let load = ClientLoad(ports: [a.port, b.port])
        load.start()
        defer { load.stop() }

        // A sentinel may be gone (the one the nodes follow first): the others still elect and tell.
        sentinels[0].stop()
        master.stop()  // kill -9
        // A node stopped now comes back during the failover.
        kill(c.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(c.child.waitForExit(timeout: 20), 0)
        let during = try purge(b, "url=%2Fha%2Fduring")
        XCTAssertEqual(during["purged"] as? Int, 1, "applied on b at once: \(during)")
        c = try startLarder(upstream: origin.url, ["--config", try fleetConfig("c"), "--cache-dir", directory])

        let promoted = "redis://127.0.0.1:\(replica.port)"
        XCTAssertTrue(waitUntil(seconds: 30) { [a, b, c] in [a, b, c].allSatisfy { self.masterInUse($0) == promoted } },
                      "every node uses the promoted replica: \(sentinels[0].log.suffix(1500))")
        let after = (try purge(a, "url=%2Fha%2Fafter")["fleet"] as? [String: Any]) ?? [:]
        XCTAssertEqual(after["acknowledged"] as? Int, 3, "\(after)")
        // Fleet hits again, through the new master.
        XCTAssertFalse(isHit(try a.client().get("/ha/new")))
        XCTAssertTrue(waitUntil(seconds: 10) { self.cli(self.replica.port, ["EXISTS", "larder:ha:obj:/ha/new"]).hasPrefix("1") },
                      "a's fetch on the new master")
        XCTAssertTrue(isFleetHit(try b.client().get("/ha/new")), "b finds a's fetch on the new master")

        // The purge sent during the failover reached every node (b's went out once the new master was there).
        func received(_ l: LarderProcess) -> Int { (try? self.fleetStats(l))??["purges_received"] as? Int ?? 0 }
        XCTAssertTrue(waitUntil(seconds: 10) { received(a) >= 1 && received(c) >= 2 }, "a and c applied b's (c once back)")
        for (name, l) in [("a", a), ("b", b), ("c", c)] {
            for target in targets {
                // A copy one node fetched again since may be another's fleet hit, never a node's own old one.
                let r = try l.client().get(target)
                XCTAssertTrue(!isHit(r) || isFleetHit(r), "\(target) on node \(name): purged, \(r.header("cache-status") ?? "")")
            }
        }
        let stats = try fleetStats(a) ?? [:]
        XCTAssertEqual(stats["failovers"] as? Int, 1, "\(stats)")
        XCTAssertEqual(stats["sentinel"] as? Bool, true)
        XCTAssertGreaterThan(stats["seconds_without_master"] as? Double ?? 0, 0)
        let metrics = try a.adminClient().request("GET", "/metrics").text
        XCTAssertTrue(metrics.contains("larder_fleet_failovers_total 1"), metrics)

        load.stop()
        XCTAssertGreaterThan(load.answered, 20, "the load ran")
        XCTAssertEqual(load.failures, [], "no client request failed during the failover")
    }

    /// The promoted replica lacks a purge (its link was cut before it, so
    /// WAIT found no replica): the node that sent it sends it again to the
    /// new master, and a node that had read it (further than the new master
    /// holds) drops what it cannot prove fresh.
    func testANodeAheadOfThePromotedReplicaDropsWhatItHoldsAndTheSenderResends() throws {
        try startReplicatedRedis()
        let a = try node("a"), b = try node("b")
        for target in ["/lag/gone", "/lag/kept"] {
            for l in [a, b] { _ = try l.client().get(target) }
            XCTAssertTrue(isHit(try b.client().get(target)))
        }
        // The replica is cut off and cannot come back (the old master now wants a password it lacks).
        _ = cli(master.port, ["CONFIG", "SET", "requirepass", "cut"])
        _ = cli(master.port, ["-a", "cut", "--no-auth-warning", "CLIENT", "KILL", "TYPE", "replica"])
        let answer = (try purge(a, "url=%2Flag%2Fgone")["fleet"] as? [String: Any]) ?? [:]
        XCTAssertEqual(answer["acknowledged"] as? Int, 2, "\(answer)")
        XCTAssertEqual(answer["replicas"] as? Int, 0, "no replica holds it: \(answer)")
        master.stop()

        let promoted = "redis://127.0.0.1:\(replica.port)"
        XCTAssertTrue(waitUntil(seconds: 30) { [a, b] in [a, b].allSatisfy { self.masterInUse($0) == promoted } },
                      "both follow the promoted replica")
        func count(_ l: LarderProcess, _ key: String) -> Int { (try? self.fleetStats(l))??[key] as? Int ?? 0 }
        XCTAssertTrue(waitUntil(seconds: 10) { count(a, "purges_sent") >= 2 }, "a sent it again to the new master")
        XCTAssertEqual(cli(replica.port, ["EXISTS", "larder:ha:obj:/lag/gone"]).trimmingCharacters(in: .whitespacesAndNewlines), "0",
                       "the resent purge took the shared copy the replica still had")
        XCTAssertEqual(cli(replica.port, ["EXISTS", "larder:ha:obj:/lag/kept"]).trimmingCharacters(in: .whitespacesAndNewlines), "1")
        XCTAssertTrue(b.child.stderr.contains("dropping everything this node holds"), b.child.stderr.suffix(2000).description)
        for (name, l) in [("a", a), ("b", b)] {
            for target in ["/lag/gone", "/lag/kept"] {
                let r = try l.client().get(target)
                XCTAssertTrue(!isHit(r) || isFleetHit(r), "\(target) on \(name): nothing of its own kept, \(r.header("cache-status") ?? "")")
            }
        }
    }

    /// AUTH to the master and the replica (`password_file`) and to the
    /// sentinels (`sentinel_password_file`); a wrong sentinel password is a
    /// fault the node reports, not a crash.
    func testPasswordsForRedisAndTheSentinels() throws {
        try startReplicatedRedis(password: "redis-secret", sentinelPassword: "sentinel-secret")
        func secret(_ text: String) throws -> String {
            let path = temporaryPath("larder-secret")
            try (text + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o600)
            return path
        }
        let (redisFile, sentinelFile) = (try secret("redis-secret"), try secret("sentinel-secret"))
        let a = try node("a", extra: "password_file = \"\(redisFile)\"\nsentinel_password_file = \"\(sentinelFile)\"")
        XCTAssertEqual(masterInUse(a), "redis://127.0.0.1:\(master.port)")
        let answer = (try purge(a, "url=%2Fauth")["fleet"] as? [String: Any]) ?? [:]
        XCTAssertEqual(answer["replicas"] as? Int, 1, "\(answer)")

        let wrong = try secret("not-it")
        let b = try startLarder(upstream: origin.url, ["--config", try fleetConfig("b", extra: "password_file = \"\(redisFile)\"\nsentinel_password_file = \"\(wrong)\"")])
        XCTAssertTrue(waitUntil(seconds: 10) { ((try? self.fleetStats(b))??["last_error"] as? String ?? "").contains("sentinel") },
                      "\(String(describing: try? fleetStats(b)))")
        XCTAssertEqual((try fleetStats(b))?["connected"] as? Bool, false)
        XCTAssertEqual(try b.client().get("/auth").status, 200, "it serves alone")
    }

    func testABadSentinelConfigurationIsRefused() throws {
        let cases: [(String, String)] = [
            ("sentinels = [\"127.0.0.1:1\"]\nredis = \"redis://127.0.0.1:1\"\nmaster = \"m\"", "fleet.sentinels"),
            ("sentinels = [\"127.0.0.1:1\"]", "fleet.master"),
            ("sentinels = []\nmaster = \"m\"", "fleet.sentinels"),
            ("sentinels = [\"no port:x\"]\nmaster = \"m\"", "fleet.sentinels"),
            ("redis = \"redis://127.0.0.1:1\"\nmaster = \"m\"", "fleet.master"),
            ("redis = \"redis://127.0.0.1:1\"\nsentinel_password_file = \"/nonexistent\"", "fleet.sentinel_password_file"),
        ]
        for (table, key) in cases {
            let config = try writeConfig("[fleet]\n\(table)\n")
            let result = try runProgram([Paths.larder, "check-config", "--config", config])
            XCTAssertEqual(result.status, 78, table)
            XCTAssertTrue(result.stderr.contains(key), "\(table): \(result.stderr)")
        }
    }
}

/// Clients asking two nodes in turn on their own thread until stopped;
/// every answer that is not a 200 (or no answer) is a failure.
private final class ClientLoad: @unchecked Sendable {
    private let ports: [Int]
    private let lock = NSLock()
    private var stopping = false
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)
    private(set) var answered = 0
    private(set) var failures: [String] = []

    init(ports: [Int]) { self.ports = ports }

    func start() {
        let thread = Thread { [self] in
            var i = 0
            while !(lock.withLock { stopping }) {
                let port = ports[i % ports.count], target = "/load/\(i % 7)"
                i += 1
                do {
                    let r = try HTTPClient(port: port).get(target)
                    lock.withLock { if r.status == 200 { answered += 1 } else { failures.append("\(port) \(target): \(r.status)") } }
                } catch {
                    lock.withLock { failures.append("\(port) \(target): \(error)") }
                }
                usleep(20_000)
            }
            done.signal()
        }
        self.thread = thread
        thread.start()
    }

    func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            defer { stopping = true }
            return thread != nil && !stopping
        }
        if wasRunning { _ = done.wait(timeout: .now() + 20) }
    }
}
