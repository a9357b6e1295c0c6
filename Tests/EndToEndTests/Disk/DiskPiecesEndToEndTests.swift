import Foundation
import TestSupport
import XCTest

/// Partial content on disk with the real binary: pieces kept side by side,
/// joined in their files, completed with the rest, after restarts too.
final class DiskPiecesEndToEndTests: DiskEndToEndCase {
    /// A player's seeks: pieces of one representation apart are kept side
    /// by side on disk too, and stay hits after a restart.
    func testPiecesApartAreKeptOnDiskAndStayHitsAfterARestart() throws {
        let target = "/part/seek?size=100&etag=s1&ranges=1"
        let settings = ["--config", try config("range_fill = false\n")]
        let first = try start(settings)
        for range in ["0-9", "50-59"] { XCTAssertEqual(try first.client().get(target, headers: ["Range: bytes=\(range)"]).status, 206) }
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().count < 2 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 2, "a file per piece")
        stop(first)
        let second = try start(settings)
        for range in ["0-9", "52-57"] {
            let r = try second.client().get(target, headers: ["Range: bytes=\(range)"])
            XCTAssertEqual(r.status, 206, range)
            XCTAssertTrue(r.header("cache-status")?.contains("hit") ?? false, "\(range): \(r.headers)")
        }
        XCTAssertEqual(try origin.count(target), 2, "each piece fetched once")
    }

    /// Pieces too large for memory stream to their files, and the ones
    /// that touch are joined there (the writer thread copies the stored
    /// bytes around the new ones): a range across two of them is a hit,
    /// and the pieces that make up the whole become the 200 that answers
    /// a request for it.
    func testTouchingPiecesOnDiskAreJoinedIntoTheWhole() throws {
        let target = "/part/join?size=8000&etag=j1&ranges=1"
        let settings = ["--config", try config("range_fill = false\nmax_object_size = \"1KiB\"\n")]
        let larder = try start(settings)
        let c = try larder.client()
        let whole = try c.get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertEqual(whole.count, 8000)
        let settled = Date().addingTimeInterval(10)
        while cacheFiles().isEmpty && Date() < settled { usleep(20_000) }
        let other = try XCTUnwrap(cacheFiles().first, "the other URL's file")
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-2999"]).status, 206)
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=3000-5999"]).status, 206)
        waitForCacheFile(holding: 6000, besides: other)
        let across = try c.get(target, headers: ["Range: bytes=2000-4999"])
        XCTAssertEqual(across.status, 206)
        XCTAssertTrue(across.header("cache-status")?.contains("hit") ?? false, "a range across both pieces: \(across.headers)")
        XCTAssertEqual(across.body, Array(whole[2000..<5000]))

        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=6000-"]).status, 206)
        waitForCacheFile(holding: 8000, besides: other)
        let all = try c.get(target)
        XCTAssertEqual(all.status, 200)
        XCTAssertTrue(all.header("cache-status")?.contains("hit") ?? false, "the joined whole: \(all.headers)")
        XCTAssertNil(all.header("content-range"))
        XCTAssertEqual(all.body, whole)
        XCTAssertEqual(try origin.count(target), 3, "each piece fetched once, the whole never")
        XCTAssertEqual(cacheFiles().count, 2, "the joined file and the other URL's; the pieces' files went")
    }

    /// A piece over 1 MiB is served from its file (never read into
    /// memory): a client asking for the whole gets it from the file, then
    /// the rest as the upstream sends it, and the rest joins the piece on
    /// disk into the whole, a hit from then on.
    func testALargePieceInItsFileIsCompletedWithTheRest() throws {
        let size = 3_000_000
        let target = "/part/large-rest?size=\(size)&etag=L1&ranges=1"
        let larder = try start(["--config", try config("range_fill = false\n")])
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-1599999"]).status, 206)
        waitForCacheFile(holding: 1_600_000)
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.header("content-length"), "\(size)")
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=1600000-"]), "only the rest is asked: \(pairs)")
        XCTAssertTrue(pairs.contains(["if-range", "\"L1\""]), "\(pairs)")
        waitForCacheFile(holding: size)
        let hit = try c.get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "the piece and the rest joined into the whole: \(hit.headers)")
        XCTAssertTrue(hit.body == completed.body)
        let whole = try c.get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertTrue(completed.body == whole, "the file's bytes, then the rest's")
        XCTAssertEqual(try origin.count(target), 2, "the piece, then the rest")

        // A large piece that ends the representation: its start is asked, and the file's bytes follow it.
        let tail = target.replacingOccurrences(of: "large-rest", with: "large-tail")
        XCTAssertEqual(try c.get(tail, headers: ["Range: bytes=1400000-"]).status, 206)
        let files = cacheFiles().count
        let settled = Date().addingTimeInterval(10)
        while cacheFiles().count == files && Date() < settled { usleep(20_000) }
        let fromTail = try c.get(tail)
        XCTAssertEqual(fromTail.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        let tailWhole = try c.get(tail.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertTrue(fromTail.body == tailWhole, "the upstream's start, then the file's bytes")
        let asked = try origin.lastRequest(tail)["headers"] as? [[String]] ?? []
        XCTAssertTrue(asked.contains(["range", "bytes=0-1399999"]), "\(asked)")
    }

    /// A piece kept only on disk (after a restart), its file held open by
    /// earlier hits, is completed as one in memory is: the upstream is
    /// asked for the rest alone, and the client gets the whole.
    func testAPieceKeptOnDiskIsCompletedWithTheRestAfterARestart() throws {
        // Pieces larger than max_object_size: on disk only, never promoted.
        let target = "/part/disk-rest?size=4000&etag=d1&ranges=1"
        let settings = ["--config", try config("range_fill = false\nmax_object_size = \"1KiB\"\n")]
        let first = try start(settings)
        let whole = try first.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertEqual(try first.client().get(target, headers: ["Range: bytes=0-1999"]).status, 206)
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().count < 2 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 2, "the piece's file and the other URL's")
        stop(first)
        let second = try start(settings)
        let c = try second.client()
        for _ in 0..<3 {
            let piece = try c.get(target, headers: ["Range: bytes=0-1499"])
            XCTAssertTrue(piece.header("cache-status")?.contains("hit") ?? false, "\(piece.headers)")
        }
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertEqual(completed.body, whole)
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=2000-"]), "\(pairs)")
        XCTAssertEqual(try origin.count(target), 2, "the piece, then the rest")
    }

    /// A piece inside the representation, read from its file: the client
    /// gets the upstream's parts on both sides with the file's bytes between.
    func testAPieceInsideKeptOnDiskIsCompletedAroundAfterARestart() throws {
        let target = "/part/disk-inside?size=4000&etag=d2&ranges=1"
        let settings = ["--config", try config("range_fill = false\nmax_object_size = \"1KiB\"\n")]
        let first = try start(settings)
        let whole = try first.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertEqual(try first.client().get(target, headers: ["Range: bytes=1000-2999"]).status, 206)
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().count < 2 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 2, "the piece's file and the other URL's")
        stop(first)
        let c = try start(settings).client()
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertTrue(completed.header("cache-status")?.hasPrefix("larder; fwd=partial; fwd-status=206") ?? false)
        XCTAssertEqual(completed.body, whole)
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        XCTAssertTrue(pairs.contains(["range", "bytes=0-999,3000-"]), "\(pairs)")
        // The connection still serves: the answer was as long as it said.
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=1000-1009"]).body, Array(whole[1000..<1010]))
    }

    /// `Range: bytes=0-` of an object too large for memory (a video
    /// player's first request): the 206 of all of it streams to disk as
    /// the 200 it amounts to, so a request for the whole is a hit too.
    func testAPartialAnswerHoldingAllOfALargeObjectIsStoredOnDiskAsTheWhole() throws {
        let target = "/video?size=3000000&etag=v1&ranges=1"
        let l = try start(["--memory-limit", "1MiB"])
        let first = try l.client().get(target, headers: ["Range: bytes=0-"])
        XCTAssertEqual(first.status, 206)
        XCTAssertEqual(first.body.count, 3_000_000)
        // Stored once the streamed file is complete and indexed (a file on disk may still be being written).
        XCTAssertGreaterThanOrEqual(try waitForStats(l, "stored", atLeast: 1, timeout: 30), 1)
        let whole = try l.client().get(target)
        XCTAssertTrue(whole.header("cache-status")?.contains("hit") ?? false, "\(whole.headers)")
        XCTAssertEqual(whole.status, 200)
        XCTAssertNil(whole.header("content-range"))
        XCTAssertTrue(whole.body == first.body)
        XCTAssertEqual(try origin.count(target), 1)
    }
}
