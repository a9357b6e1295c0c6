import Foundation
import XCTest

/// A stored piece that lies inside what a client wants (RFC 9111 section
/// 3.4): the upstream is asked for the bytes on both sides as two ranges,
/// and the client gets its answer from the upstream's multipart/byteranges
/// parts and the piece, in order; the three join into the stored whole.
final class PieceInsideEndToEndTests: ProxyTestCase {
    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    private func asked(_ target: String, of origin: Origin) throws -> [[String]] {
        try origin.lastRequest(target)["headers"] as? [[String]] ?? []
    }

    func testAPieceInsideIsCompletedWithTheBytesOnBothSides() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/inside/a?size=100&etag=i1&ranges=1&type=video/mp4"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=40-59"]).status, 206)
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.header("content-length"), "100")
        XCTAssertEqual(completed.header("content-type"), "video/mp4", "the representation's type, not multipart")
        XCTAssertNil(completed.header("content-range"))
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertEqual(completed.body, whole, "the upstream's start, the stored piece, the upstream's end")
        let pairs = try asked(target, of: origin)
        XCTAssertTrue(pairs.contains(["range", "bytes=0-39,60-"]), "only the two sides: \(pairs)")
        XCTAssertTrue(pairs.contains(["if-range", "\"i1\""]), "\(pairs)")
        let hit = try c.get(target)
        XCTAssertTrue(isHit(hit), "the three joined into the stored whole: \(hit.headers)")
        XCTAssertEqual(hit.status, 200)
        XCTAssertEqual(hit.body, whole)
        XCTAssertEqual(try origin.count(target), 2)
    }

    /// A client's range that reaches past both ends of the piece.
    func testARangeAroundAPieceGetsItsBytesFromBoth() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/inside/b?size=1000&etag=i2&ranges=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=400-599"]).status, 206)
        let around = try c.get(target, headers: ["Range: bytes=100-899"])
        XCTAssertEqual(around.status, 206)
        XCTAssertEqual(around.header("content-range"), "bytes 100-899/1000")
        XCTAssertEqual(around.header("content-length"), "800")
        XCTAssertEqual(around.body, Array(whole[100..<900]))
        XCTAssertTrue(try asked(target, of: origin).contains(["range", "bytes=100-399,600-899"]))
        let joined = try c.get(target, headers: ["Range: bytes=150-850"])
        XCTAssertTrue(isHit(joined), "one stored piece now: \(joined.headers)")
        XCTAssertEqual(joined.body, Array(whole[150...850]))
        // The connection still serves: each answer was as long as it said.
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=0-9"]).status, 206)
    }

    /// An upstream that coalesces the two ranges into one (RFC 9110
    /// section 14.2) sends bytes the piece holds: each goes once.
    func testAnUpstreamThatCoalescesTheRangesAnswersAllTheSame() throws {
        let (_, larder) = try start(config: "range_fill = false\n")
        let target = "/inside/c?size=100&etag=i3&ranges=1&coalesce=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=40-59"]).status, 206)
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.body, whole)
        XCTAssertTrue(isHit(try c.get(target)))

        // Multipart, for a representation without a Content-Type: the answer has none either.
        let untyped = "/inside/c2?size=100&etag=i3&ranges=1"
        XCTAssertEqual(try c.get(untyped, headers: ["Range: bytes=40-59"]).status, 206)
        let plain = try c.get(untyped)
        XCTAssertEqual(plain.body, try larder.client().get(untyped.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body)
        XCTAssertNil(plain.header("content-type"), "not the multipart one")
    }

    /// A representation changed since the piece: the If-Range fails and
    /// the upstream's whole is what the client gets.
    func testAChangedRepresentationComesWhole() throws {
        let (_, larder) = try start(config: "range_fill = false\n")
        let target = "/inside/d?size=100&ranges=1&etag=v1&etag_then=v2"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=40-59"]).status, 206)
        let changed = try c.get(target)
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed.header("etag"), "\"v2\"")
        XCTAssertEqual(changed.header("cache-status"), "larder; fwd=partial; fwd-status=200; stored")
        XCTAssertEqual(changed.body.count, 100)
    }

    /// An upstream that sends the parts in another order than asked (RFC
    /// 9110 section 14.6 only says SHOULD): the early part is held until
    /// its turn. Issue 59: the client's answer was cut.
    func testPartsInAnotherOrderAreReorderedForTheClient() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/inside/e?size=100&etag=i5&ranges=1&parts_reversed=1"
        let whole = try larder.client().get(target.replacingOccurrences(of: "ranges=1", with: "ranges=0")).body
        XCTAssertEqual(try larder.client().get(target, headers: ["Range: bytes=40-59"]).status, 206)
        let c = try larder.client()
        let completed = try c.get(target)
        XCTAssertEqual(completed.status, 200)
        XCTAssertEqual(completed.body, whole, "every byte in its place")
        XCTAssertEqual(completed.header("cache-status"), "larder; fwd=partial; fwd-status=206; stored")
        let again = try c.get(target)
        XCTAssertTrue(isHit(again), "\(again.headers)")
        XCTAssertEqual(again.body, whole)
        XCTAssertEqual(try origin.count(target), 2)
    }
}
