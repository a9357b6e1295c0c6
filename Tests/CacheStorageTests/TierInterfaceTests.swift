import Foundation
import Threads
import XCTest
import CacheSemantics
@testable import CacheStorage

/// A third tier, written against `CacheTier` alone (as a fleet's shared
/// tier would be): the store, purges, statistics and streamed bodies must
/// reach it without any change elsewhere.
final class RecordingTier: CacheTier, StreamingTier, @unchecked Sendable {
    let name = "recording"
    let limitBytes = 1 << 30
    let maxObjectBytes = 1 << 30
    private let entries = Locked<[String: [CachedResponse]]>([:])
    /// Run inside a lookup, after what it found was read (a purge racing the read).
    var duringLookup: (() -> Void)?

    func lookup(_ key: String) -> Variants {
        let found = Variants(entries.withLock { $0[key] ?? [] })
        if let hook = duringLookup {
            duringLookup = nil
            hook()
        }
        return found
    }

    func insert(_ entry: CachedResponse, promoted: Bool) -> Bool {
        entries.withLock { $0[entry.key] = ($0[entry.key] ?? []).filter { $0.varyValues != entry.varyValues } + [entry] }
        return true
    }

    final class Stream: TierStream {
        let tier: RecordingTier
        let head: StoredHead
        var body: [UInt8] = []
        init(tier: RecordingTier, head: StoredHead) {
            self.tier = tier
            self.head = head
        }
        func append(_ bytes: UnsafeRawBufferPointer) -> Bool {
            body += bytes
            return true
        }
        func commit() { _ = body.withUnsafeBytes { tier.insert(CachedResponse.make(head: head, body: $0), promoted: false) } }
        func abort() { body = [] }
    }

    func beginStream(_ head: StoredHead, storedAt: Int64) -> (any TierStream)? { Stream(tier: self, head: head) }

    func remove(_ key: String) -> Int { entries.withLock { $0.removeValue(forKey: key)?.count ?? 0 } }

    func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge {
        TierPurge(counts: entries.withLock { all in
            var counts: [String: Int] = [:]
            for (key, variants) in all {
                let hit = variants.filter { scope.matches(key: key, tags: $0.tags) }
                guard !hit.isEmpty else { continue }
                counts[key] = hit.count
                all[key] = soft ? variants.map { scope.matches(key: key, tags: $0.tags) ? $0.markedStale() : $0 }
                    : variants.filter { !scope.matches(key: key, tags: $0.tags) }
                if all[key]!.isEmpty { all[key] = nil }
            }
            return counts
        })
    }

    func removeStored(before cutoff: Int64) -> [String: Int] { [:] }

    func removeAll() -> Int { entries.withLock { all in defer { all = [:] }; return all.values.reduce(0) { $0 + $1.count } } }

    var stats: TierStats {
        TierStats(name: name, objects: entries.withLock { $0.values.reduce(0) { $0 + $1.count } }, bytes: 0, limitBytes: limitBytes)
    }
}

final class TierInterfaceTests: XCTestCase {
    private func head(_ key: String, tags: [String] = []) -> StoredHead { testHead(key, tags: tags) }

    private func entry(_ key: String, tags: [String] = [], bytes: Int = 10) -> CachedResponse {
        [UInt8](repeating: 1, count: bytes).withUnsafeBytes { CachedResponse.make(head: head(key, tags: tags), body: $0) }
    }

    func testATierAddedThroughTheInterfaceAloneStoresServesPromotesAndPurges() {
        let memory = MemoryTier(limitBytes: 1 << 20)
        let third = RecordingTier()
        let store = TieredStore(tiers: [memory, third])
        XCTAssertTrue(store.insert(entry("/a", tags: ["t"]), fetchedSince: store.fetchToken))
        XCTAssertTrue(store.insert(entry("/b"), fetchedSince: store.fetchToken))
        XCTAssertEqual(third.stats.objects, 2, "every tier takes a store")
        XCTAssertEqual(store.stats.map(\.name), ["memory", "recording"])

        XCTAssertEqual(store.clearMemory(), 2)
        XCTAssertEqual(store.lookup("/a").first?.bodyLength, 10, "found in the third tier")
        XCTAssertEqual(memory.lookup("/a").count, 1, "and promoted into memory")

        XCTAssertEqual(store.purge(.tag("t"), soft: false), 1)
        XCTAssertTrue(store.lookup("/a").isEmpty, "a purge reaches every tier")
        XCTAssertEqual(store.lookup("/b").count, 1)
        XCTAssertTrue(store.remove("/b"))
        XCTAssertTrue(third.lookup("/b").isEmpty)
    }

