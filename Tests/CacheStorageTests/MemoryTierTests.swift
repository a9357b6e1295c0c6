import XCTest
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif
import CacheSemantics
@testable import CacheStorage

final class MemoryTierTests: XCTestCase {
    private func entry(_ key: String, bodyBytes: Int, vary: [String] = [], values: [String?] = []) -> CachedResponse {
        CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8),
                       body: [UInt8](repeating: 0x61, count: bodyBytes), otherFields: [],
                       timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                       lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: vary, varyValues: values)
    }

    /// Beyond the variants kept per key, the oldest not served since the
    /// last choice goes: a hot variant outlives any number of new values
    /// of the Vary field (they evicted it oldest first).
    func testTheVariantsMostServedAreKept() {
        let tier = MemoryTier(limitBytes: 64 << 20)
        let hot = entry("/v", bodyBytes: 10, vary: ["x-v"], values: ["hot"])
        tier.insert(hot)
        for round in 0..<3 {
            for i in 0..<40 {
                tier.noteServed(hot)  // the hot variant is asked for between the others
                tier.insert(entry("/v", bodyBytes: 10, vary: ["x-v"], values: ["attacker-\(round)-\(i)"]))
            }
        }
        let kept = tier.lookup("/v")
        XCTAssertEqual(kept.count, SieveIndex.maxVariants)
        XCTAssertTrue(kept.contains { $0.varyValues == ["hot"] }, "the variant served between them stays")
        // Issue 59: a burst of new values with no request for the hot
        // variant between them does not push it out either.
        for i in 0..<40 { tier.insert(entry("/v", bodyBytes: 10, vary: ["x-v"], values: ["burst-\(i)"])) }
        XCTAssertTrue(tier.lookup("/v").contains { $0.varyValues == ["hot"] }, "served in this period: kept")
        // Once every variant has been served, a period ends and the marks
        // start over: the hot variant, the oldest, goes unless asked for again.
        for kept in tier.lookup("/v") { tier.noteServed(kept) }
        tier.insert(entry("/v", bodyBytes: 10, vary: ["x-v"], values: ["next"]))
        XCTAssertFalse(tier.lookup("/v").contains { $0.varyValues == ["hot"] }, "a new period: the oldest goes")
    }

    /// The marks' choice, value by value.
    func testTheVariantToDropIsTheOldestNotServedInThePeriod() {
        var marks = [true, false, true, false, false]
        XCTAssertEqual(SieveIndex.variantToDrop(&marks), 1)
        XCTAssertEqual(marks, [true, false, true, false, false], "marks are kept")
        var all = [true, true, true, false]
        XCTAssertEqual(SieveIndex.variantToDrop(&all), 0, "every older one served: the oldest")
        XCTAssertEqual(all, [false, false, false, false], "and a new period")
    }

    func testCostCountsHeadBodyAndOverhead() {
        let e = entry("/k", bodyBytes: 1000)
        XCTAssertEqual(e.costBytes, 17 + 1000 + 2 + CachedResponse.overheadBytes)  // head, body, key, bookkeeping
    }

    func testEvictsAnUnvisitedKeyFirstByBytes() {
        let one = entry("/a", bodyBytes: 1000).costBytes
        let tier = MemoryTier(limitBytes: one * 3)
        tier.insert(entry("/a", bodyBytes: 1000))
        tier.insert(entry("/b", bodyBytes: 1000))
        tier.insert(entry("/c", bodyBytes: 1000))
        XCTAssertFalse(tier.lookup("/a").isEmpty)  // /a becomes most recent; /b is now the oldest
        tier.insert(entry("/d", bodyBytes: 1000))
        XCTAssertTrue(tier.lookup("/b").isEmpty)
        XCTAssertFalse(tier.lookup("/a").isEmpty)
        XCTAssertFalse(tier.lookup("/c").isEmpty)
        XCTAssertFalse(tier.lookup("/d").isEmpty)
        let stats = tier.stats
        XCTAssertEqual(stats.objects, 3)
        XCTAssertEqual(stats.bytes, one * 3)
        XCTAssertEqual(stats.evictions, 1)
    }

    func testALargeEntryEvictsSeveral() {
        let small = entry("/a", bodyBytes: 100).costBytes
        let tier = MemoryTier(limitBytes: small * 4)
        for k in ["/a", "/b", "/c", "/d"] { tier.insert(entry(k, bodyBytes: 100)) }
        tier.insert(entry("/big", bodyBytes: small * 2))
        XCTAssertTrue(tier.lookup("/a").isEmpty)
        XCTAssertTrue(tier.lookup("/b").isEmpty)
        XCTAssertTrue(tier.lookup("/c").isEmpty)
        XCTAssertFalse(tier.lookup("/d").isEmpty)
        XCTAssertFalse(tier.lookup("/big").isEmpty)
        XCTAssertLessThanOrEqual(tier.stats.bytes, small * 4)
    }

    func testReplacingAKeyDoesNotDoubleCount() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(entry("/a", bodyBytes: 100))
        tier.insert(entry("/a", bodyBytes: 200))
        XCTAssertEqual(tier.stats.objects, 1)
        XCTAssertEqual(tier.stats.bytes, entry("/a", bodyBytes: 200).costBytes)
        XCTAssertEqual(tier.lookup("/a").map(\.body.count), [200])
    }

    func testEntryLargerThanTheLimitIsRefused() {
        let tier = MemoryTier(limitBytes: 1000)
        tier.insert(entry("/small", bodyBytes: 10))
        XCTAssertFalse(tier.insert(entry("/huge", bodyBytes: 5000)))
        XCTAssertTrue(tier.lookup("/huge").isEmpty)
        XCTAssertFalse(tier.lookup("/small").isEmpty)
        XCTAssertEqual(tier.remove("/small"), 1)
        XCTAssertEqual(tier.stats.bytes, 0)
    }

    func testVariantsLiveSideBySideAndAChangedVaryReplacesThem() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(entry("/v", bodyBytes: 10, vary: ["accept-language"], values: ["en"]))
        tier.insert(entry("/v", bodyBytes: 20, vary: ["accept-language"], values: ["fr"]))
        tier.insert(entry("/v", bodyBytes: 30, vary: ["accept-language"], values: ["en"]))  // replaces en
        XCTAssertEqual(tier.lookup("/v").map(\.body.count).sorted(), [20, 30])
        XCTAssertEqual(tier.stats.objects, 2)
        tier.insert(entry("/v", bodyBytes: 40, vary: ["accept-encoding"], values: ["gzip"]))
        XCTAssertEqual(tier.lookup("/v").map(\.body.count), [40])
        XCTAssertEqual(tier.stats.objects, 1)
        XCTAssertEqual(tier.stats.bytes, entry("/v", bodyBytes: 40, vary: ["accept-encoding"], values: ["gzip"]).costBytes)
    }

    /// The key table finds every key after many removals (backward-shift
    /// deletion must never leave a gap inside a probe run) and grows.
    func testKeyTableFindsEveryKeyThroughRemovalsAndGrowth() {
        var table = KeyTable<CachedResponse>()
        var live = Set<String>()
        for i in 0..<5000 {
            let key = "/k/\(i)"
            table.insert(self.entry(key, bodyBytes: 1))
            live.insert(key)
            if i % 3 == 2 {
                let victim = "/k/\(i / 2)"
                XCTAssertEqual(table.remove(victim)?.key, live.remove(victim))
            }
        }
        XCTAssertEqual(table.count, live.count)
        for i in 0..<5000 {
            let key = "/k/\(i)"
            XCTAssertEqual(table.find(key)?.key, live.contains(key) ? key : nil, key)
        }
        XCTAssertEqual(Set(table.keys), live)
        XCTAssertNil(table.remove("/absent"))
    }

    /// Lookups return variants oldest first; eviction, removal and clearing
    /// keep the list and the counts consistent.
    func testVariantsOrderAndListConsistency() {
        let tier = MemoryTier(limitBytes: 1 << 30)
        tier.insert(self.entry("/v", bodyBytes: 1, vary: ["accept"], values: ["a"]))
        tier.insert(self.entry("/v", bodyBytes: 2, vary: ["accept"], values: ["b"]))
        tier.insert(self.entry("/v", bodyBytes: 3, vary: ["accept"], values: ["c"]))
        XCTAssertEqual(tier.lookup("/v").map(\.bodyLength), [1, 2, 3])
        tier.insert(self.entry("/v", bodyBytes: 4, vary: ["accept"], values: ["a"]))  // replaces the "a" variant
        XCTAssertEqual(tier.lookup("/v").map(\.bodyLength), [2, 3, 4])
        for i in 0..<100 { tier.insert(self.entry("/o/\(i)", bodyBytes: 10)) }
        XCTAssertEqual(tier.stats.objects, 103)
        XCTAssertEqual(tier.remove("/o/50"), 1)
        XCTAssertEqual(tier.remove("/o/50"), 0)
        XCTAssertEqual(tier.purge(.prefix("/o/"), soft: false).counts.count, 99)
        XCTAssertEqual(tier.stats.objects, 3)
        XCTAssertEqual(tier.removeAll(), 3)
        XCTAssertTrue(tier.lookup("/v").isEmpty)
        XCTAssertEqual(tier.stats.bytes, 0)
        // Usable again after clearing, with LRU order intact.
        let one = self.entry("/a", bodyBytes: 100).costBytes
        let small = MemoryTier(limitBytes: one * 2)
        small.insert(self.entry("/a", bodyBytes: 100))
        small.insert(self.entry("/b", bodyBytes: 100))
        _ = small.lookup("/a")
        small.insert(self.entry("/c", bodyBytes: 100))
        XCTAssertTrue(small.lookup("/b").isEmpty)
        XCTAssertFalse(small.lookup("/a").isEmpty)
        XCTAssertFalse(small.lookup("/c").isEmpty)
    }
}

