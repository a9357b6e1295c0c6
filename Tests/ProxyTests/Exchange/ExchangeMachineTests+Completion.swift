import CacheSemantics
import CacheStorage
import HTTPHeaders
import XCTest
@testable import Proxy

/// A stored piece completed with the bytes it lacks, which Larder asks the
/// upstream for: what of the upstream's answer is taken, and what is asked
/// again plainly.
extension ExchangeMachineTests {
    func testARestWithAnotherValidatorIsNeverJoinedToTheStoredPiece() {
        var m = machine()
        let piece = entry("max-age=60", status: 206, ["etag": "\"v1\"", "content-range": "bytes 0-9/100"], body: "0123456789")
        XCTAssertEqual(m.start(), .lookUp(.local))
        XCTAssertEqual(m.lookedUp(found(miss, completable: piece), in: Variants()), .collapse(count: .miss), "one completion per key at a time")
        guard case .forward(let how) = m.joined(.leading) else { return XCTFail() }
        XCTAssertEqual(how, .init(leading: true))
        XCTAssertFalse(m.forwarding.mayShare, "never shared: a follower would get the rest alone (it waits, then looks up again)")
        XCTAssertEqual(m.forwardCacheStatus(stored: false), "larder; fwd=partial")
        XCTAssertTrue(m.forwarding.completing?.piece.isSame(piece) ?? false)
        let otherRest = response(206, ["etag": "\"v2\"", "content-range": "bytes 10-99/100"])
        guard case .forwardAgain(let dropStored) = m.upstreamHead(otherRest, now: now) else { return XCTFail() }
        XCTAssertTrue(dropStored, "the stale piece goes")
        XCTAssertNil(m.forwarding.completing, "the whole is asked plainly")
        XCTAssertEqual(m.nextTurn(), .forward(.init()))
        XCTAssertEqual(m.upstreamHead(response(200, ["etag": "\"v2\""]), now: now), .takeHead)

        var fits = machine()
        _ = fits.start()
        _ = fits.lookedUp(found(miss, completable: piece), in: Variants())
        _ = fits.joined(.leading)
        XCTAssertEqual(fits.upstreamHead(response(206, ["etag": "\"v1\"", "content-range": "bytes 10-99/100"]), now: now),
                       .takeHead, "the same strong validator: joined")
        let joined = fits.headSent(response(206, ["etag": "\"v1\"", "content-range": "bytes 10-99/100"]), stored: true)
        XCTAssertTrue(joined.completion?.piece.isSame(piece) ?? false, "the stored piece goes first")
        XCTAssertTrue(joined.completion?.pieceLeads ?? false)
        XCTAssertEqual(joined.cacheStatus, "larder; fwd=partial; fwd-status=206; stored")
        XCTAssertNil(fits.bodyEnded(whole: true), "nothing follows the rest")

        // Collapsed onto another's fetch of the whole: followed as it is, nothing of the piece added.
        var follower = machine()
        _ = follower.start()
        _ = follower.lookedUp(found(miss, completable: piece), in: Variants())
        let whole = fetch
        XCTAssertEqual(follower.joined(.following(whole)), .follow(whole, count: .collapsed))
        XCTAssertNil(follower.forwarding.completing)
        XCTAssertEqual(follower.followedCacheStatus, "larder; fwd=uri-miss; collapsed")
    }

    /// A stored piece that ends the representation follows the upstream's
    /// start, once all of it came; a start cut short is followed by nothing.
    func testAPieceThatEndsTheRepresentationFollowsTheUpstreamsStart() {
        let piece = entry("max-age=60", status: 206, ["etag": "\"v1\"", "content-range": "bytes 90-99/100"], body: "0123456789")
        for whole in [true, false] {
            var m = machine()
            _ = m.start()
            _ = m.lookedUp(found(miss, completable: piece), in: Variants())
            guard case .forward = m.joined(.leading) else { return XCTFail() }
            XCTAssertEqual(m.upstreamHead(response(206, ["etag": "\"v1\"", "content-range": "bytes 0-89/100"]), now: now),
                           .takeHead)
            let head = m.headSent(response(206, ["etag": "\"v1\"", "content-range": "bytes 0-89/100"]), stored: true)
            XCTAssertTrue(head.completion?.piece.isSame(piece) ?? false, "the head says the whole")
            XCTAssertFalse(head.completion?.pieceLeads ?? true, "the upstream's bytes come first")
            XCTAssertEqual(m.bodyEnded(whole: whole)?.piece.isSame(piece) ?? false, whole)
            XCTAssertNil(m.bodyEnded(whole: whole), "sent once")
        }
    }

