import XCTest
import Foundation
import Glibc
import CacheSemantics
import TestSupport
@testable import CacheStorage

/// A worker's loop asks the disk tier without waiting for the disk: a file
/// in the page cache is read at once; one that is not (dropped from the
/// page cache here with posix_fadvise), a large file's head, or a
/// sub-directory not listed yet makes the lookup decline, to be made on an
/// I/O thread instead. A file kept open since a hit needs no read at all:
/// its head is answered at once, and its body read as the page cache has it.
final class DiskNonBlockingTests: XCTestCase {
    private var directory = ""

    override func setUp() {
        // Beside the build, not in /tmp: a tmpfs keeps every page in memory, and nothing could be cold there.
        directory = FileManager.default.currentDirectoryPath + "/.build/larder-nowait-\(UUID().uuidString)"
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `keptFiles: 0`: every hit reads its file (nothing kept open).
    private func openTier(keptFiles: Int = DiskFiles.defaultKeepLimit()) throws -> DiskTier {
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20, keptFiles: keptFiles) { _ in }
        tier.waitForIndex(timeoutSeconds: 10)
        return tier
    }

    private func store(_ tier: DiskTier, _ key: String, bytes: Int) {
        tier.store(DiskRecord(head: testHead(key), storedAt: 1, body: [UInt8](repeating: 0x61, count: bytes)))
        tier.flush(timeoutSeconds: 10)
    }

    private func path(of key: String) throws -> String {
        let hash = DiskTier.keyHash(key)
        let sub = directory + "/" + DiskTier.subdirectory(hash)
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: sub).first { $0.hasPrefix(hash) })
        return sub + "/" + name
    }

    /// Drops the file's pages from the page cache (written back first).
    private func evict(_ key: String) throws {
        guard PageCache.drop(try path(of: key)) else {
            throw XCTSkip("this file system keeps the file's pages in memory (tmpfs?): nothing can be cold here")
        }
    }

    /// Whether `lookup` (one that may not wait) declines `key` once its
    /// file is out of the page cache. The kernel may bring the pages back
    /// on its own (an earlier read's readahead landing after the drop):
    /// then answering was right, and the drop is made again (up to five
    /// times). An answer while the page is still out is a failure.
    private func declinedWhileCold(_ key: String, _ lookup: () -> Variants?) throws -> Bool {
        let file = try path(of: key)
        for _ in 0..<5 {
            try evict(key)
            guard lookup() != nil else { return true }
            guard PageCache.isCached(file) == true else { return false }
        }
        return false
    }

    func testAFileInThePageCacheIsReadOnTheLoopAndAColdOneIsLeftToAnIOThread() throws {
        let tier = try openTier(keptFiles: 0)
        store(tier, "/warm", bytes: 20_000)
        let hash = KeyHash.of("/warm")
        XCTAssertEqual(tier.lookup("/warm", hash: hash).first?.bodyLength, 20_000, "first hit: verified")
        XCTAssertEqual(tier.lookupWithoutBlocking("/warm", hash: hash)?.first?.bodyLength, 20_000, "in the page cache: read at once")

        XCTAssertTrue(try declinedWhileCold("/warm") { tier.lookupWithoutBlocking("/warm", hash: hash) },
                      "not in the page cache: declined, nothing read")
        XCTAssertEqual(tier.lookup("/warm", hash: hash).first?.bodyLength, 20_000, "the blocking lookup (on an I/O thread) reads it")
        XCTAssertEqual(tier.lookupWithoutBlocking("/warm", hash: hash)?.first?.bodyLength, 20_000, "and it is warm again")
        XCTAssertEqual(tier.stats.objects, 1, "declining dropped nothing")
    }

    func testALargeFilesHeadIsReadOffTheLoop() throws {
        let tier = try openTier()
        store(tier, "/large", bytes: DiskTier.inlineReadLimit + 1)
        let hash = KeyHash.of("/large")
        XCTAssertNil(tier.lookupWithoutBlocking("/large", hash: hash), "its head is read on an I/O thread")
        XCTAssertEqual(tier.lookup("/large", hash: hash).first?.bodyFile?.length, DiskTier.inlineReadLimit + 1)
        XCTAssertEqual(tier.lookupWithoutBlocking("/large", hash: hash)?.first?.bodyFile?.length, DiskTier.inlineReadLimit + 1,
                       "kept open since: answered at once")
        XCTAssertTrue(tier.lookupWithoutBlocking("/missing", hash: KeyHash.of("/missing"))?.isEmpty ?? false, "a miss is known at once")
    }

    func testAKeptFileIsAnsweredAtOnceAndItsColdBodyIsLeftToTheOutput() throws {
        let tier = try openTier()
        store(tier, "/kept", bytes: 20_000)
        let hash = KeyHash.of("/kept")
        XCTAssertEqual(tier.lookup("/kept", hash: hash).first?.bodyFile?.length, 20_000, "first hit: verified, kept as stored")
        try evict("/kept")
        let entry = try XCTUnwrap(tier.lookupWithoutBlocking("/kept", hash: hash)?.first, "no read needed: answered at once")
        let body = try XCTUnwrap(entry.bodyFile)
        guard case .wouldBlock = body.read(cachedOnly: true) else { return XCTFail("the cold body is not read on the loop") }
        guard case .bytes(let bytes) = body.read(cachedOnly: false) else { return XCTFail("read where waiting is allowed") }
        XCTAssertEqual(Array(bytes.buffer), [UInt8](repeating: 0x61, count: 20_000))
    }

    func testTheStoreDeclinesOnlyWhereASlowerTierWouldWait() throws {
        let disk = try openTier(keptFiles: 0)
        let tiered = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20), disk])
        store(disk, "/cold", bytes: 10_000)
        _ = disk.lookup("/cold")  // verified once
        XCTAssertTrue(try declinedWhileCold("/cold") {
            _ = tiered.clearMemory()  // what an answer promoted
            return tiered.lookupWithoutBlocking("/cold")
        }, "only on disk, not in the page cache")
        XCTAssertEqual(tiered.lookup("/cold").first?.bodyLength, 10_000, "read where waiting is allowed, and promoted")
        XCTAssertEqual(tiered.lookupWithoutBlocking("/cold")?.first?.bodyLength, 10_000, "a memory hit now: never declined")
        XCTAssertEqual(tiered.lookupWithoutBlocking("/nothing")?.count, 0, "a miss everywhere is an answer too")
    }
}
