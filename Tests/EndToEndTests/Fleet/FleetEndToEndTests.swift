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
final class FleetEndToEndTests: FleetTestCase {
    func testAPurgeOnOneNodeReachesEveryNodeBeforeItsAnswer() throws {
        let nodes = try ["a", "b", "c"].map { try node($0) }
        let kinds: [(query: String, target: String)] = [
            ("url=%2Fk%2Furl", "/k/url"), ("prefix=%2Fk%2Fpre", "/k/prefix-1"), ("tag=blue", "/k/tagged?tags=blue"), ("all=true", "/k/all"),
            // Regular expressions: the shared tier drops the anchored one's literal prefix, or everything.
            ("regex=" + "^/k/re[0-9]$".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, "/k/re1"),
            ("regex=" + "q=[a-z]+$".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!, "/k/anywhere?q=abc"),
        ]
        for (query, target) in kinds {
            for l in nodes {
                _ = try l.client().get(target)
                XCTAssertTrue(isHit(try l.client().get(target)), "\(target) stored on every node")
            }
            let fetched = try origin.count(target)
            let answer = try purge(nodes[0], query)
            XCTAssertEqual(answer["purged"] as? Int, 1, "\(query): purged here")
            let fleet = answer["fleet"] as? [String: Any]
            XCTAssertEqual(fleet?["nodes"] as? Int, 3, "\(query): \(answer)")
            XCTAssertEqual(fleet?["acknowledged"] as? Int, 3, "\(query): every node applied it before the answer")
            // Gone from b and from the shared tier; c may then have b's new copy from the fleet, never its own old one.
            XCTAssertFalse(isHit(try nodes[1].client().get(target)), "\(query): \(target) purged on b and in Redis")
            let onC = try nodes[2].client().get(target)
            XCTAssertTrue(!isHit(onC) || isFleetHit(onC), "\(query): \(target) purged on c: \(onC.header("cache-status") ?? "")")
            XCTAssertEqual(try origin.count(target), fetched + (isFleetHit(onC) ? 1 : 2))
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
        XCTAssertEqual((answer["fleet"] as? [String: Any])?["nodes"] as? Int, 1, "b left the fleet as it stopped: \(answer)")

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
        // larder purge says so, and fails.
        let tool = try startChild(Paths.larder, ["purge", "/later", "--admin", a.adminURL])
        XCTAssertEqual(tool.waitForExit(timeout: 20), 69)
        tool.drainOutput()
        XCTAssertTrue(tool.stderr.contains("only queued for the fleet"), tool.stderr)

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
        let applied = try startChild(Paths.larder, ["purge", "/again", "--admin", a.adminURL])
        XCTAssertEqual(applied.waitForExit(timeout: 20), 0, applied.stderr)
        applied.drainOutput()
        XCTAssertTrue(applied.stdout.contains("fleet: applied by 2 of 2 nodes"), applied.stdout)
    }

    /// `rediss://`: the fleet over TLS to a Redis whose certificate the
    /// configured authority signed; purges and the shared tier go through it.
    func testAFleetOverTLSToRedis() throws {
        let dir = temporaryPath("larder-redis-tls")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let certificate = try selfSignedCertificate(in: dir, names: "IP:127.0.0.1")
        let secure = try RedisServer(tls: certificate)
        addTeardownBlock { secure.stop() }
        func tlsNode(_ name: String) throws -> LarderProcess {
            let config = try writeConfig("""
                [fleet]
                redis = "rediss://127.0.0.1:\(secure.tlsPort!)"
                tls_ca_file = "\(certificate.cert)"
                name = "tls"
                node = "\(name)"
                """)
            let l = try startLarder(upstream: origin.url, ["--config", config])
            XCTAssertTrue(waitUntil { (try? self.fleetStats(l))??["connected"] as? Bool == true }, "\(name) joins over TLS")
            return l
        }
        let a = try tlsNode("a"), b = try tlsNode("b")
        XCTAssertEqual((try fleetStats(a))?["master"] as? String, "rediss://127.0.0.1:\(secure.tlsPort!)")
        _ = try a.client().get("/tls/one")
        XCTAssertTrue(waitForSharedStores(a, 1))
        XCTAssertTrue(isFleetHit(try b.client().get("/tls/one")), "b finds a's fetch in Redis, over TLS")
        let answer = (try purge(b, "url=%2Ftls%2Fone")["fleet"] as? [String: Any]) ?? [:]
        XCTAssertEqual(answer["acknowledged"] as? Int, 2, "\(answer)")
        XCTAssertFalse(isHit(try a.client().get("/tls/one")))

        // The system's authorities do not vouch for this certificate: a fault the node reports while serving alone.
        let untrusting = try startLarder(upstream: origin.url, ["--config", try writeConfig(
            "[fleet]\nredis = \"rediss://127.0.0.1:\(secure.tlsPort!)\"\nname = \"tls\"\nnode = \"c\"\n")])
        XCTAssertTrue(waitUntil { ((try? self.fleetStats(untrusting))??["last_error"] as? String ?? "").contains("certificate") },
                      "\(String(describing: try? fleetStats(untrusting)))")
        XCTAssertEqual(try untrusting.client().get("/tls/two").status, 200)
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
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\nmax_object_size = \"huge\"\n").contains("fleet.max_object_size"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\nmax_object_size = \"1GiB\"\n").contains("64MiB"))
        XCTAssertTrue(try refusal("[fleet]\nredis = \"redis://127.0.0.1\"\ntls_ca_file = \"/etc/ca.pem\"\n").contains("fleet.tls_ca_file"),
                      "authorities for a Redis without TLS")
        XCTAssertTrue(try refusal("[fleet]\nredis = \"rediss://127.0.0.1\"\ntls_ca_file = \"/nonexistent/ca.pem\"\n")
            .contains("fleet.tls_ca_file"), "authorities that cannot be read")
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