    /// A piece inside the representation: a multipart/byteranges 206 (or
    /// one range over both sides) of the same representation is taken, its
    /// parts put around the piece as they stream; another one's is not.
    func testAPieceInsideIsCompletedAroundByTheSameRepresentationOnly() {
        let piece = entry("max-age=60", status: 206, ["etag": "\"v1\"", "content-range": "bytes 40-49/100"], body: "0123456789")
        let multipart = "multipart/byteranges; boundary=S"
        // (fields, taken, or else whether the stored piece is dropped: another representation's)
        let answers: [(HeaderFields, Bool, Bool)] = [
            (["content-type": multipart, "etag": "\"v1\""], true, false),
            (["etag": "\"v1\"", "content-range": "bytes 0-99/100"], true, false),
            (["content-type": multipart, "etag": "\"v2\""], false, true),
            (["etag": "\"v1\"", "content-range": "bytes 0-39/100"], false, false),
        ]
        for (fields, taken, drops) in answers {
            var m = machine()
            _ = m.start()
            _ = m.lookedUp(found(miss, completable: piece), in: Variants())
            guard case .forward = m.joined(.leading) else { return XCTFail() }
            XCTAssertTrue(m.forwarding.completing?.liesInside ?? false)
            let answer = response(206, fields)
            guard taken else {
                XCTAssertEqual(m.upstreamHead(answer, now: now), .forwardAgain(dropStored: drops), "asked again plainly: \(fields)")
                continue
            }
            XCTAssertEqual(m.upstreamHead(answer, now: now), .takeHead, "\(fields)")
            let head = m.headSent(answer, stored: true)
            XCTAssertTrue(head.completion?.liesInside ?? false)
            XCTAssertNotNil(m.forwarding.around, "the parts are put around the piece")
            XCTAssertNil(m.bodyEnded(whole: true), "nothing trails: the piece goes between the parts")
        }
    }

    /// Issue 59: an error to the range request Larder made up was passed to
    /// the client (and stored), though the upstream serves a plain GET.
    /// Anything but a 200 or the rest of the piece's representation is asked
    /// again plainly; only a piece the upstream no longer has goes.
    func testAnythingButTheRestOrAWholeIsAskedAgainPlainly() {
        let piece = entry("max-age=60", status: 206, ["etag": "\"v1\"", "content-range": "bytes 40-49/100"], body: "0123456789")
        for (status, gone) in [(400, false), (404, false), (416, true), (500, false), (501, false), (503, false)] {
            var m = machine()
            _ = m.start()
            _ = m.lookedUp(found(miss, completable: piece), in: Variants())
            guard case .forward = m.joined(.leading) else { return XCTFail() }
            guard case .forwardAgain(let dropStored) = m.upstreamHead(response(status, ["etag": "\"v1\""]), now: now) else {
                return XCTFail("\(status)")
            }
            XCTAssertEqual(dropStored, gone, "\(status)")
            XCTAssertNil(m.forwarding.completing, "\(status): the whole is asked plainly")
            XCTAssertEqual(m.nextTurn(), .forward(.init()))
            // The plain request's answer is the client's, whatever it is.
            XCTAssertEqual(m.upstreamHead(response(status == 416 ? 200 : status, [:]), now: now), .takeHead, "\(status)")
        }
        var whole = machine()
        _ = whole.start()
        _ = whole.lookedUp(found(miss, completable: piece), in: Variants())
        _ = whole.joined(.leading)
        XCTAssertEqual(whole.upstreamHead(response(200, ["etag": "\"v1\""]), now: now), .takeHead, "a 200 is the whole")
    }
}
