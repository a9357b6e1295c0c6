import XCTest
import Foundation
import CacheSemantics
@testable import CacheStorage

/// Several pieces of one variant on disk, as in memory: the ones of one
/// representation that lie apart are kept side by side (bounded), the rest
/// replaced, and they are found again after a restart.
final class DiskPiecesTests: DiskTestCase {
    private func piece(_ first: Int, _ last: Int, of length: Int = 10_000, etag: String = "\"v1\"", storedAt: Int64 = 1) -> DiskRecord {
        let head = testHead("/video", status: 206, fields: ["cache-control": "max-age=60", "etag": etag,
                                                            "content-range": "bytes \(first)-\(last)/\(length)"])
        return DiskRecord(head: head, storedAt: storedAt, body: [UInt8](repeating: UInt8(first % 251), count: last - first + 1))
    }

    private func whole(length: Int = 10_000) -> DiskRecord {
        DiskRecord(head: testHead("/video", fields: ["cache-control": "max-age=60", "etag": "\"v1\""]), storedAt: 2,
                   body: [UInt8](repeating: 7, count: length))
    }

    private func ranges(_ tier: DiskTier) -> [String] {
        tier.records("/video").map { record in
            record.head.status == 206 ? record.head.field("content-range") ?? "?" : "whole \(record.body.count + (record.bodyFile?.length ?? 0))"
        }.sorted()
    }

    private func files() -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
    }

    func testPiecesOfOneRepresentationApartAreKeptAndOthersReplaced() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        tier.store(piece(0, 99))
        tier.store(piece(5_000, 5_099))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(ranges(tier), ["bytes 0-99/10000", "bytes 5000-5099/10000"], "a seek's piece beside the first")
        XCTAssertEqual(files().count, 2)

        tier.store(piece(0, 199))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(ranges(tier), ["bytes 0-199/10000", "bytes 5000-5099/10000"], "the same start: the longer piece replaces it")

        tier.store(piece(2_000, 2_099, etag: "\"v2\""))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(ranges(tier), ["bytes 2000-2099/10000"], "another representation's piece replaces the old ones")
        XCTAssertEqual(files().count, 1, "and their files go")

        tier.store(whole())
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(ranges(tier), ["whole 10000"], "a whole response replaces its variant's pieces")
        XCTAssertEqual(files().count, 1)

        tier.store(piece(300, 399))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(ranges(tier), ["bytes 300-399/10000"], "a newer piece replaces the whole, as in memory")
    }

    func testAVariantKeepsABoundedNumberOfPiecesTheNewest() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        let count = PartialContent.maxPiecesPerVariant + 3
        for i in 0..<count { tier.store(piece(i * 500, i * 500 + 99, storedAt: Int64(10 + i))) }
        tier.flush(timeoutSeconds: 10)
        let kept = ranges(tier)
        XCTAssertEqual(kept.count, PartialContent.maxPiecesPerVariant)
        XCTAssertFalse(kept.contains("bytes 0-99/10000"), "the oldest went: \(kept)")
        XCTAssertTrue(kept.contains("bytes \((count - 1) * 500)-\((count - 1) * 500 + 99)/10000"), "the newest stayed: \(kept)")
        XCTAssertEqual(files().count, PartialContent.maxPiecesPerVariant)
    }

    func testPiecesAreFoundAgainAfterARestart() throws {
        do {
            let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
            tier.store(piece(0, 99))
            tier.store(piece(7_000, 7_099))
            tier.flush(timeoutSeconds: 10)
        }
        // (The first tier still holds its directory: a second opens a copy.)
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        let deadline = Date().addingTimeInterval(10)
        while !reopened.stats.ready && Date() < deadline { usleep(5_000) }
        XCTAssertEqual(reopened.stats.objects, 2)
        XCTAssertEqual(ranges(reopened), ["bytes 0-99/10000", "bytes 7000-7099/10000"])
    }

    func testAPiecesNameIsNeverItsWholesAndWholesKeepTheirNames() {
        for first in [0, 1, 99, 5_000, 1 << 40] {
            let record = piece(first, first, of: (1 << 40) + 1)
            let name = DiskTier.fileName(record.head)
            let whole = DiskTier.fileName("/video", varyValues: [])
            XCTAssertEqual(name.key, whole.key)
            XCTAssertNotEqual(name, whole)
            XCTAssertEqual(name.variant & ~DiskTier.pieceSlotBits, whole.variant & ~DiskTier.pieceSlotBits)
        }
        XCTAssertEqual(DiskTier.fileName(whole().head), DiskTier.fileName("/video", varyValues: []))
    }
}
