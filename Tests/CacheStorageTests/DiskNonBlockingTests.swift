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

    /// A key of `base` whose file, dropped from the page cache, `declines`
    /// (a read that may not wait turns it down); an error when none did. A read
    /// with RWF_NOWAIT still starts the kernel's readahead, and a virtual
    /// disk backed by the host's cache may answer it before the read looks
    /// again: a try where a twin file shows that (`PageCache`), before or
    /// after the lookup, cannot tell,
    /// and another is made with a new key (up to five); when none can
    /// tell, the test is skipped. A lookup that reads cold files answers
    /// every try that can tell.
    private func coldKey(_ base: String, prepare: (String) -> Void, declines: (String) -> Bool,
                         _ expected: String) throws -> String {
        var told = false
        // Ten tries: under load the kernel may read a dropped page back before the try (CI once had five fail).
        for attempt in 0..<10 {
            let key = "\(base)-\(attempt)"
            prepare(key)
            try evict(key)
            guard PageCache.nowaitReadsFindDroppedPagesOut(in: directory) else { continue }
            if declines(key) { return key }
            // Answered: it tells only if the twin still stays out after it.
            if PageCache.nowaitReadsFindDroppedPagesOut(in: directory) { told = true }
        }
        if !told { throw XCTSkip("a dropped file is read back at once by a read that may not wait here: nothing stays cold") }
        throw NotCold(description: "no try was declined: \(expected)")
    }

    private struct NotCold: Error, CustomStringConvertible { let description: String }

    func testAFileInThePageCacheIsReadOnTheLoopAndAColdOneIsLeftToAnIOThread() throws {
        let tier = try openTier(keptFiles: 0)
        let key = try coldKey("/warm", prepare: { key in
            store(tier, key, bytes: 20_000)
            XCTAssertEqual(tier.lookup(key).first?.bodyLength, 20_000, "first hit: verified")
            XCTAssertEqual(tier.lookupWithoutBlocking(key, hash: KeyHash.of(key))?.first?.bodyLength, 20_000,
                           "in the page cache: read at once")
        }, declines: { tier.lookupWithoutBlocking($0, hash: KeyHash.of($0)) == nil }, "not in the page cache: declined, nothing read")
        let hash = KeyHash.of(key)
        XCTAssertEqual(tier.lookup(key, hash: hash).first?.bodyLength, 20_000, "the blocking lookup (on an I/O thread) reads it")
        XCTAssertEqual(tier.lookupWithoutBlocking(key, hash: hash)?.first?.bodyLength, 20_000, "and it is warm again")
        XCTAssertGreaterThanOrEqual(tier.stats.objects, 1, "declining dropped nothing")
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
        var body: FileBody?
        _ = try coldKey("/kept", prepare: { key in
            store(tier, key, bytes: 20_000)
            XCTAssertEqual(tier.lookup(key).first?.bodyFile?.length, 20_000, "first hit: verified, kept as stored")
        }, declines: { key in
            guard let entry = tier.lookupWithoutBlocking(key, hash: KeyHash.of(key))?.first else {
                XCTFail("no read needed: answered at once")
                return false
            }
            body = entry.bodyFile
            guard let body, case .wouldBlock = body.read(cachedOnly: true) else { return false }
            return true
        }, "the cold body is not read on the loop")
        guard case .bytes(let bytes) = try XCTUnwrap(body).read(cachedOnly: false) else { return XCTFail("read where waiting is allowed") }
        XCTAssertEqual(Array(bytes.buffer), [UInt8](repeating: 0x61, count: 20_000))
    }

    func testTheStoreDeclinesOnlyWhereASlowerTierWouldWait() throws {
        let disk = try openTier(keptFiles: 0)
        let tiered = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20), disk])
        let key = try coldKey("/cold", prepare: { key in
            store(disk, key, bytes: 10_000)
            _ = disk.lookup(key)  // verified once
        }, declines: { tiered.lookupWithoutBlocking($0) == nil }, "only on disk, not in the page cache")
        XCTAssertEqual(tiered.lookup(key).first?.bodyLength, 10_000, "read where waiting is allowed, and promoted")
        XCTAssertEqual(tiered.lookupWithoutBlocking(key)?.first?.bodyLength, 10_000, "a memory hit now: never declined")
        XCTAssertEqual(tiered.lookupWithoutBlocking("/nothing")?.count, 0, "a miss everywhere is an answer too")
    }
}
