import Compression
import XCTest

/// gzip through zlib: what goes in comes back, and bad input is an error.
final class GzipTests: XCTestCase {
    private func decompress(_ bytes: [UInt8], limit: Int = 1 << 20) throws -> [UInt8] {
        try bytes.withUnsafeBytes { try Gzip.decompress($0, limit: limit) }
    }

    func testWhatIsCompressedComesBackAndIsSmallerWhenRepetitive() throws {
        let json = Array(String(repeating: "{\"id\": 42, \"name\": \"larder\", \"tags\": [\"a\", \"b\"]},", count: 200).utf8)
        let packed = json.withUnsafeBytes { Gzip.compress($0) }
        XCTAssertEqual(Array(packed.prefix(2)), [0x1F, 0x8B], "a gzip member")
        XCTAssertLessThan(packed.count * 10, json.count)
        XCTAssertEqual(try decompress(packed), json)
        XCTAssertEqual(try decompress([UInt8]().withUnsafeBytes { Gzip.compress($0) }), [], "an empty body")
    }

    /// RFC 1952 section 2.2: members one after another are one body.
    func testConcatenatedMembersDecodeInTurn() throws {
        let a = Array("first ".utf8).withUnsafeBytes { Gzip.compress($0) }
        let b = Array("second".utf8).withUnsafeBytes { Gzip.compress($0) }
        XCTAssertEqual(try decompress(a + b), Array("first second".utf8))
    }

    func testBadInputIsAnErrorNotACrash() throws {
        let packed = Array(String(repeating: "x", count: 10_000).utf8).withUnsafeBytes { Gzip.compress($0) }
        XCTAssertThrowsError(try decompress(Array(packed.prefix(packed.count / 2)))) {
            XCTAssertEqual($0 as? Gzip.Failure, .invalid("the gzip data is cut short"))
        }
        XCTAssertThrowsError(try decompress(Array("not gzip at all".utf8)))
        XCTAssertThrowsError(try decompress([]))
        var corrupt = packed
        corrupt[corrupt.count - 5] ^= 0xFF  // the CRC-32
        XCTAssertThrowsError(try decompress(corrupt))
    }

    func testABodyThatInflatesBeyondTheLimitIsRefused() {
        let bomb = [UInt8](repeating: 0, count: 4 << 20).withUnsafeBytes { Gzip.compress($0, level: 9) }
        XCTAssertLessThan(bomb.count, 8 << 10)
        XCTAssertThrowsError(try decompress(bomb, limit: 1 << 20)) { XCTAssertEqual($0 as? Gzip.Failure, .tooLarge(limit: 1 << 20)) }
    }
}