final class SieveTests: XCTestCase {
    private func entry(_ key: String, bodyBytes: Int = 100) -> CachedResponse {
        [UInt8](repeating: 0x61, count: bodyBytes).withUnsafeBytes { CachedResponse.make(head: testHead(key), body: $0) }
    }

    func testAKeyNeverHitGoesBeforeAnOlderKeyThatWas() {
        // LRU would evict /c at the end (hit before /d and /e were stored);
        // SIEVE evicts /d, stored later but never asked for again: one-hit
        // wonders go fast, a key that was hit is spared once.
        let tier = MemoryTier(limitBytes: entry("/a").costBytes * 3)
        for key in ["/a", "/b", "/c"] { tier.insert(entry(key)) }
        XCTAssertFalse(tier.lookup("/c").isEmpty)
        tier.insert(entry("/d"))  // the hand takes /a
        tier.insert(entry("/e"))  // then /b
        tier.insert(entry("/f"))  // spares /c (clearing its bit), takes /d
        for key in ["/a", "/b", "/d"] { XCTAssertTrue(tier.lookup(key).isEmpty, key) }
        for key in ["/c", "/e", "/f"] { XCTAssertFalse(tier.lookup(key).isEmpty, key) }
        XCTAssertEqual(tier.stats.evictions, 3)
    }

