import Compression
import XCTest

/// zstd and brotli as gzip is: what is encoded decodes back through any
/// split of the input and any room for output, in bounded pieces; bad
/// input is an error wherever it shows, never a crash or a hang.
final class CodecTests: XCTestCase {
    private let text = Array(String(repeating: "{\"id\": 42, \"name\": \"larder\", \"tags\": [\"a\", \"b\"]},", count: 400).utf8)

    /// Feeds `input` `step` bytes at a time into `room` bytes of output.
    private func decode(_ codec: Codec, _ input: [UInt8], step: Int = 1 << 20, room: Int = 4096, limit: Int = 64 << 20) throws -> [UInt8] {
        let decoder = try XCTUnwrap(codec.decoder())
        var out: [UInt8] = [], buffer = [UInt8](repeating: 0, count: room), offset = 0, rounds = 0
        while !decoder.finished {
            rounds += 1
            guard rounds < 5_000_000 else { XCTFail("\(codec): no progress"); break }
            let end = min(input.count, offset + step)
            let (consumed, produced) = try input[offset..<end].withUnsafeBytes { piece in
                try buffer.withUnsafeMutableBytes { try decoder.decode(piece, into: $0, isLast: end == input.count) }
            }
            XCTAssertLessThanOrEqual(produced, room)
            out += buffer[0..<produced]
            offset += consumed
            if out.count > limit { break }
        }
        return out
    }

    func testWhatIsEncodedComesBackWhateverTheSplits() throws {
        for codec in [Codec.zstd, .br, .gzip] {
            let packed = text.withUnsafeBytes { codec.compress($0) }
            XCTAssertLessThan(packed.count * 10, text.count, "\(codec)")
            for (step, room) in [(1 << 20, 4096), (1, 4096), (7, 1), (1000, 13), (1, 1)] {
                XCTAssertEqual(try decode(codec, packed, step: step, room: room), text, "\(codec) step \(step) room \(room)")
            }
            XCTAssertEqual(try decode(codec, [UInt8]().withUnsafeBytes { codec.compress($0) }), [], "\(codec): an empty body")
        }
        XCTAssertEqual(Codec(token: "ZSTD"), .zstd)
        XCTAssertEqual(Codec(token: "br"), .br)
        XCTAssertNil(Codec(token: "deflate"))
    }

    func testAZstdFrameDeclaresItsSizeAndFramesInTurnAreOneBody() throws {
        let packed = text.withUnsafeBytes { Zstd.compress($0) }
        XCTAssertEqual(packed.withUnsafeBytes { Zstd.declaredSize(UnsafeRawBufferPointer(rebasing: $0[..<18])) }, text.count)
        XCTAssertNil(Array("not zstd at all, no".utf8).withUnsafeBytes { Zstd.declaredSize($0) })
        let second = Array("second".utf8).withUnsafeBytes { Zstd.compress($0) }
        XCTAssertEqual(try decode(.zstd, packed + second, step: 5, room: 100), text + Array("second".utf8))
    }

    func testBadInputIsAnErrorNotACrash() throws {
        for codec in [Codec.zstd, .br] {
            let packed = text.withUnsafeBytes { codec.compress($0) }
            XCTAssertThrowsError(try decode(codec, Array(packed.prefix(packed.count / 2))), "\(codec): cut short")
            XCTAssertThrowsError(try decode(codec, Array(packed.dropLast())), "\(codec): its last byte missing")
            XCTAssertThrowsError(try decode(codec, Array("not compressed at all".utf8)), "\(codec)")
            XCTAssertThrowsError(try decode(codec, []), "\(codec): empty")
            var corrupt = packed
            corrupt[corrupt.count / 2] ^= 0xFF
            XCTAssertThrowsError(try decode(codec, corrupt), "\(codec): corrupt (zstd: its checksum)")
        }
        let packed = text.withUnsafeBytes { Brotli.compress($0) }
        XCTAssertThrowsError(try decode(.br, packed + [1, 2, 3]), "bytes after the brotli stream")
        for seed in 0..<200 {
            // Random bytes, one at a time: an error or some output, never a trap.
            var state = UInt64(seed + 1) &* 0x9E37_79B9_7F4A_7C15
            let junk = (0..<200).map { _ -> UInt8 in state ^= state << 13; state ^= state >> 7; state ^= state << 17; return UInt8(truncatingIfNeeded: state) }
            for codec in [Codec.zstd, .br] { _ = try? decode(codec, junk, step: 1, room: 64, limit: 1 << 20) }
        }
    }

    /// A small body that inflates a thousandfold comes out in pieces no
    /// larger than the room given.
    func testABombDecodesInBoundedPieces() throws {
        for codec in [Codec.zstd, .br] {
            let bomb = [UInt8](repeating: 0, count: 8 << 20).withUnsafeBytes { codec.compress($0) }
            XCTAssertLessThan(bomb.count, 8 << 10, "\(codec)")
            let out = try decode(codec, bomb, room: 65536, limit: 1 << 20)
            XCTAssertLessThanOrEqual(out.count, (1 << 20) + 65536, "\(codec): stopped at the limit, the room at a time")
            XCTAssertTrue(out.allSatisfy { $0 == 0 })
        }
    }
}
