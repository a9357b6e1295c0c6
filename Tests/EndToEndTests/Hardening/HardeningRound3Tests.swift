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

    /// An upstream whose rest carries more (or fewer) bytes than its own
    /// Content-Range says, chunked so that nothing else frames it: the
    /// client's answer announced the whole's length, so the extra bytes
    /// would read as the next answer on its connection, and a short one
    /// would leave it waiting. Either way the answer is cut where it
    /// stops matching, and nothing of it is stored.
    func testARestThatOverrunsOrFallsShortOfItsRangeCutsTheAnswer() throws {
        let (_, larder) = try start(config: "range_fill = false\n")
        for lie in ["overrun_if_range=10", "short_if_range=10"] {
            let target = "/lie/\(lie.prefix(5))?size=100&etag=l1&ranges=1&\(lie)"
            XCTAssertEqual(try larder.client().get(target, headers: ["Range: bytes=0-39"]).status, 206)
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
            let received = c.readUntilClosed()  // Larder closes the connection
            let text = String(decoding: received, as: UTF8.self)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 200"), "\(lie): \(text.prefix(80))")
            XCTAssertTrue(text.contains("\r\nContent-Length: 100\r\n") || text.lowercased().contains("\r\ncontent-length: 100\r\n"))
            let bodyStart = received.firstRange(of: [13, 10, 13, 10])?.upperBound ?? received.count
            XCTAssertLessThan(received.count - bodyStart, 100, "\(lie): cut before the length it announced")
            XCTAssertFalse(received[bodyStart...].contains(UInt8(ascii: "X")), "\(lie): no byte past the announced length")
            let stored = try larder.client().get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            XCTAssertNotEqual(stored.status, 200, "\(lie): the mismatched rest was not joined into a stored whole")
        }
    }
}

/// A second Larder on a port another one holds exits 1, as docs/running.md
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
        // Each has its answer (a follower's stream, or 503) before the admin
        // API is asked: until then the 64 connections are all open.
        let refused = try followers.filter { try $0.read(until: "\r\n\r\n")?.hasPrefix("HTTP/1.1 503") ?? false }
        XCTAssertGreaterThan(refused.count, 40, "followers beyond their bound are refused")
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?all=true").status, 200)

        // Some 8 MiB of log lines that the accepted followers never read.
        let c = try larder.client()
        let target = "/lf/unread?" + String(repeating: "p", count: 3000)
        for _ in 0..<2500 { XCTAssertEqual(try c.get(target).status, 200) }
        XCTAssertTrue(larder.child.waitFor("(dropping a log follower that has read nothing)") != nil, larder.child.stderr)
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().get("/stats").status, 200)
    }
}

/// A stored gzip body for clients that do not take gzip is decoded as each
/// client drains, in bounded pieces: 30 clients that do not read held 2 GB
/// of decoded copies (one whole copy each, decoded on the worker thread).
final class DecodedBodyEndToEndTests: ConfiguredTestCase {
    func testClientsThatDoNotReadHoldNoWholeDecodedCopy() throws {
        try skipMemoryFiguresUnderSanitizers()
        let (origin, larder) = try start(config: "")
        let size = 63 << 20
        let target = "/bomb/a?gzip=1&fill=zero&size=\(size)"
        let gzipped = try larder.client().get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertEqual(gzipped.header("content-encoding"), "gzip")
        XCTAssertLessThan(gzipped.body.count, 128 << 10, "a thousandfold")

        let pid = larder.child.process.processIdentifier
        let before = memory(of: pid).rss
        var stalled: [HTTPClient] = []
        for _ in 0..<30 {
            let c = try HTTPClient(port: larder.port, receiveBuffer: 4096)
            try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
            let head = try XCTUnwrap(try c.read(until: "\r\n\r\n"))
            XCTAssertTrue(head.contains("Content-Length: \(size)") || head.contains("content-length: \(size)"), head)
            stalled.append(c)
        }
        let grown = memory(of: pid).rss - before
        XCTAssertLessThan(grown, 300 << 20, "30 clients that do not read: \(grown >> 20) MiB (a whole decoded copy each is 1.9 GiB)")

        let whole = try larder.client().get(target)
        XCTAssertEqual(whole.status, 200)
        XCTAssertNil(whole.header("content-encoding"))
        XCTAssertEqual(whole.body.count, size)
        XCTAssertTrue(whole.body.allSatisfy { $0 == 0 })
        XCTAssertTrue(whole.header("cache-status")?.hasPrefix("larder; hit") ?? false)
        XCTAssertEqual(try origin.count(target), 1, "decoded from the stored copy, never fetched again")
    }

    /// A stored gzip body that decodes to more than the old whole-body
    /// limit (64 MiB) is decoded piece by piece too: it was removed and
    /// fetched again (identity) for every such client.
    func testALargeDecodedBodyIsServedFromTheStoredCopy() throws {
        let (origin, larder) = try start(config: "")
        let size = 70 << 20
        let target = "/bomb/b?gzip=1&fill=zero&size=\(size)"
        XCTAssertEqual(try larder.client().get(target, headers: ["Accept-Encoding: gzip"]).header("content-encoding"), "gzip")
        for _ in 0..<3 {
            let r = try larder.client().get(target)
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body.count, size)
            XCTAssertTrue(r.header("cache-status")?.hasPrefix("larder; hit") ?? false)
        }
        let range = try larder.client().get(target, headers: ["Range: bytes=\(size - 10)-"])
        XCTAssertEqual(range.status, 206)
        XCTAssertTrue(range.body == [UInt8](repeating: 0, count: 10), "the last ten bytes")
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A stored gzip body corrupt in its middle: the first client that
    /// needs it decoded is cut off (its head was sent), never sent garbage
    /// as if whole; the others get the upstream's identity copy, fetched
    /// once and kept, and the stored copy is not fetched again for each.
    func testACorruptStoredBodyIsFetchedOnceAsIdentityForTheClientsThatNeedItDecoded() throws {
        let (origin, larder) = try start(config: "")
        let target = "/bomb/c?gzip=1&gzip_corrupt=1&size=2000000"
        let plain = try HTTPClient(port: origin.port).get(target).body
        XCTAssertEqual(plain.count, 2_000_000)
        _ = try larder.client().get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertThrowsError(try larder.client().get(target), "the first client is cut off, not sent a corrupt body as whole")
        for _ in 0..<7 {
            let r = try larder.client().get(target)
            XCTAssertEqual(r.status, 200)
            XCTAssertTrue(r.body == plain, "the identity copy")
        }
        XCTAssertEqual(try origin.count(target), 3, "the gzip copy, the direct fetch above, one identity copy")
        XCTAssertNotNil(larder.child.waitFor("(cannot be decoded for a client that does not take gzip)"), larder.child.stderr)
    }
}
