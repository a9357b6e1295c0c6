import XCTest
import CacheSemantics
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif
@testable import CacheStorage

/// A worker's hit borrows its entry's block (no reference counted on it);
/// what the tier takes out is freed only once no worker's period can still
/// be reading it, and a response kept past its period keeps it alive.
final class ReclamationTests: XCTestCase {
    private func entry(_ key: String, fill: UInt8 = 0x61, bodyBytes: Int = 64) -> CachedResponse {
        CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8),
                            body: [UInt8](repeating: fill, count: bodyBytes), otherFields: [],
                            timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                            lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: [], varyValues: [])
    }

    private final class Watch {
        weak var block: CachedResponse.Storage?
    }

    func testAWorkersHitBorrowsTheBlockAndOthersHoldIt() throws {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        tier.insert(entry("/a"))
        let hit = try XCTUnwrap(tier.lookup("/a", local: local).first)
        XCTAssertFalse(hit.isOwned, "held by the worker's period token")
        XCTAssertTrue(try XCTUnwrap(tier.lookup("/a").first).isOwned, "without a worker's copies: the block itself")
        XCTAssertTrue(hit.owned().isOwned)
        XCTAssertTrue(hit.owned().isSame(hit))
        local.endPeriod()
    }

    /// A tier holding "/a", a worker's hit on it (`owned`: made an owned
    /// one), and a watch on its block.
    private func hitOnStored(fill: UInt8 = 0x61, owned: Bool = false) throws -> (MemoryTier, LocalHits, Watch, CachedResponse?) {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        tier.insert(entry("/a", fill: fill))
        let hit = try XCTUnwrap(tier.lookup("/a", local: local).first)
        let w = Watch()
        w.block = hit.storage
        return (tier, local, w, owned ? hit.owned() : hit)
    }

    func testARemovedEntryIsFreedWhenThePeriodEnds() throws {
        let (tier, local, w, _) = try hitOnStored()
        XCTAssertEqual(tier.remove("/a"), 1)
        XCTAssertNotNil(w.block, "the worker may still read it this period")
        local.endPeriod()
        XCTAssertNil(w.block, "freed once its period ended")
        XCTAssertEqual(Reclamation.pending.lingering, 0)
    }

    func testAResponseKeptPastItsPeriodKeepsItsEntryAlive() throws {
        var (tier, local, w, kept) = try hitOnStored(fill: 0x41)
        XCTAssertEqual(tier.remove("/a"), 1)
        tier.insert(entry("/b"))
        XCTAssertEqual(tier.purge(.all, soft: false).counts.count, 1, "/b goes too")
        local.endPeriod()
        XCTAssertEqual(Reclamation.pending.lingering, 1, "the period's token outlived it")
        XCTAssertNotNil(w.block)
        XCTAssertEqual(kept?.body.allSatisfy { $0 == 0x41 }, true, "still readable")

        // The next period's hits hold a new token.
        tier.insert(entry("/c"))
        XCTAssertFalse(try XCTUnwrap(tier.lookup("/c", local: local).first).isOwned)
        local.endPeriod()
        XCTAssertEqual(Reclamation.pending.lingering, 1, "nothing held from the second period")

        kept = nil
        XCTAssertNil(w.block, "freed when the last response of its period went")
        XCTAssertEqual(Reclamation.pending.lingering, 0)
    }

    func testAnOwnedCopyOutlivesTheEntry() throws {
        var (tier, local, w, owned) = try hitOnStored(fill: 0x42, owned: true)
        XCTAssertEqual(tier.remove("/a"), 1)
        local.endPeriod()
        XCTAssertEqual(Reclamation.pending.lingering, 0, "an owned response holds no token")
        XCTAssertNotNil(w.block)
        XCTAssertEqual(owned?.body.allSatisfy { $0 == 0x42 }, true)
        owned = nil
        XCTAssertNil(w.block)
    }

    /// A tier keeps what it is given with its block, never a worker's token.
    func testATierStoresABorrowedResponseAsOwned() throws {
        let first = MemoryTier(limitBytes: 1 << 20)
        let second = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        first.insert(entry("/a", fill: 0x43))
        XCTAssertTrue(second.insert(try XCTUnwrap(first.lookup("/a", local: local).first)))
        XCTAssertEqual(first.remove("/a"), 1)
        local.endPeriod()
        XCTAssertEqual(Reclamation.pending.lingering, 0, "the second tier holds no token")
        let stored = try XCTUnwrap(second.lookup("/a").first)
        XCTAssertTrue(stored.isOwned)
        XCTAssertEqual(stored.body.allSatisfy { $0 == 0x43 }, true)
    }

    /// Hits on one thread while another replaces and removes the keys: every
    /// body read is whole and of one version (under the address or thread
    /// sanitizer, a block freed while read would be reported).
    func testHitsReadWholeBodiesWhileTheKeysChange() throws {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let keys = (0..<64).map { "/k\($0)" }
        for key in keys { tier.insert(entry(key, fill: 1, bodyBytes: 512)) }
        let stop = Atomic<Bool>(false)
        let done = Atomic<Int>(0)
        let torn = Atomic<Int>(0)
        let hits = Atomic<Int>(0)
        try startThread(name: "test-hits") {
            let local = LocalHits()
            var n = 0
            while !stop.load(ordering: .acquiring) {
                for entry in tier.lookup(keys[n % keys.count], local: local) {
                    let first = entry.body.first ?? 0
                    if !entry.body.allSatisfy({ $0 == first }) { torn.add(1, ordering: .relaxed) }
                    hits.add(1, ordering: .relaxed)
                }
                n += 1
                if n % 8 == 0 { local.endPeriod() }
            }
            local.endPeriod()
            done.add(1, ordering: .releasing)
        }
        for round in 0..<3000 {
            let key = keys[round % keys.count]
            if round % 3 == 0 { tier.remove(key) } else { tier.insert(entry(key, fill: UInt8(truncatingIfNeeded: round), bodyBytes: 512)) }
        }
        stop.store(true, ordering: .releasing)
        let deadline = ContinuousClock.now + .seconds(10)
        while done.load(ordering: .acquiring) == 0, ContinuousClock.now < deadline { usleep(1000) }
        XCTAssertEqual(done.load(ordering: .acquiring), 1, "the reader finished")
        XCTAssertEqual(torn.load(ordering: .relaxed), 0)
        XCTAssertGreaterThan(hits.load(ordering: .relaxed), 0)
        XCTAssertEqual(Reclamation.pending.lingering, 0)
        XCTAssertEqual(Reclamation.pending.retired, 0, "everything retired is freed once no period is under way")
    }
}
