import XCTest
import CacheSemantics
@testable import CacheStorage

/// The tiers' eviction policies alone, through `EvictionPolicy`: what goes
/// first, and what a slower tier's entry must be worth to come in.
final class EvictionTests: XCTestCase {
    /// Everything `policy` would evict, in order.
    private func victims<Policy: EvictionPolicy>(_ policy: inout Policy, limit: Int = 16) -> [Policy.Victim] {
        var out: [Policy.Victim] = []
        while out.count < limit, let victim = policy.nextVictim() {
            policy.left(victim)
            out.append(victim)
        }
        return out
    }

    private var nodes: [NodeRef] = []
    override func tearDown() {
        for node in nodes { node.unmanaged.release() }
        nodes = []
    }

    private func node(_ key: String) -> NodeRef {
        let entry = CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8), body: [1, 2, 3],
                                        otherFields: [], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                                        lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: [], varyValues: [])
        let ref = NodeRef(retaining: SieveNode.make(newest: entry, older: [], hash: KeyHash.of(key)))
        nodes.append(ref)
        return ref
    }

    private func keys(_ refs: [NodeRef]) -> [String] { refs.map { $0.with { $0.variants[0].key } } }

    /// SIEVE: oldest first, but a key hit since the hand passed gets a
    /// second chance (its bit cleared, it stays); a key put back in its
    /// place keeps its turn.
    func testSieveEvictsTheOldestUnvisitedKeyFirst() {
        var sieve = SieveEviction()
        let (a, b, c) = (node("/a"), node("/b"), node("/c"))
        for key in [a, b, c] { sieve.entered(key) }
        b.with { $0.visited = true }  // a hit
        XCTAssertEqual(keys(victims(&sieve)), ["/a", "/c", "/b"], "b was hit: it goes last")

        var placed = SieveEviction()
        let (d, e, f) = (node("/d"), node("/e"), node("/f"))
        for key in [d, e] { placed.entered(key) }
        placed.left(d)
        placed.entered(f)
        placed.place(d, after: nil)  // d replaced by a new node of its key: back at the oldest end
        XCTAssertEqual(keys(victims(&placed)), ["/d", "/e", "/f"])
        XCTAssertNil(placed.nextVictim(), "nothing left")
    }

    /// An entry from a slower tier comes in only when its key was asked
    /// for (missed) more often than the key the hand would evict.
    func testSieveAdmitsOnlyWhatIsWantedMoreThanItsVictim() {
        var sieve = SieveEviction()
        XCTAssertTrue(sieve.admits(hash: KeyHash.of("/new")), "empty: everything comes in")
        let old = node("/old")
        sieve.entered(old)
        XCTAssertFalse(sieve.admits(hash: KeyHash.of("/new")), "never asked for: not worth /old")
        for _ in 0..<3 { sieve.missed(hash: KeyHash.of("/new")) }
        XCTAssertTrue(sieve.admits(hash: KeyHash.of("/new")), "asked for three times, /old never")
        sieve.left(old)
    }

    /// The disk's order is taken when the round begins: least recently
    /// used first, the oldest stored among equals; every file is admitted.
    func testRecencyEvictsTheLeastRecentlyUsedThenTheOldestStored() throws {
        func file(_ key: String, lastUse: UInt64, storedAt: Int64) -> RecencyEviction.File {
            RecencyEviction.File(key: key, name: FileName(key: UInt64(key.utf8.count), variant: 0), lastUse: lastUse, storedAt: storedAt)
        }
        var recency = RecencyEviction([file("/hot", lastUse: 9, storedAt: 1), file("/young", lastUse: 0, storedAt: 5),
                                       file("/cold", lastUse: 0, storedAt: 2)])
        XCTAssertEqual(victims(&recency).map(\.key), ["/cold", "/young", "/hot"])
        XCTAssertTrue(recency.admits(hash: 1))
    }
}
