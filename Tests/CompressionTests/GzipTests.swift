import Compression
import XCTest

/// gzip through zlib: what goes in comes back, and bad input is an error.
final class GzipTests: XCTestCase {
    /// The whole body decoded through `GzipDecoder` (none larger than `limit`).
    private func decompress(_ bytes: [UInt8], limit: Int = 1 << 20) throws -> [UInt8] {
        let decoder = try GzipDecoder()
        var out: [UInt8] = [], room = [UInt8](repeating: 0, count: 4096), offset = 0
        while !decoder.finished {
            let (consumed, produced) = try bytes[offset...].withUnsafeBytes { input in
                try room.withUnsafeMutableBytes { try decoder.decode(input, into: $0, isLast: true) }
            }
            offset += consumed
            out += room[0..<produced]
            if out.count > limit { throw Bomb() }
        }
        return out
    }

    private struct Bomb: Error {}

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
            XCTAssertEqual($0 as? CodingFailure, CodingFailure("the gzip data is cut short"))
        }
        XCTAssertThrowsError(try decompress(Array("not gzip at all".utf8)))
        XCTAssertThrowsError(try decompress([]))
        var corrupt = packed
        corrupt[corrupt.count - 5] ^= 0xFF  // the CRC-32
        XCTAssertThrowsError(try decompress(corrupt))
    }

    /// A small body that inflates a thousandfold comes out in pieces no
    /// larger than the room given: nothing holds it whole.
    func testABombDecodesInBoundedPieces() throws {
        let bomb = [UInt8](repeating: 0, count: 4 << 20).withUnsafeBytes { Gzip.compress($0, level: 9) }
        XCTAssertLessThan(bomb.count, 8 << 10)
        let decoder = try GzipDecoder()
        var room = [UInt8](repeating: 1, count: 4096), offset = 0, total = 0, calls = 0
        while !decoder.finished && calls < 10_000 {
            calls += 1
            let (consumed, produced) = try bomb[offset...].withUnsafeBytes { input in
                try room.withUnsafeMutableBytes { try decoder.decode(input, into: $0, isLast: true) }
            }
            XCTAssertLessThanOrEqual(produced, room.count)
            XCTAssertTrue(room[0..<produced].allSatisfy { $0 == 0 })
            (offset, total) = (offset + consumed, total + produced)
        }
        XCTAssertEqual(total, 4 << 20)
        XCTAssertThrowsError(try decompress(bomb, limit: 1 << 20)) { XCTAssertTrue($0 is Bomb) }
    }
}

/// The piecewise decoder: any split of the input and any room for output
/// give the same bytes; bad input is an error wherever it shows.
final class GzipDecoderTests: XCTestCase {
    /// Feeds `input` `step` bytes at a time into `room` bytes of output.
    private func decode(_ input: [UInt8], step: Int, room: Int) throws -> [UInt8] {
        let decoder = try GzipDecoder()
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: room)
        var offset = 0, rounds = 0
        while !decoder.finished {
            rounds += 1
            guard rounds < 10_000_000 else { XCTFail("no progress"); break }
            let end = min(input.count, offset + step)
            let (consumed, produced) = try input[offset..<end].withUnsafeBytes { piece in
                try buffer.withUnsafeMutableBytes { try decoder.decode(piece, into: $0, isLast: end == input.count) }
            }
            out += buffer[0..<produced]
            offset += consumed
        }
        return out
    }

    func testAnySplitOfInputAndOutputGivesTheSameBytes() throws {
        let text = Array(String(repeating: "larder keeps responses; ", count: 300).utf8)
        let a = text.withUnsafeBytes { Gzip.compress($0) }
        let b = Array("and the second member".utf8).withUnsafeBytes { Gzip.compress($0) }
        for (step, room) in [(1, 1), (1, 4096), (7, 3), (a.count + b.count, 1), (100_000, 100_000)] {
            XCTAssertEqual(try decode(a + b + [0, 0, 0], step: step, room: room), text + Array("and the second member".utf8),
                           "step \(step), room \(room)")
        }
    }

    func testCutCorruptAndForeignInputIsAnErrorAtAnySplit() throws {
        let packed = Array(String(repeating: "y", count: 50_000).utf8).withUnsafeBytes { Gzip.compress($0) }
        for step in [1, 13, packed.count] {
            XCTAssertThrowsError(try decode(Array(packed.dropLast(3)), step: step, room: 512), "cut, step \(step)")
            var corrupt = packed
            corrupt[corrupt.count - 6] ^= 0x55
            XCTAssertThrowsError(try decode(corrupt, step: step, room: 512), "corrupt, step \(step)")
            XCTAssertThrowsError(try decode(Array("<html>not gzip</html>".utf8), step: step, room: 512))
        }
        XCTAssertThrowsError(try decode([], step: 1, room: 16), "nothing at all")
    }

    func testTheDeclaredSizeIsTheTrailersHint() {
        let body = [UInt8](repeating: 7, count: 300_000).withUnsafeBytes { Gzip.compress($0) }
        XCTAssertEqual(body.withUnsafeBytes { Gzip.declaredSize($0) }, 300_000)
        XCTAssertNil([UInt8](repeating: 0, count: 10).withUnsafeBytes { Gzip.declaredSize($0) })
    }
}