    func testAHitMovesNothingSoTheHandKeepsItsPlace() {
        let tier = MemoryTier(limitBytes: entry("/a").costBytes * 2)
        tier.insert(entry("/a"))
        tier.insert(entry("/b"))
        for _ in 0..<5 { _ = tier.lookup("/b") }
        tier.insert(entry("/c"))  // /a, unvisited and oldest, goes
        XCTAssertTrue(tier.lookup("/a").isEmpty)
        XCTAssertFalse(tier.lookup("/b").isEmpty)
        XCTAssertFalse(tier.lookup("/c").isEmpty)
    }

    func testAPromotionMustBeWantedMoreThanWhatItWouldEvict() {
        let tier = MemoryTier(limitBytes: entry("/a").costBytes * 2)
        tier.insert(entry("/a"))
        tier.insert(entry("/b"))
        XCTAssertFalse(tier.insert(entry("/c"), promoted: true), "asked for no more often than /a: not admitted")
        XCTAssertEqual(tier.stats.objects, 2)
        XCTAssertFalse(tier.lookup("/a").isEmpty)
        // Misses count: /c asked for twice now beats the unvisited victim.
        _ = tier.lookup("/c")
        _ = tier.lookup("/c")
        XCTAssertTrue(tier.insert(entry("/c"), promoted: true))
        XCTAssertFalse(tier.lookup("/c").isEmpty)
        // A promotion with room to spare is always taken; a fresh store always.
        let roomy = MemoryTier(limitBytes: 1 << 20)
        XCTAssertTrue(roomy.insert(entry("/x"), promoted: true))
        XCTAssertTrue(tier.insert(entry("/y")))
    }

