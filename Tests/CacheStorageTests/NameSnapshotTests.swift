import XCTest
import Foundation
import Synchronization
@testable import CacheStorage

/// Sub-directories' names recorded for the next start: a restart's first
/// lookups read them instead of listing directories, and never trust one
/// that no longer describes its directory.
final class NameSnapshotTests: DiskTestCase {
    private func record(_ key: String) -> DiskRecord {
        DiskRecord(head: testHead(key), storedAt: 1, body: [UInt8](repeating: 0x61, count: 100))
    }

    private func subdirectory(of key: String) -> Int { FileName(key: DiskTier.keyHashValue(key), variant: 0).subdirectory }

    /// A tier on `directory` beside one still running there (whose threads
    /// keep its lock file: the new tier takes a new one), its index rebuild
    /// far off, so lookups read the files directly as after a restart.
    private func restarted() throws -> DiskTier {
        try FileManager.default.removeItem(atPath: directory + "/lock")
        return try DiskTier(directory: directory, limitBytes: 10 << 20, rebuildDelayMilliseconds: 600_000) { _ in }
    }

    private func running() throws -> DiskTier {
        let tier = try DiskTier(directory: directory, limitBytes: 10 << 20) { _ in }
        tier.waitForIndex(timeoutSeconds: 10)
        return tier
    }

    /// A running tier that stored `keys` and recorded its names, as at a stop.
    private func recorded(_ keys: [String]) throws -> DiskTier {
        let tier = try running()
        for key in keys { tier.store(record(key)) }
        tier.flush(timeoutSeconds: 10)
        tier.recordForRestart()
        return tier
    }

    private func snapshotPath(of key: String) -> String { directory + "/names/" + DiskTier.subdirectory(subdirectory(of: key)) }

    // MARK: the format

    func testASnapshotReadsBackAsWritten() {
        let snapshot = NameSnapshot(stamp: .init(inode: 42, seconds: 1_800_000_000, nanoseconds: 123_456_789),
                                    names: [FileName(key: 0xAB00_0000_0000_0001, variant: 7), FileName(key: .max, variant: .max)])
        let bytes = snapshot.encoded()
        XCTAssertEqual(bytes.withUnsafeBytes { NameSnapshot(decoding: $0) }, snapshot)
        let empty = NameSnapshot(stamp: .init(inode: 1, seconds: 0, nanoseconds: 0), names: [])
        XCTAssertEqual(empty.encoded().withUnsafeBytes { NameSnapshot(decoding: $0) }, empty)
    }

    func testAnyDamagedOrForeignSnapshotIsRefused() {
        let bytes = NameSnapshot(stamp: .init(inode: 42, seconds: 5, nanoseconds: 6),
                                 names: (0..<10).map { FileName(key: UInt64($0) << 56, variant: UInt64($0)) }).encoded()
        for index in bytes.indices {
            var flipped = bytes
            flipped[index] ^= 0x10
            XCTAssertNil(flipped.withUnsafeBytes { NameSnapshot(decoding: $0) }, "byte \(index) changed")
        }
        for count in [0, 3, 39, 44, bytes.count - 1] {
            XCTAssertNil(Array(bytes[..<count]).withUnsafeBytes { NameSnapshot(decoding: $0) }, "cut to \(count) bytes")
        }
        XCTAssertNil((bytes + [0]).withUnsafeBytes { NameSnapshot(decoding: $0) }, "a byte more")
        var huge = bytes
        huge[8...11] = [0xFF, 0xFF, 0xFF, 0xFF]  // a count no snapshot holds
        XCTAssertNil(huge.withUnsafeBytes { NameSnapshot(decoding: $0) })
    }

