import Threads
import XCTest
import Foundation
import Synchronization
import SystemPackage
import CacheSemantics
@testable import CacheStorage

/// Disk hits served from what the index knows: corrupt files found there,
/// purges racing them, descriptors kept open between hits.
final class DiskFastPathTests: DiskTestCase {
    func record(_ key: String, tags: [String] = [], bytes: Int = 1000) -> DiskRecord {
        DiskRecord(head: testHead(key, tags: tags), storedAt: 1, body: [UInt8](repeating: 0x62, count: bytes))
    }

    func path(of key: String) throws -> String {
        let hash = DiskTier.keyHash(key)
        let sub = directory + "/" + DiskTier.subdirectory(hash)
        let name = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: sub).first { $0.hasPrefix(hash) })
        return sub + "/" + name
    }

    func openTier(limitBytes: Int = 100 << 20, keptFiles: Int = DiskFiles.defaultKeepLimit(),
                          recheck: UInt64 = DiskFiles.defaultRecheckNanoseconds) throws -> DiskTier {
        let tier = try DiskTier(directory: directory, limitBytes: limitBytes, keptFiles: keptFiles, keptFileRecheckNanoseconds: recheck) { _ in }
        tier.waitForIndex(timeoutSeconds: 10)
        return tier
    }

    func testAFileCutShortAfterItWasVerifiedIsAMissAndGoes() throws {
        let tier = try openTier(keptFiles: 0)
        tier.store(record("/cut"))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/cut").first?.bodyLength, 1000, "first hit: read and verified")
        XCTAssertEqual(tier.lookup("/cut").first?.bodyLength, 1000, "second hit: the fast path")
        let file = try path(of: "/cut")
        XCTAssertEqual(truncate(file, 500), 0)
        XCTAssertTrue(tier.lookup("/cut").isEmpty, "shorter than indexed: never served short")
        XCTAssertFalse(FileManager.default.fileExists(atPath: file), "and deleted")
        XCTAssertEqual(tier.stats.objects, 0)
    }

    func testAKeptFileCutShortIsFoundButItsBodyCannotBeRead() throws {
        let tier = try openTier()
        tier.store(record("/cut"))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/cut").first?.bodyLength, 1000, "first hit: read, verified and kept")
        XCTAssertEqual(truncate(try path(of: "/cut"), 500), 0)
        // Served as stored, the head is not read again: the body's read
        // finds the file short, and the proxy drops the entry (never a short body).
        let entry = try XCTUnwrap(tier.lookup("/cut").first)
        let body = try XCTUnwrap(entry.bodyFile)
        XCTAssertFalse(body.isReadable)
        guard case .failed = body.read(cachedOnly: true) else { return XCTFail("a short file is a failed read") }
        XCTAssertNil(entry.inMemory(), "never taken into memory short")
    }

    func testAKeptFileIsServedAsStored() throws {
        let tier = try openTier()
        tier.store(record("/as-stored", bytes: 3000))
        tier.flush(timeoutSeconds: 10)
        let first = try XCTUnwrap(tier.lookup("/as-stored").first)
        let second = try XCTUnwrap(tier.lookup("/as-stored").first)
        XCTAssertTrue(first.isSame(second), "one response read once, not decoded per hit")
        let body = try XCTUnwrap(second.bodyFile, "its body left in the file")
        XCTAssertEqual(second.body.count, 0)
        guard case .bytes(let bytes) = body.read(cachedOnly: false) else { return XCTFail("the body reads") }
        XCTAssertEqual(Array(bytes.buffer), [UInt8](repeating: 0x62, count: 3000))
        XCTAssertEqual(second.inMemory()?.body.count, 3000, "read in whole where it goes into memory")
        XCTAssertNil(second.inMemory()?.bodyFile)
    }

    func testASoftPurgeDropsWhatIsKeptOfAFile() throws {
        let tier = try openTier()
        tier.store(record("/soft"))
        tier.flush(timeoutSeconds: 10)
        XCTAssertGreaterThan(try XCTUnwrap(tier.lookup("/soft").first).lifetime, 0)
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 1)
        let purge = tier.purge(.key("/soft"), soft: true)
        XCTAssertEqual(purge.finish(), [])
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 0, "what was kept would serve it fresh")
        XCTAssertEqual(try XCTUnwrap(tier.lookup("/soft").first).lifetime, 0, "read again: marked stale")
        XCTAssertEqual(try XCTUnwrap(tier.lookup("/soft").first).lifetime, 0, "and not kept fresh again")
    }

    func testAFileReplacedSinceTheIndexWasReadIsServedNotDropped() throws {
        // A newer write of the same response renames a file of another size
        // into place between a lookup's index read and its file read.
        let tier = try openTier(keptFiles: 0)
        tier.store(record("/swap", bytes: 1000))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/swap").first?.bodyLength, 1000)
        let file = try path(of: "/swap")
        try Data(DiskFormat.encode(record("/swap", bytes: 2000))).write(to: URL(fileURLWithPath: file))
        XCTAssertEqual(tier.lookup("/swap").first?.bodyLength, 2000, "the file as it is now")
        XCTAssertTrue(FileManager.default.fileExists(atPath: file), "not taken for a corrupt one")
    }

    /// Holds the tier's index lock on a thread of its own (at most 20 s)
    /// until the returned function is called.
    private func holdIndexLock(of tier: DiskTier) -> () -> Void {
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let holder = Thread {
            tier.state.withLock { _ in
                held.signal()
                _ = release.wait(timeout: .now() + 20)
            }
        }
        holder.start()
        XCTAssertEqual(held.wait(timeout: .now() + 10), .success)
        return { release.signal() }
    }

    func testAHitTakesNoTierWideLock() throws {
        // Hits go through their key's shard of the file map only: one held
        // by a long purge, the writer or eviction, keeps no worker waiting.
        let tier = try openTier()
        tier.store(record("/free"))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/free").first?.bodyLength, 1000, "read and verified once")
        let release = holdIndexLock(of: tier), served = DispatchSemaphore(value: 0)
        let found = Locked(0)
        let reader = Thread {
            found.withLock { $0 = tier.lookup("/free").first?.bodyLength ?? -1 }
            served.signal()
        }
        reader.start()
        let result = served.wait(timeout: .now() + 5)
        release()
        XCTAssertEqual(result, .success, "the hit did not wait for the index lock")
        if result == .timedOut { _ = served.wait(timeout: .now() + 10) }  // it goes on once the lock is free
        XCTAssertEqual(found.withLock { $0 }, 1000)
    }

    func testAStreamFasterThanTheDiskPausesAndIsStoredWhole() throws {
        // The writer is held up (sealing another stream needs the index lock,
        // held here); an 80 MiB body streamed meanwhile, more than the queue
        // holds, must be asked to pause rather than be dropped once the queue
        // is full, and be stored whole once the writer has caught up.
        let disk = try openTier(limitBytes: 400 << 20)
        let store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20, maxObjectBytes: 1024), disk])
        let other = try XCTUnwrap(disk.beginStream(record("/other")))
        var writer = StoreWriter(testHead("/large"), into: store, fetchedSince: store.fetchToken, storedAt: 1,
                                 firstTierOnly: false, expectedLength: nil)
        let piece = [UInt8](repeating: 0x6C, count: 256 << 10)
        XCTAssertTrue(piece.withUnsafeBytes { writer.append($0) })
        XCTAssertTrue(writer.isStreaming)
        let release = holdIndexLock(of: disk), resumed = DispatchSemaphore(value: 0)
        disk.finish(other)  // the writer now waits for the lock
        var sent = piece.count, pauses = 0
        while sent < 80 << 20 && !writer.abandoned {
            if writer.pauseIfBacklogged({ resumed.signal() }) {
                pauses += 1
                if pauses == 1 {
                    XCTAssertLessThanOrEqual(sent, 20 << 20, "paused soon after 16 MiB were queued")
                    release()
                }
                XCTAssertEqual(resumed.wait(timeout: .now() + 20), .success, "told to go on once the writer caught up")
                continue
            }
            XCTAssertTrue(piece.withUnsafeBytes { writer.append($0) }, "not dropped after \(sent) bytes")
            sent += piece.count
        }
        if pauses == 0 { release() }
        XCTAssertGreaterThan(pauses, 0, "asked to pause while the writer was held up")
        XCTAssertTrue(writer.commit())
        store.flush(timeoutSeconds: 20)
        XCTAssertEqual(disk.lookup("/large").first?.bodyLength, 80 << 20)
    }

    /// An object the small memory tier leaves to the disk tier is written
    /// there (streamed: the store writer asks the first tier's limit), hit
    /// from there, and not promoted.
    func testAnObjectTooLargeForASmallShardedMemoryTierIsKeptOnDisk() throws {
        let disk = try openTier()
        let memory = MemoryTier(limitBytes: 2 << 20, maxObjectBytes: 8 << 20, slowerTierBehind: true)
        let store = TieredStore(tiers: [memory, disk])
        var writer = StoreWriter(testHead("/mid"), into: store, fetchedSince: store.fetchToken, storedAt: 1,
                                 firstTierOnly: false, expectedLength: 300 << 10)
        let body = [UInt8](repeating: 0x6D, count: 300 << 10)
        XCTAssertTrue(body.withUnsafeBytes { writer.append($0) })
        XCTAssertTrue(writer.commit())
        store.flush(timeoutSeconds: 10)
        XCTAssertEqual(store.lookup("/mid").first?.bodyLength, 300 << 10)
        XCTAssertEqual(memory.stats.objects, 0)
        XCTAssertEqual(disk.stats.objects, 1)
    }

    func testAHitFindsItsFileAfterTheSubdirectoryIsReplaced() throws {
        // Hits open files relative to each sub-directory's kept descriptor;
        // a sub-directory removed and made again (by an operator restoring
        // a backup, say) must not turn every later hit into a miss.
        let tier = try openTier()
        tier.store(record("/moved"))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/moved").first?.bodyLength, 1000, "opens and keeps the sub-directory")
        let file = try path(of: "/moved")
        let sub = (file as NSString).deletingLastPathComponent
        try FileManager.default.moveItem(atPath: sub, toPath: sub + "-old")
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: sub + "-old/" + (file as NSString).lastPathComponent, toPath: file)
        try FileManager.default.removeItem(atPath: sub + "-old")
        for hit in 0..<2 { XCTAssertEqual(tier.lookup("/moved").first?.bodyLength, 1000, "hit \(hit) after the move") }
        tier.store(record("/moved", bytes: 700))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(tier.lookup("/moved").first?.bodyLength, 700, "a newer file written there is found too")
    }

    func testAFlippedByteIsCaughtOnTheFirstHitAfterAStart() throws {
        do {
            let tier = try openTier()
            tier.store(record("/flip"))
            tier.store(record("/fine"))
            tier.flush(timeoutSeconds: 10)
        }
        // The lock is this process's: what a restart finds is a copy.
        let file = try path(of: "/flip")
        var bytes = try XCTUnwrap(FileManager.default.contents(atPath: file))
        bytes[bytes.count - 10] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: file))
        let copy = directory + "-restart"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let restarted = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        restarted.waitForIndex(timeoutSeconds: 10)
        XCTAssertEqual(restarted.stats.objects, 2, "the index rebuild reads headers only")
        XCTAssertTrue(restarted.lookup("/flip").isEmpty, "the checksum catches it on first use")
        XCTAssertEqual(restarted.stats.objects, 1)
        XCTAssertEqual(restarted.lookup("/fine").first?.bodyLength, 1000)
    }

    func testAPurgeRacingDiskHitsLeavesNothingBehind() throws {
        let disk = try openTier()
        let memory = MemoryTier(limitBytes: 64 << 20)
        let store = TieredStore(tiers: [memory, disk])
        let keys = (0..<200).map { "/race/\($0)" }
        for key in keys { XCTAssertTrue(store.insert(record(key, tags: ["t"]).response, fetchedSince: store.fetchToken)) }
        store.flush(timeoutSeconds: 10)
        XCTAssertEqual(store.clearMemory(), 200)
        let (hits, stop) = hammer(store, keys)
        XCTAssertEqual(store.purge(.tag("t"), soft: false), 200)
        stop()
        XCTAssertGreaterThan(hits(), 0, "the readers hit the disk tier during the race")
        for key in keys { XCTAssertTrue(store.lookup(key).isEmpty, key) }
        XCTAssertEqual(memory.stats.objects, 0, "no promotion outlived the purge")
        XCTAssertEqual(disk.stats.objects, 0)
        let left = (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
        XCTAssertEqual(left, [], "every file deleted")
    }

    /// A tier whose purge and removal take a while: between the memory
    /// tier's and the disk tier's.
    final class SlowPurgeTier: CacheTier, @unchecked Sendable {
        let name = "slow"
        let limitBytes = 0
        let maxObjectBytes = 0
        func lookup(_ key: String) -> Variants { Variants() }
        func insert(_ entry: CachedResponse, promoted: Bool) -> Bool { false }
        func remove(_ key: String) -> Int {
            usleep(100_000)
            return 0
        }
        func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge {
            usleep(100_000)
            return TierPurge(counts: [:])
        }
        func removeStored(before cutoff: Int64) -> [String: Int] { [:] }
        func removeAll() -> Int { 0 }
        var stats: TierStats { TierStats(name: name, objects: 0, bytes: 0, limitBytes: 0) }
    }

    func testADiskHitReadWhileAPurgeIsUnderWayIsNotPromoted() throws {
        // While the purge works through the tiers, a lookup that starts finds
        // the disk tier not yet purged: what it read must not be promoted
        // (the purge's number is published only once every tier is done).
        let disk = try openTier()
        let memory = MemoryTier(limitBytes: 64 << 20)
        let store = TieredStore(tiers: [memory, SlowPurgeTier(), disk])
        let keys = (0..<20).map { "/during/\($0)" }
        for key in keys { XCTAssertTrue(store.insert(record(key, tags: ["t"]).response, fetchedSince: store.fetchToken)) }
        store.flush(timeoutSeconds: 10)
        let (hits, stop) = hammer(store, keys)
        XCTAssertEqual(store.purge(.tag("t"), soft: false), 20)
        stop()
        XCTAssertGreaterThan(hits(), 0)
        XCTAssertEqual(keys.filter { !store.lookup($0).isEmpty }, [], "nothing promoted from before the purge")
    }

    func testADiskHitReadWhileARemovalIsUnderWayIsNotPromoted() throws {
        // An unsafe method's invalidation removes a key tier by tier: a
        // lookup in between reads the disk tier before its turn, and must
        // not put the response back into memory.
        let disk = try openTier()
        let memory = MemoryTier(limitBytes: 64 << 20)
        let store = TieredStore(tiers: [memory, SlowPurgeTier(), disk])
        XCTAssertTrue(store.insert(record("/posted").response, fetchedSince: store.fetchToken))
        store.flush(timeoutSeconds: 10)
        let (hits, stop) = hammer(store, ["/posted"])
        XCTAssertTrue(store.remove("/posted"))
        stop()
        XCTAssertGreaterThan(hits(), 0)
        XCTAssertTrue(store.lookup("/posted").isEmpty, "nothing promoted from before the removal")
        XCTAssertTrue(memory.lookup("/posted").isEmpty)
    }

    /// Two threads looking the keys up until `stop`, which waits for them;
    /// `hits` counts lookups that found something. Returns once some hits
    /// happened.
    private func hammer(_ store: TieredStore, _ keys: [String]) -> (hits: () -> Int, stop: () -> Void) {
        let done = Atomic<Bool>(false)
        let found = Atomic<Int>(0)
        let readers = (0..<2).map { n in
            Thread {
                var i = n
                while !done.load(ordering: .relaxed) {
                    if !store.lookup(keys[i % keys.count]).isEmpty { found.add(1, ordering: .relaxed) }
                    i += 7
                }
            }
        }
        for reader in readers { reader.start() }
        let deadline = Date().addingTimeInterval(10)
        while found.load(ordering: .relaxed) < 20 && Date() < deadline { usleep(200) }
        return ({ found.load(ordering: .relaxed) }, {
            done.store(true, ordering: .relaxed)
            while readers.contains(where: { !$0.isFinished }) && Date() < deadline { usleep(1_000) }
        })
    }

    // MARK: descriptors kept open between hits (never read once the file is
    // deleted or replaced, bounded, closed with their entry)

    func store(_ tier: DiskTier, _ record: DiskRecord) {
        tier.store(record)
        tier.flush(timeoutSeconds: 10)
    }

    private var openDescriptors: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }

    func testHitsShareOneKeptDescriptor() throws {
        let tier = try openTier()
        store(tier, record("/k"))
        XCTAssertEqual(tier.lookup("/k").first?.bodyLength, 1000)
        let afterFirstHit = openDescriptors
        for _ in 0..<4 { XCTAssertEqual(tier.lookup("/k").first?.bodyLength, 1000) }
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 1)
        XCTAssertEqual(openDescriptors, afterFirstHit, "no descriptor more for four more hits")
        XCTAssertEqual(tier.remove("/k"), 1)
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 0, "closed with its entry")
        XCTAssertEqual(openDescriptors, afterFirstHit - 1)
    }

    func testARefreshOfABodyLeftInItsFileIsWrittenWithThatBody() throws {
        // A 304 refreshes a disk hit whose body stayed in its file: the new
        // fields go to disk with the body copied from the old file, so a
        // restart finds the refreshed response, not the stale one.
        let tier = try openTier()
        store(tier, record("/refresh", bytes: 3000))
        let hit = try XCTUnwrap(tier.lookup("/refresh").first)
        let file = try XCTUnwrap(hit.bodyFile, "the body left in its file")
        let newer = testHead("/refresh", timing: ResponseTiming(requestTime: 50, responseTime: 50, dateValue: 50, ageValue: 0),
                             lifetime: 600)
        let refreshed = CachedResponse.make(head: newer, body: UnsafeRawBufferPointer(start: nil, count: 0), bodyFile: file)
        XCTAssertTrue(tier.insert(refreshed), "taken")
        tier.flush(timeoutSeconds: 10)
        let copy = directory + "-copy"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let reopened = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        reopened.waitForIndex(timeoutSeconds: 10)
        let found = try XCTUnwrap(reopened.records("/refresh").first)
        XCTAssertEqual(found.head.lifetime, 600)
        XCTAssertEqual(found.head.timing.responseTime, 50)
        let body = found.bodyFile.map { file -> [UInt8] in
            guard case .bytes(let bytes) = file.read(cachedOnly: false) else { return [] }
            return Array(bytes.buffer)
        } ?? found.body
        XCTAssertEqual(body, [UInt8](repeating: 0x62, count: 3000), "the body copied whole (its checksum checked on reading)")
        XCTAssertEqual(reopened.stats.objects, 1, "one file: the refreshed one replaced the stale one")
    }

    func testKeptDescriptorsAreGivenBackAndFewerKeptAfter() throws {
        let tier = try openTier()
        let keys = (0..<40).map { "/give-back-\($0)" }
        for key in keys { tier.store(record(key)) }
        tier.flush(timeoutSeconds: 10)
        for key in keys { XCTAssertEqual(tier.lookup(key).first?.bodyLength, 1000) }
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 40)
        let before = openDescriptors
        XCTAssertEqual(tier.releaseDescriptors(), 16, "a quarter, at least 16")
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 24)
        XCTAssertEqual(openDescriptors, before - 16, "closed at once: no hit was reading them")
        for key in keys { XCTAssertEqual(tier.lookup(key).first?.bodyLength, 1000, "every entry still served") }
        XCTAssertEqual(tier.files.kept.value.load(ordering: .relaxed), 24, "and no more kept than were left")
        XCTAssertEqual(tier.releaseDescriptors(), 16)
        XCTAssertEqual(tier.releaseDescriptors(), 8)
        XCTAssertEqual(tier.releaseDescriptors(), 0, "nothing more to give")
        XCTAssertEqual(tier.stats.objects, 40)
    }
}
