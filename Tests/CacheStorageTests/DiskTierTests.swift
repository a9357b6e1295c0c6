import Threads
import XCTest
import Foundation
import CacheSemantics
@testable import CacheStorage

final class DiskTierTests: DiskTestCase {
    private func record(_ key: String, bytes: Int, vary: String? = nil) -> DiskRecord {
        DiskRecord(head: testHead(key, varyNames: vary == nil ? [] : ["accept"], varyValues: vary == nil ? [] : [vary]),
                   storedAt: 1, body: [UInt8](repeating: UInt8(key.utf8.count % 251), count: bytes))
    }

    private func waitForIndex(_ tier: DiskTier) {
        let deadline = Date().addingTimeInterval(10)
        while !tier.stats.ready && Date() < deadline { usleep(5_000) }
    }

    private func files() -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
    }

    func testStoreLookupAndVariants() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        tier.store(record("/a", bytes: 100, vary: "x"))
        tier.store(record("/a", bytes: 200, vary: "y"))
        tier.store(record("/b", bytes: 300))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.records("/a").map(\.body.count).sorted(), [100, 200])
        XCTAssertEqual(tier.records("/b").first?.body.count, 300)
        XCTAssertEqual(tier.records("/c"), [])
        XCTAssertEqual(tier.remove("/a"), 2)
        XCTAssertEqual(tier.records("/a"), [], "out of the index at once")
        XCTAssertEqual(files().count, 1, "and out of the stored names at once: a crash now cannot bring them back")
        tier.flush(timeoutSeconds: 10)  // the files themselves are deleted on the writer's thread
        XCTAssertEqual(allNames().filter { $0.hasSuffix(".gone") }, [])
    }

    /// Every name under the cache directory.
    private func allNames() -> [String] {
        FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []
    }

    func testARemovedFileLeftBehindByACrashIsDeletedAtTheNextStart() throws {
        let sub = directory + "/" + DiskTier.subdirectory(DiskTier.keyHash("/x"))
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        let leftover = sub + "/" + DiskTier.keyHash("/x") + "-0.lrd.gone"
        try Data(DiskFormat.encode(record("/x", bytes: 10))).write(to: URL(fileURLWithPath: leftover))
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        waitForIndex(tier)
        XCTAssertFalse(FileManager.default.fileExists(atPath: leftover), "deleted by the rebuild")
        XCTAssertEqual(tier.records("/x"), [], "never served")
    }

    /// A removal's files are deleted on the writer's thread, in order with
    /// the writes: the same response stored again right after survives.
    func testAFileRemovedThenStoredAgainIsKept() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        waitForIndex(tier)
        tier.store(record("/o", bytes: 100))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.remove("/o"), 1)
        tier.store(record("/o", bytes: 150))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.records("/o").map(\.body.count), [150], "the later write is not deleted by the earlier removal")
        XCTAssertEqual(files().count, 1)
    }

    func testEvictionKeepsTheLimitByBytes() throws {
        let limit = 1 << 20
        let tier = try DiskTier(directory: directory, limitBytes: limit) { _ in }
        waitForIndex(tier)
        for i in 0..<15 { tier.store(record("/k\(i)", bytes: 50_000)) }  // fits: about 816 KB
        tier.flush(timeoutSeconds: 10)
        XCTAssertFalse(tier.records("/k0").isEmpty)  // /k0 becomes the most recently used
        for i in 15..<23 { tier.store(record("/k\(i)", bytes: 50_000)) }  // over the limit: the oldest go
        tier.flush(timeoutSeconds: 10)
        XCTAssertLessThanOrEqual(tier.stats.bytes, limit)
        let onDisk = files().reduce(0) { total, name in
            total + ((try? FileManager.default.attributesOfItem(atPath: directory + "/" + name)[.size] as? Int) ?? 0)
        }
        XCTAssertLessThanOrEqual(onDisk, limit)
        XCTAssertFalse(tier.records("/k0").isEmpty, "the recently used entry survives")
        XCTAssertTrue(tier.records("/k1").isEmpty, "the least recently used went first")
        XCTAssertFalse(tier.records("/k22").isEmpty)
    }

    func testIndexIsRebuiltAndCorruptFilesAreDropped() throws {
        do {
            let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
            tier.store(record("/keep", bytes: 1000))
            tier.store(record("/corrupt", bytes: 1000))
            tier.flush(timeoutSeconds: 10)
            // Its own start-up scan (which removes temporary files) must be
            // over before one is planted below and the directory copied.
            waitForIndex(tier)
        }
        // Corrupt one file and leave a temporary file as a crash would.
        let corrupt = files().first { name in
            let data = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
            return String(decoding: data, as: UTF8.self).contains("/corrupt")
        }!
        var bytes = [UInt8](FileManager.default.contents(atPath: directory + "/" + corrupt)!)
        bytes[bytes.count - 10] ^= 0xFF
        FileManager.default.createFile(atPath: directory + "/" + corrupt, contents: Data(bytes))
        let sub = (corrupt as NSString).deletingLastPathComponent
        FileManager.default.createFile(atPath: directory + "/" + sub + "/.tmp-leftover", contents: Data([1, 2, 3]))

        // Another process would be refused; this one opens a second tier in
        // a fresh directory copy to check the rebuild.
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        XCTAssertEqual(reopened.records("/keep").first?.body.count, 1000)  // may run before the index is complete
        waitForIndex(reopened)
        XCTAssertEqual(reopened.stats.objects, 2)
        XCTAssertEqual(reopened.records("/corrupt"), [], "a checksum failure is a miss")
        XCTAssertEqual(reopened.stats.objects, 1, "and the file is dropped")
        XCTAssertFalse(FileManager.default.fileExists(atPath: copy + "/" + sub + "/.tmp-leftover"))
    }

    /// A file of the previous format (version 3, its 64-bit sum valid) and
    /// one of the current format with its version word changed to the
    /// current one from 3: both dropped at start, neither served.
    func testFilesOfTheOldFormatAreDroppedNotMisread() throws {
        do {
            let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
            tier.store(record("/current", bytes: 500))
            tier.store(record("/old", bytes: 500))
            tier.store(record("/relabelled", bytes: 500))
            tier.flush(timeoutSeconds: 10)
            waitForIndex(tier)
        }
        func file(of key: String) -> String {
            files().first { String(decoding: FileManager.default.contents(atPath: directory + "/" + $0) ?? Data(), as: UTF8.self)
                .contains(key) }!
        }
        // As version 3 wrote it: the version word 3 and its sum over meta and body.
        func writeOld(_ name: String, version: UInt8) {
            var bytes = [UInt8](FileManager.default.contents(atPath: directory + "/" + name)!)
            bytes[4] = 3
            let h = formatThreeSum(bytes[DiskFormat.fixedHeaderBytes...])
            for k in 0..<8 { bytes[24 + k] = UInt8(truncatingIfNeeded: h >> (8 * UInt64(k))) }
            bytes[4] = version
            FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(bytes))
        }
        let old = file(of: "/old"), relabelled = file(of: "/relabelled")
        writeOld(old, version: 3)
        writeOld(relabelled, version: UInt8(DiskFormat.version))
        try FileManager.default.removeItem(atPath: directory + "/lock")
        let reopened = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        waitForIndex(reopened)
        XCTAssertEqual(reopened.records("/old"), [], "an old file is a miss")
        XCTAssertEqual(reopened.records("/relabelled"), [], "a sum of the old kind does not pass as the new")
        XCTAssertEqual(reopened.records("/current").first?.body.count, 500)
        XCTAssertEqual(reopened.stats.objects, 1)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/" + old), "and it is deleted")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory + "/" + relabelled))
    }

    /// Large files' checksums are checked by the start-up rebuild, off any
    /// worker's loop: a good one is verified before its first hit, a
    /// corrupt one dropped without being asked for.
    /// `records` stored by one tier, then a restart whose index rebuild
    /// waits (as `serve`'s does): the first requests read their keys'
    /// files directly. (On a copy of the directory, removed at teardown:
    /// the first tier's threads still hold its lock.)
    private func restartWithDelayedRebuild(_ records: [DiskRecord], delayMilliseconds: Int) throws -> (DiskTier, String) {
        do {
            let first = try DiskTier(directory: directory, limitBytes: 10 << 20) { _ in }
            first.waitForIndex(timeoutSeconds: 10)
            for record in records { first.store(record) }
            first.flush(timeoutSeconds: 10)
        }
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        return (try DiskTier(directory: copy, limitBytes: 10 << 20, rebuildDelayMilliseconds: delayMilliseconds) { _ in }, copy)
    }

    func testADelayedRebuildServesStoredFilesMeanwhile() throws {
        let (tier, _) = try restartWithDelayedRebuild([record("/early", bytes: 100)], delayMilliseconds: 2_000)
        XCTAssertFalse(tier.stats.ready, "not indexed yet")
        XCTAssertEqual(tier.lookup("/early").first?.bodyLength, 100, "found without the index")
        XCTAssertTrue(tier.lookup("/never-stored").isEmpty)
    }

    /// A hard purge from a worker's loop (`purgeNow`) does not wait for a
    /// start-up rebuild: what it matches is neither served while the
    /// index is incomplete (read from its file) nor indexed by the rebuild,
    /// and its files go; others stay.
    func testAPurgeDuringTheRebuildWaitsForNothingAndDropsWhatItMatches() throws {
        let queries = ["/q1", "/q2"].map { DiskRecord(head: testHead($0, tags: ["queries"]), storedAt: 1, body: [1, 2, 3]) }
        let (tier, copy) = try restartWithDelayedRebuild(queries + [record("/other", bytes: 10)], delayMilliseconds: 1_000)
        XCTAssertFalse(tier.stats.ready)
        let purge = tier.purgeNow(.tag("queries"))
        XCTAssertFalse(tier.stats.ready, "it did not wait for the rebuild")
        _ = purge.finish()
        XCTAssertTrue(tier.lookup("/q1").isEmpty, "not served from its file meanwhile")
        XCTAssertEqual(tier.lookup("/other").first?.bodyLength, 10)
        waitForIndex(tier)
        XCTAssertTrue(tier.stats.ready)
        XCTAssertTrue(tier.lookup("/q2").isEmpty, "not indexed by the rebuild")
        XCTAssertEqual(tier.stats.objects, 1, "only /other indexed")
        tier.flush(timeoutSeconds: 10)
        let left = (FileManager.default.enumerator(atPath: copy)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
        XCTAssertEqual(left.count, 1, "the purged responses' files deleted")
    }

    func testTheRebuildVerifiesLargeFiles() throws {
        do {
            let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
            tier.store(record("/big-good", bytes: 2 << 20))
            tier.store(record("/big-bad", bytes: 2 << 20))
            tier.flush(timeoutSeconds: 10)
            waitForIndex(tier)
        }
        func file(of key: String) -> String {
            files().first { name in
                let data = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
                return String(decoding: data.prefix(4096), as: UTF8.self).contains(key)
            }!
        }
        let good = file(of: "/big-good"), bad = file(of: "/big-bad")
        var bytes = [UInt8](FileManager.default.contents(atPath: directory + "/" + bad)!)
        bytes[bytes.count - 100] ^= 0xFF
        FileManager.default.createFile(atPath: directory + "/" + bad, contents: Data(bytes))
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")

        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        let goodName = try XCTUnwrap(FileName((good as NSString).lastPathComponent))
        let deadline = Date().addingTimeInterval(10)
        while (reopened.stats.objects != 1 || !reopened.files.isVerified("/big-good", goodName)) && Date() < deadline {
            usleep(5_000)
        }
        XCTAssertEqual(reopened.stats.objects, 1, "the corrupt one is dropped by the rebuild")
        XCTAssertTrue(reopened.files.isVerified("/big-good", goodName), "the good one is verified before any hit")
        XCTAssertFalse(FileManager.default.fileExists(atPath: copy + "/" + bad))
        XCTAssertEqual(reopened.records("/big-good").first?.bodyFile?.length, 2 << 20)
    }

    /// A `.lrd` file under a name Larder does not give (or in another
    /// sub-directory than its name's) could never be looked up: the start-up
    /// rebuild deletes it, as it deletes unreadable ones, instead of
    /// counting it forever.
    func testMisnamedFilesAreDroppedAtStart() throws {
        do {
            let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
            tier.store(record("/kept", bytes: 100))
            tier.flush(timeoutSeconds: 10)
            waitForIndex(tier)
        }
        let good = try XCTUnwrap(files().first)
        let sub = (good as NSString).deletingLastPathComponent
        let other = sub == "00" ? "01" : "00"
        try FileManager.default.createDirectory(atPath: directory + "/" + other, withIntermediateDirectories: true)
        let misplaced = other + "/" + (good as NSString).lastPathComponent
        let misnamed = sub + "/copy.lrd"
        for planted in [misplaced, misnamed] {
            try FileManager.default.copyItem(atPath: directory + "/" + good, toPath: directory + "/" + planted)
        }
        XCTAssertEqual(files().count, 3)
        // (The first tier still holds its directory: a second opens a copy.)
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let lines = Locked<[String]>([])
        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { line in lines.withLock { $0.append(line) } }
        waitForIndex(reopened)
        XCTAssertEqual(reopened.stats.objects, 1)
        XCTAssertEqual(reopened.records("/kept").first?.body.count, 100)
        let left = (FileManager.default.enumerator(atPath: copy)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
        XCTAssertEqual(left, [good])
        XCTAssertTrue(lines.withLock { $0 }.contains { $0.contains("misnamed") }, "\(lines.withLock { $0 })")
    }

    func testASecondTierOnTheSameDirectoryIsRefused() throws {
        let first = try DiskTier(directory: directory, limitBytes: 1 << 20) { _ in }
        XCTAssertThrowsError(try DiskTier(directory: directory, limitBytes: 1 << 20) { _ in }) { error in
            guard case DiskTier.OpenError.inUse = error else { return XCTFail("\(error)") }
        }
        _ = first
    }

    func testAnUnusableDirectoryIsReported() {
        XCTAssertThrowsError(try DiskTier(directory: "/dev/null/larder", limitBytes: 1 << 20) { _ in }) { error in
            guard case DiskTier.OpenError.unusable = error else { return XCTFail("\(error)") }
        }
    }

    /// Two keys whose file names collide: the full key in the file decides.
    func testAHashCollisionIsDetectedByTheFullKey() throws {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        waitForIndex(tier)
        tier.store(record("/a", bytes: 10))
        tier.flush(timeoutSeconds: 10)
        // Put /a's file where /b's would be, as a colliding hash would.
        let a = DiskTier.keyHash("/a"), b = DiskTier.keyHash("/b")
        let variant = DiskTier.variantHash([])
        try FileManager.default.createDirectory(atPath: directory + "/" + DiskTier.subdirectory(b), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: directory + "/" + DiskTier.subdirectory(a) + "/" + a + "-" + variant + ".lrd",
                                         toPath: directory + "/" + DiskTier.subdirectory(b) + "/" + b + "-" + variant + ".lrd")
        XCTAssertEqual(tier.records("/a").first?.key, "/a")
        // The index does not know the copy; a fresh tier finds it while rebuilding or after.
        let other = directory + "-other"
        try FileManager.default.copyItem(atPath: directory, toPath: other)
        defer { try? FileManager.default.removeItem(atPath: other) }
        try FileManager.default.removeItem(atPath: other + "/lock")
        let second = try DiskTier(directory: other, limitBytes: 100 << 20) { _ in }
        waitForIndex(second)
        XCTAssertEqual(second.records("/b"), [], "another key's file is never served for /b")
        XCTAssertEqual(second.records("/a").first?.key, "/a")
    }

    /// Write failures (here: every fan-out directory is a plain file) are
    /// logged and leave the tier consistent.
    func testWriteFailuresAreLoggedAndIndexStaysConsistent() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for byte in 0..<256 {
            FileManager.default.createFile(atPath: directory + "/" + String(format: "%02x", byte), contents: Data())
        }
        final class Log: @unchecked Sendable {
            let lock = NSLock()
            var lines: [String] = []
        }
        let log = Log()
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20) { line in
            log.lock.lock(); log.lines.append(line); log.lock.unlock()
        }
        for i in 0..<20 { tier.store(record("/f\(i)", bytes: 100)) }
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.stats.objects, 0)
        XCTAssertEqual(tier.records("/f1"), [])
        log.lock.lock()
        let lines = log.lines
        log.lock.unlock()
        XCTAssertFalse(lines.isEmpty)
        XCTAssertLessThan(lines.count, 5, "faults are rate-limited: \(lines)")
    }
}
