import Foundation
import TestSupport
import XCTest

/// The fleet's shared tier with real nodes and a real redis-server: what
/// one node fetched is a hit on the others (the upstream asked once),
/// purges take it out of Redis too, a purge during a fetch keeps that
/// fetch out, and Redis speaking another protocol or answering errors
/// costs nothing but the shared tier.
final class FleetSharedTierTests: FleetTestCase {
    private func cacheStatus(_ r: HTTPResponse) -> String { r.header("cache-status") ?? "" }

    func testAMissOnOneNodeIsAFleetHitOnTheOthersAndTheUpstreamIsAskedOnce() throws {
        let a = try node("a"), b = try node("b"), c = try node("c")
        let path = "/shared/one?tags=red"
        let first = try a.client().get(path)
        XCTAssertEqual(first.status, 200)
        XCTAssertFalse(isHit(first))
        XCTAssertTrue(waitForSharedStores(a, 1), "a offered it to the fleet")

        let fromFleet = try b.client().get(path)
        XCTAssertEqual(fromFleet.status, 200)
        XCTAssertEqual(fromFleet.body, first.body)
        XCTAssertTrue(isFleetHit(fromFleet), cacheStatus(fromFleet))
        let promoted = try b.client().get(path)
        XCTAssertTrue(isHit(promoted) && !isFleetHit(promoted), "then a local hit on b: \(cacheStatus(promoted))")
        XCTAssertTrue(isFleetHit(try c.client().get(path)))
        XCTAssertEqual(try origin.count(path), 1, "one upstream request for three nodes")
        XCTAssertEqual(try fleetStats(c)?["shared_hits"] as? Int, 1)

        // A tag purge on any node takes it out of Redis too: a node that never held it misses.
        XCTAssertEqual((try purge(b, "tag=red")["fleet"] as? [String: Any])?["acknowledged"] as? Int, 3)
        let d = try node("d")
        XCTAssertFalse(isHit(try d.client().get(path)))
        XCTAssertEqual(try origin.count(path), 2)
    }

    func testEveryKindOfPurgeRemovesFromTheSharedTier() throws {
        let a = try node("a"), b = try node("b")
        let kinds: [(query: String, target: String)] = [
            ("url=%2Fs%2Furl%3Fx%3D1", "/s/url?x=1"), ("prefix=%2Fs%2Fpre", "/s/prefix/1"), ("tag=green", "/s/tagged?tags=green"),
            ("all=true", "/s/all"), ("url=%2Fs%2Fsoft&soft=true", "/s/soft"),
        ]
        for (index, (query, target)) in kinds.enumerated() {
            _ = try a.client().get(target)
            XCTAssertTrue(waitForSharedStores(a, index + 1), "\(target) in the shared tier")
            _ = try purge(a, query)
            let after = try b.client().get(target)
            XCTAssertFalse(isHit(after), "\(query): b, which never held \(target), finds nothing in Redis: \(cacheStatus(after))")
            XCTAssertEqual(try origin.count(target), 2, query)
        }
    }

