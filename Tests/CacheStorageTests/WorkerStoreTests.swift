import XCTest
import CacheSemantics
@testable import CacheStorage

/// The store a worker talks to: the local tiers, then the fleet's shared
/// stage, written here against `SharedTier` alone (a stand-in that answers
/// when told to, as Redis answers later on the loop).
final class WorkerStoreTests: XCTestCase {
    final class StandInShared: SharedTier {
        var held: [String: [CachedResponse]] = [:]
        var stored: [CachedResponse] = []
        var released: [String] = []
        var pending: [() -> Void] = []
        var reachable = true
        var maxObjectBytes: Int { 1 << 20 }
        func fetchMark() -> SharedMark { SharedMark(milliseconds: 1, sequence: 2) }
        func lookup(_ key: String, found: @escaping (Variants) -> Void) -> Bool {
            guard reachable else { return false }
            let variants = Variants(held[key] ?? [])
            pending.append { found(variants) }
            return true
        }
        func store(_ entry: CachedResponse, fetchedAt mark: SharedMark) { stored.append(entry) }
        func claim(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool {
            guard reachable else { return false }
            pending.append { outcome(.claimed) }
            return true
        }
        func release(_ key: String) { released.append(key) }
        func answer() { pending.forEach { $0() }; pending = [] }
    }

    private func entry(_ key: String) -> CachedResponse {
        [UInt8](repeating: 7, count: 10).withUnsafeBytes { CachedResponse.make(head: testHead(key), body: $0) }
    }

    func testWithoutAFleetTheSharedStageIsNeverAsked() {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        XCTAssertFalse(store.hasSharedStage)
        XCTAssertFalse(store.lookupShared("/k", toDisk: true) { _ in XCTFail("never called") })
        XCTAssertFalse(store.claim("/k", milliseconds: 10) { _ in XCTFail("never called") })
        XCTAssertNil(store.sharedMark())
        XCTAssertEqual(store.sharedMaxObjectBytes, 0)
    }

    /// A worker's store over a memory tier, with a fleet that holds `/k`.
    private func fleetHolding() -> (memory: MemoryTier, store: WorkerStore, shared: StandInShared) {
        let memory = MemoryTier(limitBytes: 1 << 20)
        let store = WorkerStore(tiers: TieredStore(tiers: [memory]))
        let shared = StandInShared()
        store.shared = shared
        shared.held["/k"] = [entry("/k")]
        return (memory, store, shared)
    }

    func testWhatTheFleetHadIsStoredInTheLocalTiers() {
        let (memory, store, shared) = fleetHolding()
        XCTAssertEqual(store.lookupWithoutBlocking("/k")?.count, 0, "the local tiers miss")
        var answered: Variants?
        XCTAssertTrue(store.lookupShared("/k", toDisk: true) { answered = $0 })
        XCTAssertNil(answered, "asynchronous: later, on the loop")
        shared.answer()
        XCTAssertEqual(answered?.count, 1)
        XCTAssertEqual(memory.lookup("/k").count, 1, "kept locally from then on")
    }

    func testAPurgeHereWhileTheFleetWasAskedKeepsItsAnswerOut() {
        let (memory, store, shared) = fleetHolding()
        var answered: Variants?
        XCTAssertTrue(store.lookupShared("/k", toDisk: true) { answered = $0 })
        _ = store.tiers.purge(.key("/k"), soft: false)
        shared.answer()
        XCTAssertEqual(answered?.count, 0, "from before the purge: neither served nor stored")
        XCTAssertTrue(memory.lookup("/k").isEmpty)
    }

    func testAnUnreachableFleetIsNotWaitedFor() {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        let shared = StandInShared()
        shared.reachable = false
        store.shared = shared
        XCTAssertFalse(store.lookupShared("/k", toDisk: true) { _ in XCTFail("never called") })
        XCTAssertFalse(store.claim("/k", milliseconds: 10) { _ in XCTFail("never called") })
    }

    func testStoredResponsesAreSharedClaimsReleasedAndMarksTaken() {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        let shared = StandInShared()
        store.shared = shared
        XCTAssertEqual(store.sharedMark(), SharedMark(milliseconds: 1, sequence: 2))
        store.share(entry("/a"), fetchedAt: nil)
        XCTAssertTrue(shared.stored.isEmpty, "no mark taken when its fetch began: not offered")
        store.share(entry("/a"), fetchedAt: store.sharedMark())
        XCTAssertEqual(shared.stored.map(\.key), ["/a"])
        var claim: FleetClaim?
        XCTAssertTrue(store.claim("/a", milliseconds: 10) { claim = $0 })
        shared.answer()
        XCTAssertEqual(claim, .claimed)
        store.release("/a")
        XCTAssertEqual(shared.released, ["/a"])
    }
}
