import Threads
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

    /// A piece streamed to its file (as one too large for memory is), its
    /// bytes `first % 251` unless `fill` says otherwise.
    private func stream(_ tier: DiskTier, _ first: Int, _ last: Int, etag: String = "\"v1\"", fill: UInt8? = nil) throws {
        var record = piece(first, last, etag: etag, storedAt: 5)
        if let fill { record.body = [UInt8](repeating: fill, count: record.body.count) }
        let stream = try XCTUnwrap(tier.beginStream(DiskRecord(head: record.head, storedAt: 5, body: [])))
        record.body.withUnsafeBytes { XCTAssertTrue(tier.append(stream, $0)) }
        tier.finish(stream)
    }

    /// Bytes as runs ("0x100 100x100": a hundred 0s, a hundred 100s), short to compare and read.
    private func runs(_ bytes: [UInt8]) -> String {
        var out: [String] = []
        var i = 0
        while i < bytes.count {
            var j = i
            while j < bytes.count && bytes[j] == bytes[i] { j += 1 }
            out.append("\(bytes[i])x\(j - i)")
            i = j
        }
        return out.joined(separator: " ")
    }

    /// The one stored response of /video: its status, Content-Range and body (as `runs`).
    private func stored(_ tier: DiskTier) throws -> (status: Int, range: String?, body: String) {
        let records = tier.records("/video")
        XCTAssertEqual(records.count, 1, "one file: \(ranges(tier))")
        let record = try XCTUnwrap(records.first)
        var body = record.body
        if let file = record.bodyFile, case .bytes(let bytes) = file.read(cachedOnly: false) { body = [UInt8](bytes.buffer) }
        return (record.head.status, record.head.field("content-range"), runs(body))
    }

    func testAStreamedPieceJoinsTheStoredPiecesItTouches() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        tier.store(piece(0, 99))
        tier.flush(timeoutSeconds: 10)
        try stream(tier, 100, 199)
        tier.flush(timeoutSeconds: 10)
        var joined = try stored(tier)
        XCTAssertEqual(joined.status, 206)
        XCTAssertEqual(joined.range, "bytes 0-199/10000", "the piece that touches the stored one joins it")
        XCTAssertEqual(joined.body, "0x100 100x100")
        XCTAssertEqual(files().count, 1, "the two files it replaces go")

        // One that overlaps it and reaches the end: the whole, stored as the 200 it amounts to.
        try stream(tier, 150, 9_999, fill: 9)
        tier.flush(timeoutSeconds: 10)
        joined = try stored(tier)
        XCTAssertEqual(joined.status, 200)
        XCTAssertNil(joined.range)
        XCTAssertEqual(joined.body, "0x100 100x50 9x9850", "the stored bytes before it, then its own")
        XCTAssertEqual(files().count, 1)
    }

    func testAPieceInsideAStoredOneTakesItsPlaceInTheMiddle() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        try stream(tier, 1_000, 1_999, fill: 1)
        tier.flush(timeoutSeconds: 10)
        try stream(tier, 1_200, 1_299, fill: 2)
        tier.flush(timeoutSeconds: 10)
        let joined = try stored(tier)
        XCTAssertEqual(joined.range, "bytes 1000-1999/10000")
        XCTAssertEqual(joined.body, "1x200 2x100 1x700")
    }

    func testPiecesOfAnotherVersionOrWithoutAStrongValidatorNeverJoin() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        tier.store(piece(0, 99))
        tier.flush(timeoutSeconds: 10)
        try stream(tier, 100, 199, etag: "\"v2\"")
        tier.flush(timeoutSeconds: 10)
        var only = try stored(tier)
        XCTAssertEqual(only.range, "bytes 100-199/10000", "another version's piece replaces the stored one, never spliced to it")
        XCTAssertEqual(only.body, "100x100")

        try stream(tier, 200, 299, etag: "W/\"v2\"")
        tier.flush(timeoutSeconds: 10)
        only = try stored(tier)
        XCTAssertEqual(only.range, "bytes 200-299/10000", "a weak validator joins nothing")
    }

    func testAPieceThatHoldsAStoredOneReplacesItWithoutAJoin() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        let joins = Locked(0)
        tier.whenPiecesJoin { _ in joins.withLock { $0 += 1 } }
        tier.store(piece(100, 199))
        tier.flush(timeoutSeconds: 10)
        try stream(tier, 0, 999, fill: 4)
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(try stored(tier).body, "4x1000", "the new piece as it came")
        XCTAssertEqual(joins.withLock { $0 }, 0, "nothing to copy from the stored piece: no join, no file written again")
        try stream(tier, 1_000, 1_099, fill: 5)
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(try stored(tier).body, "4x1000 5x100")
        XCTAssertEqual(joins.withLock { $0 }, 1, "the faster tiers are told once")
    }

    func testPiecesWhoseJoinTheTierCouldNotStoreAreNotJoined() throws {
        // 12 KiB holds objects of at most 3 KiB: two pieces of 2,000 bytes fit, their join does not.
        let tier = try DiskTier(directory: directory, limitBytes: 12 << 10) { _ in }
        try stream(tier, 0, 1_999)
        tier.flush(timeoutSeconds: 10)
        try stream(tier, 2_000, 3_999)
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(try stored(tier).range, "bytes 2000-3999/10000", "the newer piece replaces the one it would join")
    }

    func testACorruptStoredPieceIsDroppedNotJoined() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        tier.store(piece(0, 99))
        tier.flush(timeoutSeconds: 10)
        // Its body damaged behind the tier's back, in a restart's copy (nothing checked it yet there).
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let file = copy + "/" + (try XCTUnwrap(files().first))
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: file))
        try handle.seek(toOffset: try handle.seekToEnd() - 10)
        handle.write(Data([0xFF]))
        try handle.close()
        let faults = Locked<[String]>([])
        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { line in faults.withLock { $0.append(line) } }
        reopened.waitForIndex(timeoutSeconds: 10)
        try stream(reopened, 100, 199)
        reopened.flush(timeoutSeconds: 10)
        let only = try stored(reopened)
        XCTAssertEqual(only.range, "bytes 100-199/10000", "the damaged bytes are not copied into a joined file")
        XCTAssertTrue(faults.withLock { $0.contains { $0.contains("dropping cache file") } }, "\(faults.withLock { $0 })")
    }

    func testTheMemoryTierForgetsAPieceJoinedOnDisk() throws {
        let disk = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        let store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20, maxObjectBytes: 1_000), disk])
        let small = piece(0, 99)
        XCTAssertTrue(small.body.withUnsafeBytes { store.insert(CachedResponse.make(head: small.head, body: $0), fetchedSince: store.fetchToken) })
        XCTAssertEqual(store.lookup("/video").first?.storedPiece, PartialContent.Piece(first: 0, last: 99, length: 10_000))
        var writer = StoreWriter(piece(100, 4_999).head, into: store, fetchedSince: store.fetchToken, storedAt: 5,
                                 firstTierOnly: false, expectedLength: 4_900)
        XCTAssertTrue(writer.isStreaming, "too large for memory")
        XCTAssertTrue([UInt8](repeating: 3, count: 4_900).withUnsafeBytes { writer.append($0) })
        XCTAssertTrue(writer.commit())
        store.flush(timeoutSeconds: 10)
        let found = store.lookup("/video")
        XCTAssertEqual(found.map(\.storedPiece), [PartialContent.Piece(first: 0, last: 4_999, length: 10_000)],
                       "the memory tier's piece no longer hides the joined one")
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
