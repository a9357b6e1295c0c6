import XCTest
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Threads
import CacheSemantics
@testable import CacheStorage

/// A worker's hits read the memory tier's shards without their mutex
/// (`ShardReaders`): they neither wait for a change nor write anything
/// another worker reads, and they still see every change whole.
final class ShardReadersTests: XCTestCase {
    private func entry(_ key: String, version: UInt8, bytes: Int = 200) -> CachedResponse {
        [UInt8](repeating: version, count: bytes).withUnsafeBytes { CachedResponse.make(head: testHead(key, lifetime: 60), body: $0) }
    }

    /// Waits (bounded) until `flag` is set.
    private func waitFor(_ flag: borrowing Atomic<Bool>, seconds: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !flag.load(ordering: .acquiring) && Date() < deadline { usleep(200) }
        return flag.load(ordering: .acquiring)
    }

    func testAWorkersHitDoesNotWaitForAShardsMutex() throws {
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(entry("/a", version: 1))
        let answered = Atomic<Bool>(false), found = Atomic<Int>(0), finished = Atomic<Bool>(false)
        let whileHeld = tier.holdingShardMutexes { () -> Bool in
            try? startThread(name: "hit") {
                let local = LocalHits()
                found.store(tier.lookup("/a", local: local).count, ordering: .relaxed)
                answered.store(true, ordering: .releasing)
                // Without a reader slot the same lookup waits for the mutex.
                let unslotted = tier.lookup("/a")
                found.add(unslotted.count, ordering: .relaxed)
                finished.store(true, ordering: .releasing)
            }
            return waitFor(answered)
        }
        XCTAssertTrue(whileHeld, "the hit was answered while every shard's mutex was held")
        XCTAssertTrue(waitFor(finished))
        XCTAssertEqual(found.load(ordering: .relaxed), 2)
    }

    func testHitsRacingChangesSeeWholeEntriesOfTheirOwnKey() throws {
        // One thread stores new versions, removes, purges and clears while
        // another hits the same keys without the mutex: every answer is an
        // entry of the key asked for, whole (a body of one version), and
        // nothing the writer let go is read after it was freed.
        let tier = MemoryTier(limitBytes: 64 << 10)
        let keys = (0..<64).map { "/k/\($0)" }
        for key in keys { tier.insert(entry(key, version: 0)) }
        let stop = Atomic<Bool>(false), finished = Atomic<Bool>(false)
        let hits = Atomic<Int>(0), wrong = Atomic<Int>(0)
        try startThread(name: "hits") {
            let local = LocalHits()
            var state: UInt64 = 7
            while !stop.load(ordering: .relaxed) {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let key = keys[Int(state >> 33) % keys.count]
                for variant in tier.lookup(key, local: local) {
                    let body = Array(variant.body)
                    if variant.key != key || body.count != 200 || body.contains(where: { $0 != body[0] }) {
                        wrong.add(1, ordering: .relaxed)
                    }
                    hits.add(1, ordering: .relaxed)
                }
            }
            finished.store(true, ordering: .releasing)
        }
        var state: UInt64 = 11
        for round in 0..<20_000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let key = keys[Int(state >> 33) % keys.count]
            switch round % 50 {
            case 49: _ = tier.removeAll()
            case 48: _ = tier.purge(.prefix("/k/1"), soft: round % 100 == 48)
            case 0..<10: tier.remove(key)
            default: tier.insert(entry(key, version: UInt8(truncatingIfNeeded: round)))
            }
        }
        stop.store(true, ordering: .relaxed)
        XCTAssertTrue(waitFor(finished))
        XCTAssertGreaterThan(hits.load(ordering: .relaxed), 0)
        XCTAssertEqual(wrong.load(ordering: .relaxed), 0)
    }

    func testReaderSlotsAreBoundedAndGivenBack() {
        var held: [ShardReader] = []
        while let reader = ShardReader(), held.count <= ShardReaders.capacity { held.append(reader) }
        XCTAssertLessThanOrEqual(held.count, ShardReaders.capacity)
        let tier = MemoryTier(limitBytes: 1 << 20)
        tier.insert(entry("/a", version: 1))
        let local = LocalHits()
        XCTAssertNil(local.reader, "every slot is taken")
        XCTAssertEqual(tier.lookup("/a", local: local).count, 1, "a worker without a slot still hits (through the mutex)")
        held.removeAll()
        XCTAssertNotNil(LocalHits().reader, "slots come back when their holders go")
    }
}
