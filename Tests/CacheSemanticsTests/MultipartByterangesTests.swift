import XCTest
@testable import CacheSemantics

/// RFC 9110 section 14.6 (and RFC 2046 section 5.1.1): splitting a
/// multipart/byteranges body into its parts, and refusing bodies that are
/// not what they say.
final class MultipartByterangesTests: XCTestCase {
    private func parts(_ body: String, boundary: String = "SEP") -> [MultipartByteranges.Part]? {
        Array(body.utf8).withUnsafeBytes { MultipartByteranges.parts(of: $0, boundary: boundary) }
    }

    private func part(_ range: String, _ data: String, type: String? = "text/plain", boundary: String = "SEP") -> String {
        "--\(boundary)\r\n" + (type.map { "Content-Type: \($0)\r\n" } ?? "") + "Content-Range: bytes \(range)\r\n\r\n\(data)\r\n"
    }

    func testTheBoundaryOfAMultipartByterangesType() {
        XCTAssertEqual(MultipartByteranges.boundary(contentType: "multipart/byteranges; boundary=THIS_SEPARATES"), "THIS_SEPARATES")
        XCTAssertEqual(MultipartByteranges.boundary(contentType: "Multipart/ByteRanges;charset=x; BOUNDARY=\"a b:c\""), "a b:c")
        XCTAssertNil(MultipartByteranges.boundary(contentType: "multipart/mixed; boundary=x"), "another multipart type")
        XCTAssertNil(MultipartByteranges.boundary(contentType: "multipart/byteranges"), "no boundary")
        XCTAssertNil(MultipartByteranges.boundary(contentType: "multipart/byteranges; boundary="), "an empty one")
        XCTAssertNil(MultipartByteranges.boundary(contentType: "multipart/byteranges; boundary=" + String(repeating: "b", count: 71)),
                     "longer than RFC 2046 allows")
        XCTAssertNil(MultipartByteranges.boundary(contentType: nil))
    }

    func testPartsWithTheirRangesTypesAndBytes() throws {
        let body = "preamble\r\n" + part("0-3/20", "abcd") + part("10-14/20", "klmno", type: nil) + "--SEP--\r\nepilogue"
        let found = try XCTUnwrap(parts(body))
        XCTAssertEqual(found.map(\.piece), [PartialContent.Piece(first: 0, last: 3, length: 20),
                                            PartialContent.Piece(first: 10, last: 14, length: 20)])
        XCTAssertEqual(found.map(\.contentType), ["text/plain", nil])
        let bytes = Array(body.utf8)
        XCTAssertEqual(found.map { String(decoding: bytes[$0.bytes], as: UTF8.self) }, ["abcd", "klmno"])
    }

    /// The data is taken by its Content-Range's length: bytes that look
    /// like a delimiter inside it are data.
    func testADelimiterInsideThePartsDataIsData() throws {
        let found = try XCTUnwrap(parts(part("0-9/10", "\r\n--SEP\r\nx") + "--SEP--"))
        XCTAssertEqual(found.first?.bytes.count, 10)
    }

    func testTransportPaddingAfterADelimiterIsAllowed() {
        XCTAssertEqual(parts("--SEP  \r\nContent-Range: bytes 0-0/1\r\n\r\na\r\n--SEP--")?.count, 1)
    }

    func testBodiesThatAreNotWellFormedAreRefused() {
        let cases: [(String, String)] = [
            ("no delimiter", "abcd"),
            ("no parts", "--SEP--\r\n"),
            ("a part without Content-Range", "--SEP\r\nContent-Type: a/b\r\n\r\nabcd\r\n--SEP--"),
            ("two Content-Range fields", "--SEP\r\nContent-Range: bytes 0-0/4\r\nContent-Range: bytes 0-0/4\r\n\r\na\r\n--SEP--"),
            ("an unknown complete length", part("0-3/*", "abcd") + "--SEP--"),
            ("another unit", "--SEP\r\nContent-Range: items 0-3/4\r\n\r\nabcd\r\n--SEP--"),
            ("a part shorter than its range", part("0-9/20", "abcd") + "--SEP--"),
            ("a part longer than its range", part("0-1/20", "abcd") + "--SEP--"),
            ("representations of different lengths", part("0-3/20", "abcd") + part("4-7/30", "efgh") + "--SEP--"),
            ("no closing delimiter", part("0-3/20", "abcd")),
            ("cut inside the data", "--SEP\r\nContent-Range: bytes 0-3/20\r\n\r\nab"),
            ("cut inside the head", "--SEP\r\nContent-Range: bytes 0-3/20"),
            ("a delimiter not at a line's start", "x--SEP\r\nContent-Range: bytes 0-0/1\r\n\r\na\r\n--SEP--"),
            ("garbage after a delimiter", "--SEPx\r\nContent-Range: bytes 0-0/1\r\n\r\na\r\n--SEP--"),
            ("another boundary", part("0-3/20", "abcd", boundary: "OTHER") + "--OTHER--"),
            ("a head larger than a part's limit", "--SEP\r\nX: " + String(repeating: "h", count: 9000)
                + "\r\nContent-Range: bytes 0-0/1\r\n\r\na\r\n--SEP--"),
        ]
        for (why, body) in cases { XCTAssertNil(parts(body), why) }
        XCTAssertNil(parts(String(repeating: part("0-0/1", "a"), count: MultipartByteranges.maxParts + 1) + "--SEP--"),
                     "more parts than the limit")
        XCTAssertEqual(parts(String(repeating: part("0-0/1", "a"), count: MultipartByteranges.maxParts) + "--SEP--")?.count,
                       MultipartByteranges.maxParts)
    }

