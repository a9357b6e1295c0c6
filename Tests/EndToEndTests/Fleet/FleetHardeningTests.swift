import CacheStorage
import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 42's fleet defects, on real nodes and a real redis-server.
final class FleetHardeningTests: FleetTestCase {
    /// A record in the shared tier whose times are near Int64.min (planted
    /// by anyone who can write to Redis) made the node that looked it up
    /// die of an overflow trap. Now it is not Larder's record: skipped, and
    /// the response fetched.
    func testARecordWithExtremeTimesInRedisDoesNotCrashANode() throws {
        let a = try node("a")
        let target = "/hostile?cc=max-age%3D600"
        XCTAssertEqual(try a.client().get(target).status, 200)
        XCTAssertTrue(waitForSharedStores(a, 1))
        let redisClient = try HTTPClient(port: redis.port)
        let keys = try redisClient.redis(["KEYS", "larder:e2e:obj:*"]).elements.compactMap(\.bytes)
        XCTAssertEqual(keys.count, 1)
        let fields = try redisClient.redis([Array("HGETALL".utf8), keys[0]]).elements.compactMap(\.bytes)
        XCTAssertEqual(fields.count, 2)
        var record = try DiskFormat.decode(fields[1])
        record.head.timing.requestTime = Int64.min + 1
        record.head.timing.responseTime = Int64.min + 2
        record.head.timing.dateValue = Int64.max - 3
        record.storedAt = Int64.min + 4
        _ = try redisClient.redis([Array("HSET".utf8), keys[0], fields[0], DiskFormat.encode(record)])

        let b = try node("b")
        let answer = try b.client().get(target)
        XCTAssertEqual(answer.status, 200)
        XCTAssertFalse(isFleetHit(answer), "the planted record is not served")
        XCTAssertTrue(b.child.process.isRunning, "the node is alive")
        XCTAssertEqual(try b.client().get("/after").status, 200)
    }

    /// A fleet that never purged: a restarted node keeps what its disk
    /// holds (it dropped everything, "Redis lost its data").
    func testARestartedNodeOfAFleetThatNeverPurgedKeepsItsDisk() throws {
        let directory = temporaryPath("larder-fleet-keep")
        var a = try node("a", cacheDir: directory)
        let targets = (0..<5).map { "/keep/\($0)?cc=max-age%3D600" }
        for target in targets { XCTAssertEqual(try a.client().get(target).status, 200) }
        XCTAssertTrue(waitUntil { (try? self.diskObjects(a)) ?? 0 >= 5 })
        kill(a.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(a.child.waitForExit(timeout: 20), 0)

        a = try node("a", cacheDir: directory)
        for target in targets {
            let r = try a.client().get(target)
            XCTAssertTrue(isHit(r) && !isFleetHit(r), "\(target) from the node's own disk: \(r.header("cache-status") ?? "")")
            XCTAssertEqual(try origin.count(target), 1)
        }
        XCTAssertFalse(a.child.stderr.contains("dropping everything"), a.child.stderr)
    }

    /// Redis restarted without its data while a node was stopped, after a
    /// purge: the node must not serve the purged copy from its disk. Its
    /// remembered fleet identity is not the new Redis's, so it drops what
    /// it holds first.
    func testANodeDoesNotServeAPurgedResponseAfterRedisLostItsData() throws {
        let a = try node("a")
        let directory = temporaryPath("larder-fleet-lost")
        var b = try node("b", cacheDir: directory)
        let target = "/f/x?cc=max-age%3D600"
        for l in [a, b] { XCTAssertEqual(try l.client().get(target).status, 200) }
        XCTAssertTrue(isHit(try b.client().get(target)))
        XCTAssertTrue(waitUntil { (try? self.diskObjects(b)) ?? 0 >= 1 })
        kill(b.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(b.child.waitForExit(timeout: 20), 0)
        _ = try purge(a, "url=%2Ff%2Fx%3Fcc%3Dmax-age%253D600")

        // Redis comes back empty: no persistence.
        let port = redis.port
        redis.stop()
        let empty = try RedisServer(port: port)
        addTeardownBlock { empty.stop() }

        let before = try origin.count(target)
        b = try node("b", cacheDir: directory)
        let answer = try b.client().get(target)
        XCTAssertFalse(isHit(answer), "the purged copy is not served: \(answer.header("cache-status") ?? "")")
        XCTAssertEqual(try origin.count(target), before + 1)
        XCTAssertTrue(b.child.stderr.contains("lost its data"), b.child.stderr)
    }

    /// A huge value under a shared key was read whole (200 MB raised RSS
    /// by 1.8 GB for 25 s) before being refused: its size is learnt first,
    /// and what exceeds max_object_size is never sent to the node.
    func testAHugeRecordInRedisIsNeverRead() throws {
        try skipMemoryFiguresUnderSanitizers()
        let a = try node("a", extra: "max_object_size = \"1MiB\"")
        let planted = try HTTPClient(port: redis.port)
        let huge = [UInt8](repeating: 0x41, count: 48 << 20)
        _ = try planted.redis([Array("HSET".utf8), Array("larder:e2e:obj:/huge".utf8), Array("v".utf8), huge])
        let pid = a.child.process.processIdentifier
        let before = memory(of: pid).peak
        let answer = try a.client().get("/huge")
        XCTAssertEqual(answer.status, 200)
        XCTAssertFalse(isFleetHit(answer))
        let grown = memory(of: pid).peak - before
        XCTAssertLessThan(grown, 16 << 20, "peak memory grew \(grown >> 20) MiB for a 48 MiB value")
        XCTAssertNotNil(a.child.waitFor("(larger than max_object_size)"), a.child.stderr)
    }

    private func diskObjects(_ l: LarderProcess) throws -> Int {
        let r = try l.adminClient().request("GET", "/stats")
        let json = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
        return (json?["disk"] as? [String: Any])?["objects"] as? Int ?? 0
    }
}

/// A Redis reply, as the tests read it.
indirect enum RESPReply {
    case simple(String), error(String), integer(Int), bulk([UInt8]?), array([RESPReply])

    var elements: [RESPReply] { if case .array(let items) = self { return items } else { return [] } }
    var bytes: [UInt8]? { if case .bulk(let b) = self { return b } else { return nil } }
}

extension HTTPClient {
    /// One Redis command (binary-safe RESP) on this connection, and its reply.
    func redis(_ arguments: [String]) throws -> RESPReply { try redis(arguments.map { Array($0.utf8) }) }

    func redis(_ arguments: [[UInt8]]) throws -> RESPReply {
        var out = Array("*\(arguments.count)\r\n".utf8)
        for a in arguments { out += Array("$\(a.count)\r\n".utf8) + a + Array("\r\n".utf8) }
        try send(out)
        return try readRESP()
    }

    private func readRESP() throws -> RESPReply {
        guard let line = try readLine(), let kind = line.first else { throw HarnessError("Redis closed the connection") }
        let rest = String(line.dropFirst())
        switch kind {
        case "+": return .simple(rest)
        case "-": return .error(rest)
        case ":": return .integer(Int(rest) ?? 0)
        case "$":
            guard let n = Int(rest), n >= 0 else { return .bulk(nil) }
            let body = try readExactly(n + 2)
            return .bulk(Array(body.prefix(n)))
        case "*":
            let n = Int(rest) ?? 0
            return .array(try (0..<max(0, n)).map { _ in try readRESP() })
        default: throw HarnessError("not a Redis reply: \(line)")
        }
    }
}
