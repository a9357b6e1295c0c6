import XCTest
@testable import CacheSemantics

/// A stored piece that lies inside what a client wants (RFC 9111 section
/// 3.4): the two ranges it lacks are asked for, the upstream's answer is
/// checked to be of the same representation, and its parts and the
/// piece's bytes are put in order for the client.
final class PieceAssemblyTests: XCTestCase {
    typealias Piece = PartialContent.Piece
    private func piece(_ first: Int, _ last: Int, _ length: Int = 100) -> Piece { Piece(first: first, last: last, length: length) }

    func testAPieceInsideLacksTheBytesOnBothSides() {
        XCTAssertEqual(PartialContent.gaps(of: piece(40, 59)), [piece(0, 39), piece(60, 99)])
        XCTAssertEqual(PartialContent.restRequest(for: piece(40, 59), etag: "\"e\"")?.range, "bytes=0-39,60-")
        XCTAssertEqual(PartialContent.restRequest(for: piece(40, 59), etag: "\"e\"")?.ifRange, "\"e\"")
        XCTAssertEqual(PartialContent.restRequest(for: piece(40, 59), wanted: piece(10, 79), etag: nil)?.range, "bytes=10-39,60-79",
                       "a client's range around the piece")
        XCTAssertEqual(PartialContent.gaps(of: piece(0, 39)), [piece(40, 99)], "one range: the piece leads")
        XCTAssertEqual(PartialContent.gaps(of: piece(40, 59), wanted: piece(50, 99)), [piece(60, 99)])
        XCTAssertEqual(PartialContent.gaps(of: piece(40, 59), wanted: piece(40, 59)), [], "all of it held")
        XCTAssertEqual(PartialContent.gaps(of: piece(40, 59), wanted: piece(70, 79)), [], "none of it held")
        XCTAssertEqual(PartialContent.gaps(of: piece(40, 59), wanted: piece(0, 99, 200)), [], "another representation's length")
    }

    /// The answer around a piece: multipart/byteranges, or one range that
    /// holds both sides, with the piece's strong ETag.
    func testWhatMayCompleteAPieceInside() {
        let inside = piece(40, 59), multipart = "multipart/byteranges; boundary=S"
        func may(_ contentRange: String?, _ type: String?, _ etag: String? = "\"v1\"", stored: String? = "\"v1\"",
                 wanted: Piece? = nil) -> Bool {
            PartialContent.mayCompleteAround(inside, wanted: wanted, etag: stored, contentRange: contentRange, contentType: type,
                                             restETag: etag)
        }
        XCTAssertTrue(may(nil, multipart))
        XCTAssertTrue(may("bytes 0-99/100", "text/plain"), "coalesced into one range over the piece")
        XCTAssertTrue(may("bytes 10-79/100", "text/plain", wanted: piece(10, 79)))
        XCTAssertFalse(may("bytes 0-39/100", "text/plain"), "one side alone")
        XCTAssertFalse(may("bytes 0-99/200", "text/plain"), "another length")
        XCTAssertFalse(may(nil, "text/plain"), "neither multipart nor a range")
        XCTAssertFalse(may(nil, multipart, "\"v2\""), "another representation")
        XCTAssertFalse(may(nil, multipart, nil), "nothing shows it is the same")
        XCTAssertFalse(may(nil, multipart, "W/\"v1\"", stored: "W/\"v1\""), "a weak validator")
        XCTAssertFalse(PartialContent.mayCompleteAround(piece(0, 39), etag: "\"v1\"", contentRange: nil, contentType: multipart,
                                                        restETag: "\"v1\""), "not inside: one range is asked")
    }

    /// The usual answer: the part before the piece, the piece, the part after.
    func testPartsAroundThePieceGoInOrder() {
        var a = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        XCTAssertNil(a.partBegins(piece(0, 39)))
        XCTAssertEqual(a.take(30), 0..<30)
        XCTAssertEqual(a.take(10), 0..<10)
        XCTAssertEqual(a.partBegins(piece(60, 99)), piece(40, 59), "the stored bytes go before the second part")
        XCTAssertEqual(a.take(40), 0..<40)
        XCTAssertTrue(a.isDone)
        XCTAssertNil(a.finish())
        XCTAssertFalse(a.failed)
    }

