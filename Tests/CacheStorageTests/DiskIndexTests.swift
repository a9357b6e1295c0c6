import XCTest
import Foundation
import Synchronization
@testable import CacheStorage

/// The disk tier's index: a file stored again under its name replaces its
/// entry in one step, as hits (which take only the key's shard lock) see it.
final class DiskIndexTests: XCTestCase {
    private final class Reader: Sendable {
        let stop = Atomic<Bool>(false)
        let done = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        let missing = Atomic<Int>(0)
    }

    func testAFileStoredAgainIsNeverMissingToAHit() throws {
        let files = DiskFiles(keepLimit: 0)
        var index = DiskIndex(files: files)
        index.put(key: "/k", name: fileName("n"), bytes: 10, storedAt: 1, tags: ["t"])
        let reader = Reader()
        Thread {
            while !reader.stop.load(ordering: .relaxed) {
                if files.use("/k", overheadBytes: 0)?.isEmpty ?? true { reader.missing.wrappingAdd(1, ordering: .relaxed) }
                reader.reads.wrappingAdd(1, ordering: .relaxed)
            }
            reader.done.store(true, ordering: .releasing)
        }.start()
        // Replaced over and over while the other thread reads (at least
        // 20,000 replacements, and on until it has read 20,000 times).
        var puts = 0
        let deadline = Date().addingTimeInterval(20)
        while (puts < 20_000 || reader.reads.load(ordering: .relaxed) < 20_000) && Date() < deadline {
            puts += 1
            index.put(key: "/k", name: fileName("n"), bytes: 10 + puts % 2, storedAt: 1, tags: ["t"])
        }
        reader.stop.store(true, ordering: .relaxed)
        while !reader.done.load(ordering: .acquiring) && Date() < deadline.addingTimeInterval(5) { usleep(1_000) }
        XCTAssertTrue(reader.done.load(ordering: .acquiring))
        XCTAssertGreaterThanOrEqual(reader.reads.load(ordering: .relaxed), 20_000)
        XCTAssertEqual(reader.missing.load(ordering: .relaxed), 0, "a hit found the key without its file while it was stored again")
        XCTAssertEqual(index.count, 1)
        XCTAssertEqual(index.totalBytes, 10 + puts % 2)
        XCTAssertEqual(index.tagged["t"], ["/k"])
    }

    func testAReplacementMovesTotalsAndTags() {
        var index = DiskIndex(files: DiskFiles(keepLimit: 0))
        index.put(key: "/k", name: fileName("a"), bytes: 100, storedAt: 1, tags: ["old", "both"])
        index.put(key: "/k", name: fileName("b"), bytes: 50, storedAt: 1, tags: ["other"])
        index.put(key: "/k", name: fileName("a"), bytes: 70, storedAt: 2, tags: ["both", "new"])
        XCTAssertEqual(index.count, 2)
        XCTAssertEqual(index.totalBytes, 120)
        XCTAssertNil(index.tagged["old"], "no file of the key carries it any more")
        XCTAssertEqual(index.tagged["both"], ["/k"])
        XCTAssertEqual(index.tagged["new"], ["/k"])
        XCTAssertEqual(index.tagged["other"], ["/k"])
        XCTAssertEqual(index.files.use("/k", overheadBytes: 0)?.first { $0.name == fileName("a") }?.size, 70)
        index.remove(key: "/k", name: fileName("b"))
        XCTAssertNil(index.tagged["other"])
        XCTAssertEqual(index.count, 1)
        XCTAssertEqual(index.totalBytes, 70)
    }

    /// A hit that could not read the file it looked up drops that entry,
    /// not the one of a file stored again under the name meanwhile (which
    /// may have grown past what a hit reads whole: a miss, and the file
    /// lost to the totals, until it is stored once more).
    func testAHitDropsOnlyTheEntryItReadNotOneStoredSince() throws {
        var index = DiskIndex(files: DiskFiles(keepLimit: 0))
        index.put(key: "/k", name: fileName("n"), bytes: 1_000, storedAt: 1, tags: ["t"])
        let read = try XCTUnwrap(index.files.use("/k", overheadBytes: 0)?.first)
        index.put(key: "/k", name: fileName("n"), bytes: 2 << 20, storedAt: 2, tags: ["t"])
        XCTAssertFalse(index.remove(key: "/k", name: fileName("n"), id: read.id))
        XCTAssertEqual(index.files.use("/k", overheadBytes: 0)?.first?.size, 2 << 20)
        XCTAssertEqual(index.totalBytes, 2 << 20)
        XCTAssertEqual(index.tagged["t"], ["/k"])
        let current = try XCTUnwrap(index.files.use("/k", overheadBytes: 0)?.first)
        XCTAssertTrue(index.remove(key: "/k", name: fileName("n"), id: current.id))
        XCTAssertNil(index.files.use("/k", overheadBytes: 0))
        XCTAssertEqual(index.count, 0)
    }
}