    func testAPathPurgeWithVirtualHostsRemovesEveryHostsResponseFromTheSharedTier() throws {
        let routes = "\n[[route]]\nprefix = \"/\"\nhosts = [\"a.test\"]\n"
        let a = try node("a", extra: routes), b = try node("b", extra: routes)
        func get(_ node: LarderProcess, _ host: String) throws -> HTTPResponse {
            let client = try node.client()
            try client.send("GET /s/vh HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            return try client.readResponse()
        }
        _ = try get(a, "a.test")
        _ = try get(a, "other.test")
        XCTAssertTrue(waitForSharedStores(a, 2), "both hosts' responses in the shared tier")
        XCTAssertTrue(isFleetHit(try get(b, "a.test")), "keys carry the host across the fleet")
        XCTAssertEqual(try origin.count("/s/vh"), 2)
        _ = try purge(a, "url=%2Fs%2Fvh")
        for host in ["a.test", "other.test"] {
            XCTAssertFalse(isHit(try get(b, host)), "\(host): gone from b and from Redis")
        }
        XCTAssertEqual(try origin.count("/s/vh"), 4)
    }

    func testAURLPurgeRemovesItsCachedQueriesFromTheSharedTier() throws {
        let routes = "\n[[route]]\nprefix = \"/echo\"\ncache_post = true\n"
        let a = try node("a", extra: routes), b = try node("b", extra: routes)
        let query = #"{"query":"{ shared }"}"#
        func post(_ node: LarderProcess) throws -> HTTPResponse {
            let client = try node.client()
            try client.send("POST /echo?q=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(query.utf8.count)\r\n\r\n\(query)")
            return try client.readResponse(method: "POST")
        }
        XCTAssertEqual(try post(a).text, query)
        XCTAssertTrue(waitForSharedStores(a, 1), "the query's answer in the shared tier")
        let fromFleet = try post(b)
        XCTAssertTrue(isFleetHit(fromFleet), "a cached query is shared by its key: \(fromFleet.header("cache-status") ?? "")")
        XCTAssertEqual(fromFleet.text, query)
        _ = try purge(a, "url=%2Fecho%3Fq%3D1")
        let c = try node("c", extra: routes)
        XCTAssertFalse(isHit(try post(c)), "gone from Redis too")
        XCTAssertEqual(try origin.count("/echo?q=1"), 2)
    }

    func testACacheGroupInvalidationReachesEveryNodeAndTheSharedTier() throws {
        let a = try node("a"), b = try node("b")
        let groups = "extra=Cache-Groups:" + #""news""#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let invalidation = "extra=Cache-Group-Invalidation:" + #""news""#.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let path = "/cg/story?" + groups
        XCTAssertFalse(isHit(try a.client().get(path)))
        XCTAssertTrue(waitForSharedStores(a, 1), "a offered it to the fleet")
        XCTAssertTrue(isFleetHit(try b.client().get(path)))
        XCTAssertTrue(isHit(try b.client().get(path)), "held by b now")
        let received = try fleetStats(b)?["purges_received"] as? Int ?? -1

        // A write on a names the group: b drops its copy, Redis its own.
        XCTAssertEqual(try a.client().request("POST", "/cg/save?" + invalidation).status, 200)
        XCTAssertTrue(waitUntil { (try? self.fleetStats(b))??["purges_received"] as? Int ?? 0 > received }, "b hears of it")
        let after = try b.client().get(path)
        XCTAssertFalse(isHit(after), "b fetches again: \(cacheStatus(after))")
        XCTAssertEqual(try origin.count(path), 2, "b found it in neither its tiers nor Redis")
    }

    func testOnlyWhatFitsTheSharedTierAndIsStillUsableIsShared() throws {
        let a = try node("a", extra: "max_object_size = \"1KiB\""), b = try node("b", extra: "max_object_size = \"1KiB\"")
        _ = try a.client().get("/big?size=4000")
        _ = try a.client().get("/no-lifetime?cc=no-cache&etag=v1")
        _ = try a.client().get("/small?size=100")
        XCTAssertTrue(waitForSharedStores(a, 1))
        XCTAssertEqual(try fleetStats(a)?["shared_stores"] as? Int, 1, "only /small went to Redis")
        XCTAssertFalse(isHit(try b.client().get("/big?size=4000")))
        XCTAssertTrue(isFleetHit(try b.client().get("/small?size=100")))
        // Redis drops it when its lifetime (plus stale windows) is over.
        let ttl = Int(try redisCLI(["PTTL", "larder:e2e:obj:/small?size=100"]).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        XCTAssertTrue(ttl > 50_000 && ttl <= 60_000, "expires with its max-age=60: \(ttl) ms")
    }

    /// A body too large for the memory tier's objects streams to disk; it
    /// is shared all the same when the shared tier's limit takes it.
    func testAResponseStreamedToDiskIsSharedWhenItFitsTheSharedTier() throws {
        let a = try node("a", cacheDir: temporaryPath("fleet-stream-a"), arguments: ["--memory-limit", "64KiB"])
        let b = try node("b", cacheDir: temporaryPath("fleet-stream-b"), arguments: ["--memory-limit", "64KiB"])
        for path in ["/streamed?size=300000", "/streamed-chunked?size=300000&chunked=1"] {
            let first = try a.client().get(path)
            XCTAssertEqual(first.body.count, 300_000, path)
            XCTAssertTrue(waitUntil { (try? self.fleetStats(a))?["shared_stores"] as? Int == (path.contains("chunked") ? 2 : 1) },
                          "\(path) went to Redis")
            let onB = try b.client().get(path)
            XCTAssertTrue(isFleetHit(onB), "\(path): \(cacheStatus(onB))")
            XCTAssertEqual(onB.body, first.body, path)
            XCTAssertEqual(try origin.count(path), 1, path)
        }
    }

    func testAResponseRefreshedByA304IsSharedAgain() throws {
        let a = try node("a"), b = try node("b")
        let path = "/refreshed?cc=max-age%3D2&etag=v1"
        _ = try a.client().get(path)
        XCTAssertTrue(waitForSharedStores(a, 1))
        // Once stale on a (and gone from Redis), a's next request revalidates it: the 304's refresh goes to Redis.
        XCTAssertTrue(waitUntil { (try? a.client().get(path))?.header("cache-status")?.contains("fwd-status=304") ?? false })
        XCTAssertTrue(waitForSharedStores(a, 2))
        let onB = try b.client().get(path)
        XCTAssertTrue(isFleetHit(onB), onB.header("cache-status") ?? "")
        XCTAssertEqual(try origin.count(path), 2, "the first fetch and the revalidation")
    }

    func testAPurgeDuringAFetchKeepsThatFetchOutOfTheSharedTier() throws {
        let a = try node("a"), b = try node("b"), c = try node("c")
        let path = "/slow?delay=1"
        let done = DispatchSemaphore(value: 0)
        let client = try a.client()
        DispatchQueue.global().async {
            _ = try? client.get(path)
            done.signal()
        }
        XCTAssertTrue(waitUntil { (try? self.origin.count(path)) == 1 }, "a's fetch reached the origin")
        _ = try purge(b, "url=%2Fslow")
        XCTAssertEqual(done.wait(timeout: .now() + 15), .success)
        XCTAssertTrue(waitUntil { (try? self.fleetStats(a))?["shared_stores_refused"] as? Int == 1 },
                      "Redis refused what a fetched before the purge")
        XCTAssertFalse(isHit(try c.client().get(path)))
    }

    private func cli(_ arguments: [String]) throws -> (status: Int32?, out: String, err: String) {
        let child = try startChild(Paths.larder, arguments)
        let status = child.waitForExit(timeout: 30)
        child.drainOutput()
        return (status, child.stdout, child.stderr)
    }

    func testFleetStatusAndMetricsShowTheFleet() throws {
        let a = try node("a"), b = try node("b")
        _ = try a.client().get("/m")
        XCTAssertTrue(waitForSharedStores(a, 1))
        XCTAssertTrue(isFleetHit(try b.client().get("/m")))
        XCTAssertTrue(waitUntil { (try? self.fleetStats(b))?["nodes"] as? Int == 2 }, "b sees both nodes live")
        let status = try cli(["fleet", "status", "--admin", b.adminURL])
        XCTAssertEqual(status.status, 0, status.err)
        XCTAssertTrue(status.out.contains("fleet e2e, node b: connected to Redis"), status.out)
        XCTAssertTrue(status.out.contains("2 live nodes"), status.out)
        XCTAssertTrue(status.out.contains("lookups 1, found 1"), status.out)
        let json = try cli(["fleet", "status", "--json", "--admin", a.adminURL])
        let section = try JSONSerialization.jsonObject(with: Data(json.out.utf8)) as? [String: Any]
        XCTAssertEqual(section?["shared_stores"] as? Int, 1, json.out)
        // Both nodes run on this machine: Redis's clock and theirs agree to well within a second.
        let offset = try XCTUnwrap(section?["clock_offset_ms"] as? Int, json.out)
        XCTAssertLessThan(abs(offset), 1_000, json.out)
        XCTAssertTrue(status.out.contains("clock: ") && status.out.contains("Redis's"), status.out)

        let metrics = try b.adminClient().request("GET", "/metrics").text
        func value(_ name: String) -> Double? {
            metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
        }
        let expected: [(String, Double)] = [("larder_fleet_shared_hits_total", 1), ("larder_fleet_connected", 1), ("larder_fleet_nodes", 2),
                                            ("larder_fleet_shared_connections", 2), ("larder_fleet_purges_sent_total", 0)]
        for (name, wanted) in expected { XCTAssertEqual(value(name), wanted, "\(name) in /metrics") }
        XCTAssertGreaterThan(value("larder_fleet_redis_rtt_seconds") ?? 0, 0)
        XCTAssertLessThan(abs(try XCTUnwrap(value("larder_fleet_clock_offset_seconds"), metrics)), 1)
        let alone = try startLarder(upstream: origin.url)
        XCTAssertFalse(try alone.adminClient().request("GET", "/metrics").text.contains("larder_fleet"), "a node alone has no fleet metrics")
        let notInFleet = try cli(["fleet", "status", "--admin", alone.adminURL])
        XCTAssertEqual(notInFleet.status, 1)
        XCTAssertTrue(notInFleet.err.contains("not in a fleet"), notInFleet.err)
    }

    func testRedisErrorsAndAnotherProtocolCostOnlyTheSharedTier() throws {
        // Another program's value under a key Larder reads: an error reply, then a miss.
        let a = try node("a")
        try redisCLI(["SET", "larder:e2e:obj:/taken", "not a hash"])
        let r = try a.client().get("/taken")
        XCTAssertEqual(r.status, 200)
        XCTAssertFalse(isHit(r))
        XCTAssertTrue(isHit(try a.client().get("/taken")), "stored here all the same")
        XCTAssertTrue(waitUntil { (try? self.fleetStats(a))?["shared_errors"] as? Int ?? 0 >= 1 })

        // Something that is not Redis on the port (the origin's HTTP): the node serves alone and says why.
        let config = try writeConfig("[fleet]\nredis = \"redis://127.0.0.1:\(origin.port)\"\nname = \"e2e\"\nnode = \"lost\"\n")
        let alone = try startLarder(upstream: origin.url, ["--config", config])
        XCTAssertEqual(try alone.client().get("/alone").status, 200)
        XCTAssertTrue(isHit(try alone.client().get("/alone")))
        XCTAssertTrue(waitUntil { ((try? self.fleetStats(alone))?["last_error"] as? String)?.isEmpty == false })
        let status = try cli(["fleet", "status", "--admin", alone.adminURL])
        XCTAssertEqual(status.status, 1, "not connected: exit 1")
        XCTAssertTrue(status.out.contains("NOT connected"), status.out)
    }
}

/// Collapsing across nodes: concurrent misses for one slow URL on three
/// nodes reach the upstream once.
final class FleetCollapsingTests: FleetTestCase {
    func testConcurrentMissesSpreadOverThreeNodesReachTheUpstreamOnce() throws {
        let nodes = try ["a", "b", "c"].map { try node($0) }
        let path = "/slow-for-all?delay=0.5&size=2000"
        let clients = try (0..<30).map { try nodes[$0 % 3].client() }
        let group = DispatchGroup(), answers = Answers()
        for client in clients {
            group.enter()
            DispatchQueue.global().async {
                if let r = try? client.get(path), r.status == 200 { answers.add(r.body) }
                group.leave()
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(answers.bodies.count, 30, "every request answered")
        XCTAssertEqual(Set(answers.bodies).count, 1, "with the same body")
        XCTAssertEqual(try origin.count(path), 1, "one upstream request for the whole fleet")
    }
}

/// Bodies collected from several threads.
private final class Answers: @unchecked Sendable {
    private let lock = NSLock()
    private var collected: [[UInt8]] = []
    func add(_ body: [UInt8]) { lock.lock(); collected.append(body); lock.unlock() }
    var bodies: [[UInt8]] { lock.lock(); defer { lock.unlock() }; return collected }
}