    func testShardsSplitTheTierAndEveryOperationVisitsThemAll() {
        let tier = MemoryTier(limitBytes: 64 << 20, maxObjectBytes: 1 << 20)
        XCTAssertEqual(tier.shardCount, 16)
        XCTAssertEqual(MemoryTier(limitBytes: 1 << 20).shardCount, 1, "an object as large as the tier needs one shard")
        for i in 0..<1000 { tier.insert(entry("/s/\(i)")) }
        XCTAssertEqual(tier.stats.objects, 1000)
        XCTAssertEqual(tier.stats.bytes, (0..<1000).reduce(0) { $0 + entry("/s/\($1)").costBytes })
        XCTAssertTrue((0..<1000).allSatisfy { !tier.lookup("/s/\($0)").isEmpty })
        XCTAssertEqual(tier.purge(.prefix("/s/1"), soft: false).counts.count, 111)
        XCTAssertEqual(tier.removeStored(before: 2).count, 889)
        XCTAssertEqual(tier.stats.objects, 0)
        XCTAssertEqual(tier.stats.bytes, 0)
    }

    /// A small memory tier in front of a disk tier is split into shards of
    /// 256 KiB (its disk hits would otherwise all take one lock) and leaves
    /// the disk tier what such a shard cannot hold; alone, or large enough
    /// for 16 shards anyway, it keeps everything up to max_object_size.
    func testASmallTierWithASlowerTierBehindIsShardedAndKeepsSmallerObjects() {
        let small = MemoryTier(limitBytes: 2 << 20, maxObjectBytes: 8 << 20, slowerTierBehind: true)
        XCTAssertEqual(small.shardCount, 8)
        XCTAssertEqual(small.maxObjectBytes, (256 - 64) << 10)
        XCTAssertFalse(small.insert(entry("/big", bodyBytes: 200 << 10)), "larger than a shard holds: the disk tier's")
        XCTAssertTrue(small.insert(entry("/fits", bodyBytes: 100 << 10)))

        let alone = MemoryTier(limitBytes: 2 << 20, maxObjectBytes: 8 << 20)
        XCTAssertEqual(alone.shardCount, 1)
        XCTAssertEqual(alone.maxObjectBytes, 2 << 20)
        XCTAssertTrue(alone.insert(entry("/big", bodyBytes: 200 << 10)))

        let large = MemoryTier(limitBytes: 256 << 20, maxObjectBytes: 8 << 20, slowerTierBehind: true)
        XCTAssertEqual(large.shardCount, 16)
        XCTAssertEqual(large.maxObjectBytes, 8 << 20, "16 shards by the usual rule: nothing changes")
        let tiny = MemoryTier(limitBytes: 256 << 10, maxObjectBytes: 8 << 20, slowerTierBehind: true)
        XCTAssertEqual(tiny.shardCount, 1)
        XCTAssertEqual(tiny.maxObjectBytes, 256 << 10)
    }
}