    /// A directory changed within the last tick of the file system's clock
    /// could change again without its time moving: it is not recorded.
    func testOnlyASettledDirectoryIsRecorded() {
        let now: Int64 = 1_800_000_000_123_456_789
        XCTAssertFalse(NameSnapshot.isSettled(changed: now, now: now))
        XCTAssertFalse(NameSnapshot.isSettled(changed: now - 99_000_000, now: now))
        XCTAssertTrue(NameSnapshot.isSettled(changed: now - 100_000_000, now: now))
        // Whole seconds: a file system without finer times, whose next
        // change may carry the same second for up to a second.
        let whole: Int64 = 1_800_000_000_000_000_000
        XCTAssertFalse(NameSnapshot.isSettled(changed: whole, now: whole + 1_900_000_000))
        XCTAssertTrue(NameSnapshot.isSettled(changed: whole, now: whole + 2_100_000_000))
        XCTAssertFalse(NameSnapshot.isSettled(changed: .max, now: .min), "no overflow trap on a wild time")
    }

    // MARK: with a tier

    func testARestartFindsStoredKeysWithoutListingADirectory() throws {
        _ = try recorded(["/a", "/b", "/c"])
        XCTAssertTrue(FileManager.default.fileExists(atPath: snapshotPath(of: "/a")))

        let second = try restarted()
        XCTAssertFalse(second.stats.ready, "not indexed yet")
        for key in ["/a", "/b", "/c"] { XCTAssertEqual(second.lookup(key).first?.bodyLength, 100, key) }
        XCTAssertTrue(second.lookup("/never-stored").isEmpty)
        XCTAssertEqual(second.listings.load(ordering: .relaxed), 0, "every sub-directory read from its snapshot")
    }

    /// A file stored after the snapshot changed its directory: the snapshot
    /// is not trusted, the directory is listed, and the file is found.
    func testAFileStoredSinceTheSnapshotIsFound() throws {
        let first = try recorded(["/a"])
        let later = try XCTUnwrap((0..<100_000).lazy.map { "/later-\($0)" }.first { self.subdirectory(of: $0) == self.subdirectory(of: "/a") })
        first.store(record(later))
        first.flush(timeoutSeconds: 10)

        let second = try restarted()
        XCTAssertEqual(second.lookup(later).first?.bodyLength, 100, "stored after the snapshot")
        XCTAssertEqual(second.lookup("/a").first?.bodyLength, 100)
        XCTAssertEqual(second.listings.load(ordering: .relaxed), 1, "its directory listed once")
    }

    func testADamagedSnapshotIsListedAroundNotTrusted() throws {
        _ = try recorded(["/a"])
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: snapshotPath(of: "/a")))
        bytes[bytes.count - 20] ^= 0xFF  // inside the last name
        XCTAssertTrue(FileManager.default.createFile(atPath: snapshotPath(of: "/a"), contents: bytes))

        let second = try restarted()
        XCTAssertEqual(second.lookup("/a").first?.bodyLength, 100)
        XCTAssertEqual(second.listings.load(ordering: .relaxed), 1)
    }

    /// The start-up rebuild records each settled directory it lists, so
    /// even a start after a crash (no snapshot written at the stop) leaves
    /// them for the next.
    func testTheRebuildRecordsSettledDirectories() throws {
        let first = try running()
        first.store(record("/a"))
        first.flush(timeoutSeconds: 10)
        let sub = directory + "/" + DiskTier.subdirectory(subdirectory(of: "/a"))
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: sub)
        XCTAssertFalse(FileManager.default.fileExists(atPath: snapshotPath(of: "/a")))

        try FileManager.default.removeItem(atPath: directory + "/lock")
        let rebuilt = try running()
        XCTAssertTrue(rebuilt.stats.ready)
        XCTAssertTrue(FileManager.default.fileExists(atPath: snapshotPath(of: "/a")), "written by the rebuild")
        let third = try restarted()
        XCTAssertEqual(third.lookup("/a").first?.bodyLength, 100)
        XCTAssertEqual(third.listings.load(ordering: .relaxed), 0)
    }
}