    func testEachTierOffersExactlyTheCapabilitiesItConformsTo() throws {
        // Given by the capability protocols' extensions, not written by the
        // tiers: a conformance is all it takes, in this module or another.
        let recording = RecordingTier()
        XCTAssertTrue(recording.asStreaming === recording)
        XCTAssertNil(recording.asAdmitting)
        XCTAssertNil(recording.asBlocking)
        XCTAssertNil(recording.asLifetime)
        let memory = MemoryTier(limitBytes: 1 << 20)
        XCTAssertTrue(memory.asAdmitting === memory)
        XCTAssertTrue(memory.asLifetime === memory)
        XCTAssertNil(memory.asStreaming)
        XCTAssertNil(memory.asBlocking)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caps-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let disk = try DiskTier(directory: directory, limitBytes: 1 << 20) { _ in }
        XCTAssertTrue(disk.asStreaming === disk)
        XCTAssertTrue(disk.asBlocking === disk)
        XCTAssertTrue(disk.asLifetime === disk)
        XCTAssertNil(disk.asAdmitting)
        disk.flush(timeoutSeconds: 5)
    }

    func testATierThatDeclinesAdmissionIsNotOfferedThePromotion() {
        // Admission is asked first, without the store's purge lock; only a
        // tier that would take the entry is offered it.
        final class Choosy: CacheTier, AdmittingTier, @unchecked Sendable {
            let name = "choosy"
            let limitBytes = 1 << 20
            let maxObjectBytes = 1 << 20
            let admitting: Bool
            let offers = Locked(0)
            init(admitting: Bool) { self.admitting = admitting }
            func lookup(_ key: String) -> Variants { Variants() }
            func wouldAdmit(_ entry: CachedResponse, keyHash: Int) -> Bool { admitting }
            func insert(_ entry: CachedResponse, promoted: Bool) -> Bool {
                if promoted { offers.withLock { $0 += 1 } }
                return admitting
            }
            func remove(_ key: String) -> Int { 0 }
            func purge(_ scope: PurgeScope, soft: Bool) -> TierPurge { TierPurge(counts: [:]) }
            func removeStored(before cutoff: Int64) -> [String: Int] { [:] }
            func removeAll() -> Int { 0 }
            var stats: TierStats { TierStats(name: name, objects: 0, bytes: 0, limitBytes: limitBytes) }
        }
        for admitting in [false, true] {
            let front = Choosy(admitting: admitting)
            let slow = RecordingTier()
            let store = TieredStore(tiers: [front, slow])
            slow.insert(entry("/k"), promoted: false)
            XCTAssertEqual(store.lookup("/k").count, 1, "served from the slower tier either way")
            XCTAssertEqual(front.offers.withLock { $0 }, admitting ? 1 : 0)
        }
    }

    func testAPromotionLosesToAPurgeThatRanMeanwhile() {
        let memory = MemoryTier(limitBytes: 1 << 20)
        let third = RecordingTier()
        let store = TieredStore(tiers: [memory, third])
        let token = store.fetchToken
        _ = store.purge(.key("/late"), soft: false)
        XCTAssertFalse(store.insert(entry("/late"), fetchedSince: token), "the fetch began before the purge")
        XCTAssertTrue(third.lookup("/late").isEmpty)
    }

    /// A change that runs while a lookup reads the slower tier: the
    /// promotion of what it read (taken without the store's lock) must not
    /// outlive it in the faster tier.
    private func promotionRacing(_ change: @escaping (TieredStore) -> Void, key: String = "/k", tags: [String] = []) -> (memory: MemoryTier, served: Int) {
        let memory = MemoryTier(limitBytes: 1 << 20)
        let slow = RecordingTier()
        let store = TieredStore(tiers: [memory, slow])
        slow.insert(entry(key, tags: tags), promoted: false)
        slow.duringLookup = { change(store) }
        let served = store.lookup(key).count
        return (memory, served)
    }

    func testAPromotionLosesToAPurgeThatRanWhileTheSlowerTierWasRead() {
        let (memory, served) = promotionRacing { _ = $0.purge(.key("/k"), soft: false) }
        XCTAssertEqual(served, 1, "the lookup began before the purge: it may answer")
        XCTAssertTrue(memory.lookup("/k").isEmpty, "but what it read is not kept after the purge")
    }

    func testAPromotionLosesToATagPurgeAndASoftOne() {
        XCTAssertTrue(promotionRacing({ _ = $0.purge(.tag("t"), soft: false) }, tags: ["t"]).memory.lookup("/k").isEmpty)
        XCTAssertTrue(promotionRacing({ _ = $0.purge(.tag("t"), soft: true) }, tags: ["t"]).memory.lookup("/k").isEmpty,
                      "a soft purge leaves no fresh copy in memory either")
    }

