import CChecksum
import XCTest
@testable import CacheStorage

/// Records' CRC-32C: the standard's values, the same in pieces and by
/// either implementation, and damage the old 64-bit sum let through.
final class ChecksumTests: XCTestCase {
    /// Bit by bit, as the definition reads (reflected, polynomial 0x82F63B78).
    private func reference(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            c ^= UInt32(b)
            for _ in 0..<8 { c = c & 1 == 1 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }

    private func sum(_ bytes: [UInt8]) -> UInt64 {
        var sum = Checksum()
        sum.add(bytes)
        return sum.value
    }

    func testKnownValues() {
        XCTAssertEqual(sum(Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(sum([UInt8](repeating: 0, count: 32)), 0x8A91_36AA, "RFC 3720's 32 zero bytes")
        XCTAssertEqual(sum([UInt8](repeating: 0xFF, count: 32)), 0x62A8_AB43, "and 32 bytes of 0xFF")
        XCTAssertEqual(sum([]), 0)
    }

    func testEveryLengthAndSplitGivesTheReferenceByEitherPath() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<80 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let expected = reference(bytes)
            XCTAssertEqual(sum(bytes), UInt64(expected), "length \(length)")
            let table = bytes.withUnsafeBytes { larder_crc32c_table(0, $0.baseAddress, $0.count) }
            XCTAssertEqual(table, expected, "the table path, length \(length)")
            for split in stride(from: 0, through: length, by: 7) {
                var pieces = Checksum()
                pieces.add(bytes[..<split])
                pieces.add(bytes[split...])
                XCTAssertEqual(pieces.value, UInt64(expected), "split at \(split) of \(length)")
            }
        }
    }

    /// Flipping the top bit of two 64-bit words cancelled out in the old
    /// sum (bit 63 of a product depends only on bit 63 of what went in,
    /// so two flips there undo each other); CRC-32C notices, and the
    /// record is refused.
    func testTwoFlippedTopBitsAreCaught() {
        let record = DiskRecord(head: testHead("/w", fields: ["cache-control": "max-age=60"]), storedAt: 3,
                                body: [UInt8](repeating: 0x41, count: 64))
        var bytes = DiskFormat.encode(record)
        let bodyStart = bytes.count - 64
        let first = bodyStart + (7 - bodyStart % 8 + 8) % 8  // the top byte of a word (meta and body are summed from offset 32)
        let before = formatThreeSum(bytes[DiskFormat.fixedHeaderBytes...])
        bytes[first] ^= 0x80
        bytes[first + 16] ^= 0x80
        XCTAssertEqual(formatThreeSum(bytes[DiskFormat.fixedHeaderBytes...]), before, "the damage the old sum missed")
        XCTAssertThrowsError(try DiskFormat.decode(bytes)) { XCTAssertEqual($0 as? DiskFormat.Failure, .checksumMismatch) }
    }
}

/// The sum records of format 3 carried: FNV-1a style over little-endian
/// 64-bit words (tests make such records, and show what it missed).
func formatThreeSum(_ bytes: ArraySlice<UInt8>) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325
    let words = Array(bytes)
    var i = 0
    while i + 8 <= words.count {
        var w: UInt64 = 0
        for k in 0..<8 { w |= UInt64(words[i + k]) << (8 * UInt64(k)) }
        h = (h ^ w) &* 0x0000_0100_0000_01B3
        i += 8
    }
    for b in words[i...] { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
    return h
}
