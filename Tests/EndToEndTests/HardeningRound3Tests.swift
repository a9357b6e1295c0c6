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