    func testAPromotionLosesToARemovalThatRanWhileTheSlowerTierWasRead() {
        XCTAssertTrue(promotionRacing { $0.remove("/k") }.memory.lookup("/k").isEmpty)
    }

    func testAPromotionSurvivesAPurgeOfOtherKeys() {
        let (memory, _) = promotionRacing { _ = $0.purge(.key("/other"), soft: false) }
        XCTAssertEqual(memory.lookup("/k").count, 1, "judged under the lock, and kept")
        let (quiet, _) = promotionRacing { _ in }
        XCTAssertEqual(quiet.lookup("/k").count, 1, "nothing ran meanwhile: kept without the lock")
    }

    func testAWriterStreamsWhatOutgrowsMemoryToTheFirstTierThatTakesStreams() {
        let memory = MemoryTier(limitBytes: 1 << 20, maxObjectBytes: 100)
        let third = RecordingTier()
        let store = TieredStore(tiers: [memory, third])
        var writer = StoreWriter(head("/big"), into: store, fetchedSince: store.fetchToken, storedAt: 1, firstTierOnly: false,
                                 expectedLength: nil)
        let piece = [UInt8](repeating: 7, count: 60)
        XCTAssertTrue(piece.withUnsafeBytes { writer.append($0) })
        XCTAssertFalse(writer.isStreaming, "60 bytes fit memory's objects")
        XCTAssertTrue(piece.withUnsafeBytes { writer.append($0) })
        XCTAssertTrue(writer.isStreaming, "120 do not: the body so far went to the stream")
        XCTAssertTrue(writer.commit())
        XCTAssertEqual(third.lookup("/big").first?.bodyLength, 120)
        XCTAssertTrue(memory.lookup("/big").isEmpty)

        // A small body stays in memory and reaches every tier on commit.
        var small = StoreWriter(head("/small"), into: store, fetchedSince: store.fetchToken, storedAt: 1, firstTierOnly: true,
                                expectedLength: 60)
        XCTAssertTrue(piece.withUnsafeBytes { small.append($0) })
        XCTAssertTrue(small.commit())
        XCTAssertEqual(memory.lookup("/small").first?.bodyLength, 60)
        XCTAssertTrue(third.lookup("/small").isEmpty, "firstTierOnly keeps it in memory")

        // Too large for memory with nothing else allowed: given up, nothing kept.
        var memoryOnly = StoreWriter(head("/no"), into: store, fetchedSince: store.fetchToken, storedAt: 1, firstTierOnly: true,
                                     expectedLength: nil)
        XCTAssertTrue(piece.withUnsafeBytes { memoryOnly.append($0) })
        XCTAssertFalse(piece.withUnsafeBytes { memoryOnly.append($0) })
        XCTAssertFalse(memoryOnly.commit())
        XCTAssertTrue(store.lookup("/no").isEmpty)
    }

    /// What the fleet's shared tier is offered: a streamed body too, when
    /// it is no larger than the writer was told to keep.
    func testAStreamedBodyIsCommittedForTheFleetWhenItFitsWhatIsKept() {
        let memory = MemoryTier(limitBytes: 1 << 20, maxObjectBytes: 100)
        let store = TieredStore(tiers: [memory, RecordingTier()])
        let piece = [UInt8](repeating: 7, count: 60)
        func write(_ key: String, pieces: Int, expectedLength: Int?, keep: Int) -> StoreWriter {
            var writer = StoreWriter(head(key), into: store, fetchedSince: store.fetchToken, storedAt: 1, firstTierOnly: false,
                                     expectedLength: expectedLength, keepStreamedUpTo: keep)
            for _ in 0..<pieces { XCTAssertTrue(piece.withUnsafeBytes { writer.append($0) }) }
            XCTAssertTrue(writer.isStreaming, key)
            XCTAssertTrue(writer.commit(), key)
            return writer
        }
        // Outgrew memory while it came (no length known): what was collected is kept, then the rest.
        XCTAssertEqual(write("/grew", pieces: 3, expectedLength: nil, keep: 200).committed.map { Array($0.body) },
                       [UInt8](repeating: 7, count: 180))
        // Known to be too large for memory: streamed and kept from the first byte.
        XCTAssertEqual(write("/known", pieces: 3, expectedLength: 180, keep: 200).committed?.bodyLength, 180)
        // Larger than what is kept: nothing offered (the stream still stores it).
        XCTAssertNil(write("/larger", pieces: 4, expectedLength: nil, keep: 200).committed)
        XCTAssertNil(write("/known-larger", pieces: 4, expectedLength: 240, keep: 200).committed)
        XCTAssertEqual(store.lookup("/larger").first?.bodyLength, 240)
        XCTAssertNil(write("/not-kept", pieces: 3, expectedLength: nil, keep: 0).committed, "keeping is asked for")
    }
}
