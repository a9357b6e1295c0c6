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
        XCTAssertFalse(store.lookupShared("/k", after: Variants(), toDisk: true) { _ in XCTFail("never called") })
        XCTAssertFalse(store.claim("/k", milliseconds: 10) { _ in XCTFail("never called") })
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
        XCTAssertTrue(store.lookupShared("/k", after: Variants(), toDisk: true) { answered = $0 })
        XCTAssertNil(answered, "asynchronous: later, on the loop")
        shared.answer()
        XCTAssertEqual(answered?.count, 1)
        XCTAssertEqual(memory.lookup("/k").count, 1, "kept locally from then on")
    }

    func testAPurgeHereWhileTheFleetWasAskedKeepsItsAnswerOut() {
        let (memory, store, shared) = fleetHolding()
        var answered: Variants?
        XCTAssertTrue(store.lookupShared("/k", after: Variants(), toDisk: true) { answered = $0 })
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
        XCTAssertFalse(store.lookupShared("/k", after: Variants(), toDisk: true) { _ in XCTFail("never called") })
        XCTAssertFalse(store.claim("/k", milliseconds: 10) { _ in XCTFail("never called") })
    }

    func testClaimsAreTakenAndReleasedThroughTheSharedStage() {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        let shared = StandInShared()
        store.shared = shared
        var claim: FleetClaim?
        XCTAssertTrue(store.claim("/a", milliseconds: 10) { claim = $0 })
        shared.answer()
        XCTAssertEqual(claim, .claimed)
        store.release("/a")
        XCTAssertEqual(shared.released, ["/a"])
    }

    /// The miss handler made when a fetch begins carries the purge order,
    /// the fleet's mark and the tiers: what it stores is offered to the
    /// fleet with the mark taken then, a purge since keeps it out, and a
    /// memory-only route's response never reaches the next tier.
    func testAMissHandlerStoresAndSharesWhatItsFetchGotUnlessAPurgeCameBetween() {
        let memory = MemoryTier(limitBytes: 1 << 20), second = RecordingTier()
        let store = WorkerStore(tiers: TieredStore(tiers: [memory, second]))
        let shared = StandInShared()
        store.shared = shared
        var writer = store.missHandler(toDisk: true).writer(testHead("/a"), storedAt: 1, expectedLength: 10)
        [UInt8](repeating: 1, count: 10).withUnsafeBytes { _ = writer.append($0) }
        XCTAssertTrue(writer.commit())
        XCTAssertEqual(shared.stored.map(\.key), ["/a"], "offered to the fleet")
        XCTAssertEqual(memory.lookup("/a").count, 1)
        XCTAssertEqual(second.lookup("/a").count, 1, "every tier")

        let begun = store.missHandler(toDisk: true)
        _ = store.tiers.purge(.key("/b"), soft: false)
        XCTAssertFalse(begun.insert(entry("/b")), "purged since its fetch began: kept out")
        XCTAssertTrue(store.missHandler(toDisk: true).insert(entry("/b")), "a fetch begun after the purge stores it")

        XCTAssertTrue(store.missHandler(toDisk: false).insert(entry("/memory-only")))
        XCTAssertEqual(memory.lookup("/memory-only").count, 1)
        XCTAssertTrue(second.lookup("/memory-only").isEmpty, "a route with disk = false: the first tier alone")
        XCTAssertEqual(store.missHandler(toDisk: false).largestBody, memory.maxObjectBytes)
    }

    func testWithoutAFleetMarkAMissHandlerOffersNothing() {
        let store = WorkerStore(tiers: TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)]))
        let handler = store.missHandler(toDisk: true)
        let shared = StandInShared()
        store.shared = shared  // (a fleet joined after the fetch began: it took no mark)
        handler.share(entry("/a"))
        XCTAssertTrue(shared.stored.isEmpty, "no mark taken when its fetch began: not offered")
        store.missHandler(toDisk: true).share(entry("/a"))
        XCTAssertEqual(shared.stored.map(\.key), ["/a"])
    }
}