final class ByteAccumulatorTests: XCTestCase {
    func testAccumulatesAcrossGrowthAndAfterAReserve() {
        var grown = ByteAccumulator()
        let piece = (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        for _ in 0..<3 { piece.withUnsafeBytes { grown.append($0) } }  // grows past its first 4 KiB
        XCTAssertEqual(Array(grown.buffer), piece + piece + piece)
        grown.discard()
        XCTAssertEqual(grown.count, 0)

        var exact = ByteAccumulator()
        exact.reserve(3000)
        for _ in 0..<3 { piece[0..<1000].withUnsafeBytes { exact.append($0) } }
        XCTAssertEqual(Array(exact.buffer), Array(piece[0..<1000]) + Array(piece[0..<1000]) + Array(piece[0..<1000]))
        exact.discard()
    }

    func testBytesKeepTheirContentsAtAStableAddress() {
        let source = (0..<100).map { UInt8($0) }
        let bytes = Bytes(source)
        let copy = bytes
        XCTAssertEqual(bytes.count, 100)
        XCTAssertEqual(Array(bytes.buffer), source)
        XCTAssertEqual(copy.pointer, bytes.pointer)
        XCTAssertEqual(Bytes([]).count, 0)
        XCTAssertEqual(Array(Bytes([]).buffer), [])
    }
}

final class LocalHitsTests: XCTestCase {
    private func entry(_ key: String, lifetime: Int = 60, bytes: Int = 100) -> CachedResponse {
        [UInt8](repeating: 0x61, count: bytes).withUnsafeBytes { CachedResponse.make(head: testHead(key, lifetime: lifetime), body: $0) }
    }

    func testACopyIsUsedOnlyWhileItsShardIsUnchanged() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        tier.insert(entry("/a", bytes: 10))
        XCTAssertEqual(tier.lookup("/a", local: local).first?.bodyLength, 10)
        XCTAssertEqual(tier.lookup("/a", local: local).first?.bodyLength, 10, "from the copy")
        tier.insert(entry("/a", bytes: 20))
        XCTAssertEqual(tier.lookup("/a", local: local).first?.bodyLength, 20, "a newer response replaces the copy")
        XCTAssertEqual(tier.purge(.key("/a"), soft: true).counts, ["/a": 1])
        XCTAssertEqual(tier.lookup("/a", local: local).first?.lifetime, 0, "a soft purge is seen at once")
        tier.remove("/a")
        XCTAssertTrue(tier.lookup("/a", local: local).isEmpty, "a removal too")
        tier.insert(entry("/b"))
        _ = tier.lookup("/b", local: local)
        XCTAssertEqual(tier.removeAll(), 1)
        XCTAssertTrue(tier.lookup("/b", local: local).isEmpty, "and a clear")
    }

    func testOtherKeysChangesLeaveACopyValidAndItIsTheWorkersOwn() {
        // Per key, not per shard: storing, promoting or removing other keys
        // (a miss's store, a declined promotion, a POST's invalidation)
        // does not send this key's hits back through the lock.
        let tier = MemoryTier(limitBytes: 1 << 20)
        XCTAssertEqual(tier.shardCount, 1, "every key in one shard")
        let local = LocalHits()
        tier.insert(entry("/a"))
        let stored = tier.lookup("/a")
        _ = tier.lookup("/a", local: local)
        XCTAssertEqual(local.copies, 0, "copied on a key's second lookup in a row, not its first")
        _ = tier.lookup("/a", local: local)
        let copy = tier.lookup("/a", local: local)
        XCTAssertEqual(local.answered, 1)
        XCTAssertFalse(copy.first!.isSame(stored.first!), "a copy of its own: its reference count is this worker's")
        XCTAssertTrue(copy.first!.isCopy(of: stored.first!))
        XCTAssertEqual(Array(copy.first!.body), Array(stored.first!.body))
        XCTAssertEqual(Array(copy.first!.headPrefix), Array(stored.first!.headPrefix))
        tier.insert(entry("/b"))
        XCTAssertEqual(tier.remove("/absent"), 0)
        _ = tier.lookup("/a", local: local)
        XCTAssertEqual(local.answered, 2, "still from the copy")
    }

