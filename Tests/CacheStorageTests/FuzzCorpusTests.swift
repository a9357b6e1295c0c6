import Foundation
import XCTest
import CacheSemantics
@testable import CacheStorage

/// Replays fuzz/corpus/disk_record (see fuzz/run.sh): any file decodes to a
/// record that re-encodes to itself, or fails cleanly.
final class FuzzCorpusTests: XCTestCase {
    func testDiskRecordCorpus() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("fuzz/corpus/disk_record")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        XCTAssertGreaterThan(names.count, 3, "the corpus is in the repository")
        var decoded = 0, snapshots = 0
        for name in names {
            guard let data = FileManager.default.contents(atPath: dir.appendingPathComponent(name).path) else { continue }
            let bytes = Array(data)
            if let record = try? DiskFormat.decode(bytes) {
                decoded += 1
                XCTAssertEqual(try DiskFormat.decode(DiskFormat.encode(record)), record, name)
                let hit = try DiskFormat.decodeEntry(bytes, key: record.key, verify: true)
                XCTAssertEqual(hit?.entry.storedHead, record.response.storedHead, name)
                // As the target: the head made to say a joined piece, or the whole.
                let piece = PartialContent.Piece(first: 0, last: 9, length: 20)
                XCTAssertEqual(record.head.holding(piece).headPrefix.withUnsafeBytes { HeadFields.first("content-range", in: $0) },
                               piece.contentRange, name)
                let whole = record.head.holding(PartialContent.Piece(first: 0, last: 19, length: 20))
                XCTAssertEqual(whole.status, 200, name)
                XCTAssertNil(whole.headPrefix.withUnsafeBytes { HeadFields.first("content-range", in: $0) }, name)
                if let held = hit?.entry.storedPiece { XCTAssertEqual(held.count, hit?.entry.bodyLength, name) }
            }
            // As fuzz/targets/disk_record.swift: whatever decodes has an age
            // and a freshness at any clock reading and shift, never a trap.
            for shift: Int64 in [0, Int64.min, Int64.max] {
                guard let (_, entry) = try? DiskFormat.decodeEntry(bytes, key: "/", verify: false, shiftSeconds: shift) else { continue }
                for now: Int64 in [Int64.min, 0, 1_700_000_000, Int64.max] {
                    XCTAssertGreaterThanOrEqual(entry.currentAge(now: now), 0, name)
                }
            }
            if bytes.count > DiskFormat.fixedHeaderBytes { _ = try? DiskFormat.decodeMeta(bytes[DiskFormat.fixedHeaderBytes...]) }
            // And as a sub-directory's name snapshot: one that decodes re-encodes to itself.
            if let snapshot = bytes.withUnsafeBytes({ NameSnapshot(decoding: $0) }) {
                snapshots += 1
                XCTAssertTrue(snapshot.encoded() == bytes, name)
            }
        }
        XCTAssertGreaterThan(decoded, 0, "the seeds include real cache files")
        XCTAssertGreaterThan(snapshots, 0, "and a real name snapshot")
    }
}
