import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 42: defects found by trying Larder as an attacker and as a new
/// operator would. Each test failed on the code before the fix.
final class SplicedBodyEndToEndTests: ConfiguredTestCase {
    /// A stored piece of v1 and an upstream that now serves v2, honours
    /// Range and ignores If-Range: its rest is v2's, so joining it to the
    /// piece would give a body spliced from two versions. The client gets
    /// v2 whole instead, and the stale piece goes.
    func testTheRestOfAnotherVersionIsNeverJoinedToAStoredPiece() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/splice/r?size=300&ranges=1&ignore_if_range=1&etag=v1&etag_then=v2&body_then=1"
        let c = try larder.client()
        let piece = try c.get(target, headers: ["Range: bytes=0-99"])
        XCTAssertEqual(piece.status, 206)
        XCTAssertEqual(piece.header("etag"), "\"v1\"")

        let answer = try c.get(target)
        XCTAssertEqual(answer.status, 200)
        XCTAssertEqual(answer.header("etag"), "\"v2\"")
        XCTAssertEqual(answer.body.count, 300)
        XCTAssertFalse(answer.body.starts(with: piece.body), "no byte of v1 in a v2 answer")
        // What the origin serves now, whole: fetched directly, not through Larder.
        let v2 = try HTTPClient(port: origin.port).get(target).body
        XCTAssertTrue(answer.body == v2, "v2 whole")
        XCTAssertNil(try origin.lastRequest(target)["headers"].flatMap { ($0 as? [[String]])?.first { $0[0] == "range" } },
                     "the whole was asked plainly after the rest did not match")

        // The stale piece is gone: its range is now answered with v2's bytes.
        let again = try c.get(target, headers: ["Range: bytes=0-99"])
        XCTAssertEqual(again.header("etag"), "\"v2\"")
        XCTAssertTrue(again.body == Array(v2[0..<100]), "v2's first bytes")
    }
}

/// A second Larder on a port another one holds exits 1, as the README
/// promises, instead of joining its SO_REUSEPORT group (the kernel split
/// connections between the two).
final class TakenPortEndToEndTests: ConfiguredTestCase {
    func testASecondLarderOnATakenPortExitsInsteadOfSharingIt() throws {
        let origin = try startOrigin()
        let first = try startLarder(upstream: origin.url)
        let second = try startChild(Paths.larder, ["serve", "--listen", "127.0.0.1:\(first.port)", "--upstream", origin.url,
                                                   "--admin-listen", "none", "--workers", "2"])
        XCTAssertEqual(second.waitForExit(timeout: 20), 1, "the port is taken")
        XCTAssertTrue(second.stderr.contains("Address already in use"), second.stderr)
        XCTAssertFalse(second.stderr.contains("listening on"), second.stderr)
        for _ in 0..<10 {
            let r = try first.client().get("/still-mine")
            XCTAssertEqual(r.status, 200)
        }
    }
}

/// Log followers that never read made every later admin request answer
/// 503 (they held all admin connections, forever). Followers now have a
/// bound of their own, and one that reads nothing for send_timeout is
/// dropped; purges and health checks keep their room.
final class LogFollowerBoundEndToEndTests: ConfiguredTestCase {
    func testFollowersThatNeverReadCannotLockOutTheAdminAPI() throws {
        let (_, larder) = try start(config: "send_timeout = \"1s\"\n")
        let adminPort = try XCTUnwrap(larder.adminPort)
        var followers: [HTTPClient] = []
        for _ in 0..<64 {
            let follower = try HTTPClient(port: adminPort, receiveBuffer: 4096)
            try follower.send("GET /log?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            followers.append(follower)
        }
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?all=true").status, 200)
        let refused = try followers.filter { try $0.read(until: "\r\n\r\n")?.hasPrefix("HTTP/1.1 503") ?? false }
        XCTAssertGreaterThan(refused.count, 40, "followers beyond their bound are refused")

        // Some 8 MiB of log lines that the accepted followers never read.
        let c = try larder.client()
        let target = "/lf/unread?" + String(repeating: "p", count: 3000)
        for _ in 0..<2500 { XCTAssertEqual(try c.get(target).status, 200) }
        XCTAssertTrue(larder.child.waitFor("(dropping a log follower that has read nothing)") != nil, larder.child.stderr)
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().get("/stats").status, 200)
    }
}
