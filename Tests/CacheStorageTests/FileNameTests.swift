import XCTest
@testable import CacheStorage

/// A stored file's name as two numbers: written and read back exactly as
/// the strings earlier builds wrote, so their files are found after an upgrade.
final class FileNameTests: XCTestCase {
    func testTheNameIsTheKeysHashAndTheVariantsAsBefore() {
        for (key, vary) in [("/a", [] as [String?]), ("/images/logo.png?v=2", ["gzip", nil]), ("", [""])] {
            let name = DiskTier.fileName(key, varyValues: vary)
            let written = DiskTier.keyHash(key) + "-" + DiskTier.variantHash(vary) + ".lrd"
            XCTAssertEqual(name.description, written)
            XCTAssertEqual(FileName(written), name)
            XCTAssertEqual(DiskTier.subdirectory(name.subdirectory), DiskTier.subdirectory(DiskTier.keyHash(key)))
            XCTAssertEqual(name.withCString { String(cString: $0) }, written)
        }
    }

    func testExtremeHashesKeepTheirLeadingZeros() {
        let low = FileName(key: 0, variant: 0xF)
        XCTAssertEqual(low.description, "0000000000000000-000000000000000f.lrd")
        XCTAssertEqual(low.subdirectory, 0)
        let high = FileName(key: .max, variant: 0x0123_4567_89AB_CDEF)
        XCTAssertEqual(high.description, "ffffffffffffffff-0123456789abcdef.lrd")
        XCTAssertEqual(high.subdirectory, 255)
        XCTAssertEqual(FileName(high.description), high)
    }

    func testOtherNamesAreNotFileNames() {
        for other in ["", "0000000000000000-000000000000000f", "0000000000000000-000000000000000f.tmp",
                      "0000000000000000_000000000000000f.lrd", "000000000000000G-000000000000000f.lrd",
                      "0000000000000000-000000000000000F.lrd", "000000000000000-0000000000000000f.lrd",
                      "00000000000000000-000000000000000f.lrd", ".tmp-x-0000000000000000-000000000000000f.lrd-1",
                      "é000000000000000-000000000000000f.lrd"] {
            XCTAssertNil(FileName(other), other)
        }
    }

    /// Names come from a 64-bit hash, not the records' 32-bit checksum: a
    /// million keys would share names by the hundred with 32 bits.
    func testNamesUseSixtyFourBitsAndRarelyCollide() {
        let hashes = (0..<100_000).map { DiskTier.keyHashValue("/k/\($0)?page=\($0 % 7)") }
        XCTAssertEqual(Set(hashes).count, hashes.count)
        XCTAssertTrue(hashes.contains { $0 >> 32 != 0 }, "the upper half is used")
        XCTAssertNotEqual(DiskTier.variantHashValue(["a", nil]), DiskTier.variantHashValue([nil, "a"]))
    }
}