    /// An upstream that coalesced the ranges sends bytes the piece holds:
    /// each byte goes once; bytes past what is wanted are not sent.
    func testRepeatedBytesAreSkipped() {
        var a = PieceAssembly(held: piece(40, 59), wanted: piece(10, 79))
        XCTAssertNil(a.partBegins(piece(0, 99)))
        XCTAssertEqual(a.take(50), 10..<50, "from the first byte wanted")
        XCTAssertEqual(a.take(50), 0..<30, "up to the last")
        XCTAssertTrue(a.isDone)

        var overlapping = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        _ = overlapping.partBegins(piece(0, 49))
        XCTAssertEqual(overlapping.take(50), 0..<50)
        XCTAssertEqual(overlapping.partBegins(piece(45, 99)), nil, "the piece's bytes came from upstream already")
        XCTAssertEqual(overlapping.take(55), 5..<55)
        XCTAssertTrue(overlapping.isDone)
    }

    /// The piece's bytes after the last part, when the body ends there.
    func testThePieceEndsTheAnswerWhenNoPartFollows() {
        var a = PieceAssembly(held: piece(40, 99), wanted: piece(0, 99))
        _ = a.partBegins(piece(0, 39))
        XCTAssertEqual(a.take(40), 0..<40)
        XCTAssertEqual(a.finish(), piece(40, 99))
        XCTAssertTrue(a.isDone)
    }

    /// Parts out of order, a gap, another representation's length, a body
    /// not well formed: the answer cannot be whole.
    func testWhatCannotBePutTogetherFails() {
        var reordered = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        XCTAssertNil(reordered.partBegins(piece(60, 99)))
        XCTAssertTrue(reordered.failed)
        XCTAssertEqual(reordered.take(40), 0..<0, "nothing more goes")
        XCTAssertNil(reordered.finish())
        XCTAssertFalse(reordered.isDone)

        var gap = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        _ = gap.partBegins(piece(0, 39))
        _ = gap.take(40)
        XCTAssertNil(gap.partBegins(piece(61, 99)), "byte 60 is missing")
        XCTAssertTrue(gap.failed)

        var length = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        XCTAssertNil(length.partBegins(piece(0, 39, 101)))
        XCTAssertTrue(length.failed)

        var short = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        _ = short.partBegins(piece(0, 39))
        _ = short.take(40)
        short.fail()
        XCTAssertTrue(short.failed)
        var done = PieceAssembly(held: piece(40, 59), wanted: piece(0, 99))
        _ = done.partBegins(piece(0, 99))
        _ = done.take(100)
        done.fail()
        XCTAssertFalse(done.failed, "what came after every byte wanted does not matter")
    }

    /// A part sent before its turn (the upstream reordered them) is known
    /// as such, until the bytes before it have gone.
    func testAPartPastWhatCanGoBeforeItComesLater() {
        let held = PartialContent.Piece(first: 40, last: 59, length: 100)
        var a = PieceAssembly(held: held, wanted: PartialContent.Piece(first: 0, last: 99, length: 100))
        let after = PartialContent.Piece(first: 60, last: 99, length: 100), before = PartialContent.Piece(first: 0, last: 39, length: 100)
        XCTAssertTrue(a.comesLater(after), "bytes 0-39 must go first")
        XCTAssertFalse(a.comesLater(before))
        XCTAssertFalse(a.comesLater(PartialContent.Piece(first: 60, last: 99, length: 101)), "another length is no part of it")
        XCTAssertNil(a.partBegins(before))
        XCTAssertEqual(a.take(40), 0..<40)
        XCTAssertFalse(a.comesLater(after), "the stored piece bridges to it now")
        XCTAssertEqual(a.partBegins(after), PartialContent.Piece(first: 40, last: 59, length: 100))
        XCTAssertEqual(a.take(40), 0..<40)
        XCTAssertTrue(a.isDone)
    }
}