    func testAPurgeRacingHitsIsSeenByTheNextHitAfterIt() throws {
        // A worker hits a key through its copies while another thread
        // purges it: once the purge has returned, no hit answers with it.
        for round in 0..<20 {
            let tier = MemoryTier(limitBytes: 1 << 20)
            tier.insert(entry("/p"))
            let purged = Atomic<Bool>(false), hits = Atomic<Int>(0), servedAfter = Atomic<Int>(0), done = Atomic<Bool>(false)
            try startThread(name: "hits") {
                let local = LocalHits()
                while true {
                    let after = purged.load(ordering: .acquiring)
                    let found = tier.lookup("/p", local: local)
                    if after && !found.isEmpty { servedAfter.add(1, ordering: .relaxed) }
                    hits.add(1, ordering: .releasing)
                    if after { break }
                }
                done.store(true, ordering: .releasing)
            }
            let deadline = Date().addingTimeInterval(10)
            while hits.load(ordering: .acquiring) < 100 + round * 50 && Date() < deadline { usleep(10) }
            XCTAssertEqual(tier.purge(.key("/p"), soft: false).counts, ["/p": 1])
            purged.store(true, ordering: .releasing)
            while !done.load(ordering: .acquiring) && Date() < deadline { usleep(100) }
            XCTAssertTrue(done.load(ordering: .acquiring))
            XCTAssertEqual(servedAfter.load(ordering: .relaxed), 0, "round \(round)")
        }
    }

    func testAdmissionComparesWithTheKeyTheHandWouldEvictAndHoldsNoneThatLeft() {
        let tier = MemoryTier(limitBytes: entry("/a").costBytes * 2)
        tier.insert(entry("/a"))
        tier.insert(entry("/b"))
        for _ in 0..<3 { _ = tier.lookup("/c") }  // misses: /c is wanted, /a (the oldest) never was
        var weakA: CachedResponse.Storage? = tier.lookup("/a").first?.storage
        _ = tier.lookup("/b")  // visited: the hand passes it
        XCTAssertTrue(tier.wouldAdmit(entry("/c")), "asked for more often than /a, the key it would evict")
        XCTAssertFalse(tier.wouldAdmit(entry("/d")), "never asked for: /a stays")
        weak var released = weakA
        weakA = nil
        XCTAssertNotNil(released, "still stored")
        XCTAssertEqual(tier.remove("/a"), 1)
        XCTAssertNil(released, "a removed key is not kept alive by what admission remembers of it")
        XCTAssertTrue(tier.wouldAdmit(entry("/d")), "room again")
    }

    func testAKeyHitOnlyThroughCopiesIsStillSparedByTheHand() {
        // A copy answers only while its entry's visited bit is set: once the
        // hand clears it, the next hit goes through the shard and sets it.
        let tier = MemoryTier(limitBytes: entry("/a").costBytes * 2)
        let local = LocalHits()
        tier.insert(entry("/a"))
        tier.insert(entry("/b"))
        for round in 0..<5 {
            for _ in 0..<3 { XCTAssertFalse(tier.lookup("/a", local: local).isEmpty) }
            tier.insert(entry("/\(round)"))  // a key as long as the others: one eviction
            XCTAssertFalse(tier.lookup("/a", local: nil).isEmpty, "round \(round): the hot key stays")
        }
    }

    func testOnlySmallEntriesAreCopied() {
        // A copy keeps its entry alive past eviction: large ones never are.
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        tier.insert(entry("/small", bytes: 100))
        tier.insert(entry("/large", bytes: 32 << 10))
        for key in ["/large", "/small"] {
            for _ in 0..<2 { XCTAssertFalse(tier.lookup(key, local: local).isEmpty) }
        }
        XCTAssertEqual(local.copies, 1, "the small one")
    }

    func testTwoKeysInOneSlotDoNotMix() {
        let tier = MemoryTier(limitBytes: 16 << 20)
        let local = LocalHits()
        let keys = (0..<2000).map { "/k/\($0)" }
        for key in keys { tier.insert(entry(key)) }
        for _ in 0..<2 {
            for key in keys { XCTAssertEqual(tier.lookup(key, local: local).first?.key, key) }
        }
    }
}
