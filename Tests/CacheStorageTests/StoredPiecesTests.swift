import XCTest
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif
import CacheSemantics
@testable import CacheStorage

/// A variant's several pieces (206s) side by side in the memory tier.
final class StoredPiecesTests: XCTestCase {
    private func piece(_ first: Int, _ last: Int, etag: String = "\"e\"", length: Int = 1000) -> CachedResponse {
        let head = testHead("/p", status: 206, fields: ["etag": etag, "content-range": "bytes \(first)-\(last)/\(length)"])
        return [UInt8](repeating: 0x61, count: last - first + 1).withUnsafeBytes { CachedResponse.make(head: head, body: $0) }
    }

    private func held(_ tier: MemoryTier) -> [String] {
        tier.lookup("/p").compactMap { $0.storedPiece.map { "\($0.first)-\($0.last)" } }.sorted()
    }

    func testPiecesOfOneRepresentationApartStayAndOthersReplaceThem() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(piece(0, 9))
        tier.insert(piece(100, 109))
        tier.insert(piece(500, 599))
        XCTAssertEqual(held(tier), ["0-9", "100-109", "500-599"])
        tier.insert(piece(95, 120))
        XCTAssertEqual(held(tier), ["0-9", "500-599", "95-120"], "one that overlaps goes (joining is the proxy's)")
        tier.insert(piece(10, 20))
        XCTAssertFalse(held(tier).contains("0-9"), "one that touches goes too")
        tier.insert(piece(700, 709, etag: "\"other\""))
        XCTAssertEqual(held(tier), ["700-709"], "another representation replaces them all")
        tier.insert(piece(800, 809, etag: "W/\"w\""))
        tier.insert(piece(900, 909, etag: "W/\"w\""))
        XCTAssertEqual(held(tier), ["900-909"], "without a strong ETag, one piece")
    }

    func testAVariantKeepsABoundedNumberOfPieces() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        for i in 0..<12 { tier.insert(piece(i * 20, i * 20 + 9)) }
        let kept = held(tier)
        XCTAssertEqual(kept.count, PartialContent.maxPiecesPerVariant)
        XCTAssertTrue(kept.contains("220-229"), "the newest stay")
        XCTAssertFalse(kept.contains("0-9"), "the oldest go")
    }
}
