import XCTest
import CacheSemantics
@testable import CacheStorage

/// The memory tier's bookkeeping is in its index's nodes, which it owns
/// without reference counting: every way a key leaves must let its node and
/// its responses go, and marks made through a worker's copy must reach the
/// tier's variant.
final class SieveNodeTests: XCTestCase {
    private func entry(_ key: String, bodyBytes: Int = 10, vary: [String] = [], values: [String?] = []) -> CachedResponse {
        CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8),
                            body: [UInt8](repeating: 0x61, count: bodyBytes), otherFields: [],
                            timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                            lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: vary, varyValues: values)
    }

    /// Weak references to a stored key's node and newest response.
    private final class Watch {
        weak var node: SieveNode?
        weak var storage: CachedResponse.Storage?
    }

    private func watch(_ index: inout SieveIndex, _ key: String, tags: [String] = []) -> Watch {
        let w = Watch()
        do {
            var stored = entry(key)
            if !tags.isEmpty {
                stored = [UInt8](repeating: 1, count: 10).withUnsafeBytes { CachedResponse.make(head: testHead(key, tags: tags), body: $0) }
            }
            XCTAssertTrue(index.put(stored))
            w.storage = stored.storage
            w.node = index.peek(key, hash: KeyHash.of(key))?.node
        }
        XCTAssertNotNil(w.node, "held by the index")
        XCTAssertNotNil(w.storage, "held by the node")
        return w
    }

    func testEveryWayAKeyLeavesLetsItsNodeAndResponsesGo() {
        var index = SieveIndex(limitBytes: 1 << 20)
        let removed = watch(&index, "/removed")
        XCTAssertEqual(index.remove("/removed"), 1)
        XCTAssertNil(removed.node)
        XCTAssertNil(removed.storage)

        let replaced = watch(&index, "/replaced")
        XCTAssertTrue(index.put(entry("/replaced", bodyBytes: 20)))
        XCTAssertNil(replaced.node, "a new set of variants, a new node")
        XCTAssertNil(replaced.storage)

        let purged = watch(&index, "/purged", tags: ["t"])
        XCTAssertEqual(index.purge(.tag("t"), soft: false), ["/purged": 1])
        XCTAssertNil(purged.node)
        XCTAssertNil(purged.storage)

        let soft = watch(&index, "/soft")
        XCTAssertEqual(index.purge(.key("/soft"), soft: true), ["/soft": 1])
        XCTAssertNil(soft.node, "marked stale: replaced")
        XCTAssertEqual(index.count, 2, "/replaced and /soft")

        let cleared = watch(&index, "/cleared")
        index.removeAll()
        XCTAssertNil(cleared.node)
        XCTAssertNil(cleared.storage)
        XCTAssertEqual(index.count, 0)
    }

    func testEvictionAndTheIndexsEndLetNodesGo() {
        let one = entry("/e0").costBytes
        var watches: [Watch] = []
        do {
            var index = SieveIndex(limitBytes: one * 4)
            for i in 0..<4 { watches.append(watch(&index, "/e\(i)")) }
            XCTAssertTrue(index.put(entry("/e4")))
            XCTAssertNil(watches[0].node, "evicted: the oldest, never hit")
            XCTAssertNil(watches[0].storage)
            XCTAssertEqual(index.evictions, 1)
            XCTAssertNotNil(watches[1].node)
        }
        for w in watches.dropFirst() {
            XCTAssertNil(w.node, "the index's end releases the nodes it holds")
            XCTAssertNil(w.storage)
        }
    }

    func testAKeyWhoseVariantsAreReplacedKeepsItsPlaceInTheOrder() {
        let one = entry("/a").costBytes
        var index = SieveIndex(limitBytes: one * 4)
        for key in ["/a", "/b", "/c", "/d"] { XCTAssertTrue(index.put(entry(key))) }
        XCTAssertEqual(index.purge(.key("/b"), soft: true), ["/b": 1], "a new node for /b, where /b was")
        XCTAssertTrue(index.put(entry("/e")))
        XCTAssertNil(index.peek("/a", hash: KeyHash.of("/a")), "the oldest goes first")
        XCTAssertTrue(index.put(entry("/f")))
        XCTAssertNil(index.peek("/b", hash: KeyHash.of("/b")), "next in the order: /b, not moved to the newest end")
        for key in ["/c", "/d", "/e", "/f"] { XCTAssertNotNil(index.peek(key, hash: KeyHash.of(key)), key) }
    }

    func testARetiredNodeStopsAWorkersCopies() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        tier.insert(entry("/a"))
        for _ in 0..<3 { _ = tier.lookup("/a", local: local) }
        XCTAssertEqual(local.answered, 1, "the third lookup from the copy")
        tier.insert(entry("/a", bodyBytes: 20))
        XCTAssertEqual(tier.lookup("/a", local: local).first?.bodyLength, 20, "the replaced node's copy does not answer")
        XCTAssertEqual(local.answered, 1)
    }

    func testACopyHoldingARetiredNodeLetsTheKeysOlderVariantsGo() {
        let tier = MemoryTier(limitBytes: 1 << 20)
        let local = LocalHits()
        let w = Watch()
        do {
            tier.insert(entry("/v", vary: ["x-v"], values: ["a"]))
            tier.insert(entry("/v", vary: ["x-v"], values: ["b"]))
            for _ in 0..<3 { _ = tier.lookup("/v", local: local) }
            XCTAssertEqual(local.copies, 1)
            w.storage = tier.lookup("/v").first!.storage
        }
        XCTAssertNotNil(w.storage, "the older variant, held by the node")
        XCTAssertEqual(tier.remove("/v"), 2)
        XCTAssertEqual(local.copies, 1, "the worker's copies still hold the node")
        XCTAssertNil(w.storage, "a retired node lets its older variants go")
    }

    /// A variant served from a worker's copy is marked on the tier's own
    /// variant (the copy is another block): it outlives new Vary values.
    func testAVariantServedFromAWorkersCopyIsKept() {
        let tier = MemoryTier(limitBytes: 64 << 20)
        let local = LocalHits()
        tier.insert(entry("/v", vary: ["x-v"], values: ["hot"]))
        tier.insert(entry("/v", vary: ["x-v"], values: ["other"]))
        for _ in 0..<2 { _ = tier.lookup("/v", local: local) }
        let copies = tier.lookup("/v", local: local)
        XCTAssertEqual(local.answered, 1)
        let hot = try! XCTUnwrap(copies.first { $0.varyValues == ["hot"] })
        XCTAssertFalse(tier.lookup("/v").contains { $0.isSame(hot) }, "a copy, not the tier's block")
        for round in 0..<3 {
            for i in 0..<40 {
                tier.noteServed(hot, local: local)
                tier.insert(entry("/v", vary: ["x-v"], values: ["new-\(round)-\(i)"]))
            }
        }
        // Once marked, a copy the last lookup answered with finds its mark
        // at the node's address, without the key hashed.
        _ = tier.lookup("/v", local: local)  // through the tier, its new node: copied again
        let answeredBefore = local.answered
        let again = tier.lookup("/v", local: local)
        XCTAssertEqual(local.answered, answeredBefore + 1, "from the copies")
        let copy = try! XCTUnwrap(again.first { $0.varyValues == ["hot"] })
        let mark = try! XCTUnwrap(local.servedMark(of: copy), "one of the last answer's copies")
        XCTAssertEqual(Array(again)[mark.index].varyValues, ["hot"])
        tier.noteServed(copy, local: local)
        XCTAssertTrue(SieveNode.isServed(mark.bits, index: mark.index))
        XCTAssertNil(local.servedMark(of: tier.lookup("/v").first!), "the tier's own block is not a copy")
        XCTAssertTrue(tier.lookup("/v").contains { $0.varyValues == ["hot"] }, "marked through the copy")
        XCTAssertFalse(tier.lookup("/v").contains { $0.varyValues == ["other"] }, "never served: gone")
    }
}