    /// Every prefix of a well-formed body is refused, never read past.
    func testEveryCutOfAWellFormedBodyIsRefused() {
        let body = part("0-3/20", "abcd") + part("10-14/20", "klmno") + "--SEP--"
        let bytes = Array(body.utf8)
        for end in 0..<bytes.count {
            XCTAssertNil(bytes[..<end].withUnsafeBytes { MultipartByteranges.parts(of: $0, boundary: "SEP") }, "cut at \(end)")
        }
    }

    /// Parts that overlap or touch make one piece; the others stay apart,
    /// by first byte, each naming its parts.
    func testSegmentsJoinThePartsThatTouch() {
        func piece(_ first: Int, _ last: Int) -> PartialContent.Piece { PartialContent.Piece(first: first, last: last, length: 100) }
        let segments = PartialContent.segments(of: [piece(50, 59), piece(0, 9), piece(10, 19), piece(15, 30), piece(90, 99)])
        XCTAssertEqual(segments.map(\.piece), [piece(0, 30), piece(50, 59), piece(90, 99)])
        XCTAssertEqual(segments.map(\.parts), [[1, 2, 3], [0], [4]])
        XCTAssertTrue(PartialContent.segments(of: []).isEmpty)
        XCTAssertEqual(PartialContent.segments(of: [piece(0, 49), piece(50, 99)]).map(\.piece.isWhole), [true])
    }

    /// The body read as it arrives (`MultipartStream`): whole, byte by
    /// byte and cut anywhere in two, the same parts and data come; a body
    /// that is not well formed is known as such however it arrives.
    func testAStreamReadsTheSamePartsHoweverTheBodyArrives() {
        let body = Array(("preamble\r\n" + part("0-3/20", "abcd") + part("10-16/20", "\r\n--SEP", type: nil)
            + "--SEP--\r\nepilogue").utf8)
        func read(_ chunks: [ArraySlice<UInt8>]) -> (parts: [String], complete: Bool) {
            var stream = MultipartStream(boundary: "SEP")
            var parts: [String] = []
            for chunk in chunks {
                let wellFormed = Array(chunk).withUnsafeBytes { bytes in
                    stream.consume(bytes) { event in
                        switch event {
                        case .part(let piece, let type): parts.append("\(piece.contentRange) \(type ?? "-"): ")
                        case .data(let data): parts[parts.count - 1] += String(decoding: data, as: UTF8.self)
                        }
                    }
                }
                if !wellFormed { return (parts, false) }
            }
            return (parts, stream.isComplete)
        }
        let whole = read([body[...]])
        XCTAssertEqual(whole.parts, ["bytes 0-3/20 text/plain: abcd", "bytes 10-16/20 -: \r\n--SEP"])
        XCTAssertTrue(whole.complete)
        let byByte = read(body.indices.map { body[$0...$0] })
        XCTAssertEqual(byByte.parts, whole.parts)
        XCTAssertTrue(byByte.complete)
        for cut in 1..<body.count {
            let two = read([body[..<cut], body[cut...]])
            XCTAssertEqual(two.parts, whole.parts, "cut at \(cut)")
            XCTAssertTrue(two.complete, "cut at \(cut)")
        }
        for (why, bad) in [("garbage where a delimiter must follow the data", part("0-3/20", "abcdX") + "--SEP--"),
                           ("parts of different lengths", part("0-3/20", "abcd") + part("4-7/30", "efgh") + "--SEP--"),
                           ("a part without Content-Range", "--SEP\r\n\r\nabcd\r\n--SEP--"),
                           ("no closing delimiter", part("0-3/20", "abcd"))] {
            let bytes = Array(bad.utf8)
            XCTAssertFalse(read(bytes.indices.map { bytes[$0...$0] }).complete, why)
        }
    }

    /// A head or preamble that never ends is refused once past the limit,
    /// not held without bound.
    func testAStreamHoldsNoMoreThanAHeadsLimit() {
        var stream = MultipartStream(boundary: "SEP")
        let line = Array(String(repeating: "x", count: 100).utf8)
        var wellFormed = true, fed = 0
        while wellFormed && fed < 100_000 {
            wellFormed = line.withUnsafeBytes { stream.consume($0) { _ in } }
            fed += line.count
        }
        XCTAssertFalse(wellFormed)
        XCTAssertLessThan(fed, MultipartByteranges.maxPartHeaderBytes * 2)
        XCTAssertTrue(stream.isMalformed)
    }
}
