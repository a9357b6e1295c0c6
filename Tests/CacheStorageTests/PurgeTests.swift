import HTTPHeaders
import XCTest
import Foundation
import CacheSemantics
@testable import CacheStorage

final class PurgeTests: XCTestCase {
    private var directory = ""
    /// Stores with a disk tier: their writer threads finish before the
    /// directory goes (else a queued write made it again after teardown).
    private var stores: [TieredStore] = []

    override func setUp() {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-purge-\(UUID().uuidString)").path
    }

    override func tearDown() {
        for store in stores { store.flush(timeoutSeconds: 10) }
        stores = []
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func entry(_ key: String, tags: [String] = [], vary: String? = nil, responseTime: Int64 = 0) -> CachedResponse {
        CachedResponse.make(key: key, status: 200, headPrefix: Array("HTTP/1.1 200 OK\r\n".utf8),
                       body: Array("body of \(key)".utf8), otherFields: ["cache-control": "max-age=60"],
                       timing: ResponseTiming(requestTime: responseTime, responseTime: responseTime, dateValue: nil, ageValue: 0),
                       lifetime: 60, cacheControl: CacheControl("max-age=60"),
                       varyNames: vary == nil ? [] : ["accept"], varyValues: vary == nil ? [] : [vary], tags: tags)
    }

    private func tiered(memoryLimit: Int = 1 << 20) throws -> TieredStore {
        let disk = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        disk.waitForIndex(timeoutSeconds: 10)
        let store = TieredStore(memory: MemoryTier(limitBytes: memoryLimit), disk: disk)
        stores.append(store)
        return store
    }

    // MARK: tags from headers

    func testTagsFromBothHeadersAndTheRoute() {
        XCTAssertEqual(PurgeTags.from(surrogateKey: ["user-1  page\tv2"], cacheTag: [" a , b,,user-1 "], route: ["api"]),
                       ["a", "api", "b", "page", "user-1", "v2"])
        XCTAssertEqual(PurgeTags.from(surrogateKey: [], cacheTag: []), [])
        let long = String(repeating: "x", count: PurgeTags.maxLength + 1)
        XCTAssertEqual(PurgeTags.from(surrogateKey: [long + " ok"], cacheTag: [long]), ["ok"])
        let many = (0..<200).map { "t\($0)" }.joined(separator: " ")
        XCTAssertEqual(PurgeTags.from(surrogateKey: [many], cacheTag: []).count, PurgeTags.maxCount)
    }

    func testAGroupsOriginTagIsApartFromEveryTagAFieldNames() {
        let tag = PurgeTags.group("news", origin: "api a.test")
        XCTAssertEqual(PurgeTags.from(surrogateKey: ["news"], cacheTag: [], groups: ["news"], groupOrigin: "api a.test"),
                       [tag, "news"])
        XCTAssertNotEqual(tag, PurgeTags.group("news", origin: "api b.test"))
        XCTAssertNotEqual(PurgeTags.group("a b", origin: "o"), PurgeTags.group("b", origin: "o a"))
        XCTAssertFalse(PurgeScope.tag("news").matches(key: "/k", tags: [tag]))
        XCTAssertTrue(PurgeScope.tag(tag).matches(key: "/k", tags: [tag, "news"]))
        XCTAssertEqual(PurgeScope.tag(tag).description, #"cache group "news" of api a.test"#)
        XCTAssertEqual(PurgeScope.tag("news").description, "tag news")
    }

    // MARK: purge log

    func testAFetchOlderThanAMatchingPurgeIsRefused() {
        var log = PurgeLog()
        let before = log.latest
        _ = log.record(.prefix("/a/"), soft: false)
        XCTAssertEqual(log.verdict(key: "/a/1", tags: [], since: before), .refuse)
        XCTAssertEqual(log.verdict(key: "/b/1", tags: [], since: before), .store)
        XCTAssertEqual(log.verdict(key: "/a/1", tags: [], since: log.latest), .store)  // started after the purge
        _ = log.record(.tag("t"), soft: true)
        XCTAssertEqual(log.verdict(key: "/c", tags: ["t"], since: before + 1), .storeStale)
        XCTAssertEqual(log.verdict(key: "/c", tags: ["u"], since: before + 1), .store)
    }

    func testAForgottenPurgeRefusesConservatively() {
        var log = PurgeLog()
        for i in 0...PurgeLog.capacity { _ = log.record(.key("/k\(i)"), soft: false) }
        XCTAssertEqual(log.verdict(key: "/unrelated", tags: [], since: 0), .refuse)
        XCTAssertEqual(log.verdict(key: "/unrelated", tags: [], since: log.latest - 1), .store)
    }

    // MARK: memory tier

    func testMemoryPurgeByKeyPrefixTagAndAll() {
        let memory = MemoryTier(limitBytes: 1 << 20)
        memory.insert(entry("/a/1", tags: ["red"], vary: "x"))
        memory.insert(entry("/a/1", tags: ["blue"], vary: "y"))
        memory.insert(entry("/a/2", tags: ["red"]))
        memory.insert(entry("/b/1"))
        XCTAssertEqual(memory.purge(.tag("red"), soft: false).counts, ["/a/1": 1, "/a/2": 1])
        XCTAssertEqual(memory.lookup("/a/1").map(\.tags), [["blue"]])  // the other variant stays
        XCTAssertEqual(memory.purge(.tag("red"), soft: false).counts, [:])
        XCTAssertEqual(memory.purge(.prefix("/a/"), soft: false).counts, ["/a/1": 1])
        XCTAssertEqual(memory.purge(.key("/b/1"), soft: false).counts, ["/b/1": 1])
        memory.insert(entry("/c"))
        memory.insert(entry("/d"))
        XCTAssertEqual(memory.purge(.all, soft: false).counts.count, 2)
        XCTAssertEqual(memory.stats.objects, 0)
        XCTAssertEqual(memory.stats.bytes, 0)
    }

    func testSoftPurgeKeepsTheEntryWithNoFreshnessAndItsRecency() {
        let one = entry("/x").costBytes
        let memory = MemoryTier(limitBytes: one * 2 + one / 2)
        memory.insert(entry("/x", tags: ["t"]))
        memory.insert(entry("/y"))
        XCTAssertEqual(memory.purge(.tag("t"), soft: true).counts, ["/x": 1])
        XCTAssertEqual(memory.lookup("/x").first?.lifetime, 0)
        XCTAssertEqual(memory.lookup("/y").first?.lifetime, 60)
        // /x was used before /y, so /x is the least recently used and goes first.
        memory.insert(entry("/z"))
        XCTAssertTrue(memory.lookup("/x").isEmpty)
        XCTAssertFalse(memory.lookup("/y").isEmpty)
    }

    func testEvictedEntriesLeaveTheTagIndex() {
        let memory = MemoryTier(limitBytes: entry("/0", tags: ["t"]).costBytes * 3)
        for i in 0..<50 { memory.insert(entry("/\(i)", tags: ["t", "k\(i)"])) }
        let live = memory.stats.objects
        XCTAssertLessThanOrEqual(live, 3)
        XCTAssertEqual(memory.tagIndexSize, live * 2, "only live entries are indexed")
        XCTAssertEqual(memory.purge(.tag("t"), soft: false).counts.count, live)
        XCTAssertEqual(memory.tagIndexSize, 0)
    }

    func testClearAndPruneByAge() {
        let memory = MemoryTier(limitBytes: 1 << 20)
        memory.insert(entry("/old", responseTime: 100))
        memory.insert(entry("/new", responseTime: 200))
        XCTAssertEqual(memory.removeStored(before: 150), ["/old": 1])
        XCTAssertEqual(memory.removeAll(), 1)
        XCTAssertEqual(memory.stats.objects, 0)
    }

    // MARK: disk tier

    func testDiskTagIndexSurvivesARestart() throws {
        let first = try tiered()
        first.insert(entry("/p/1", tags: ["user-7"]), fetchedSince: first.fetchToken)
        first.insert(entry("/p/2", tags: ["user-7", "x"]), fetchedSince: first.fetchToken)
        first.insert(entry("/p/3", tags: ["user-8"]), fetchedSince: first.fetchToken)
        let store = try restarted(first)
        XCTAssertEqual(store.purge(.tag("user-7"), soft: false), 2)
        XCTAssertTrue(store.lookup("/p/1").isEmpty)
        XCTAssertTrue(store.lookup("/p/2").isEmpty)
        XCTAssertEqual(store.lookup("/p/3").count, 1)
    }

    /// What a new process would find: the files of `store`'s disk tier (in a
    /// copy of the directory, since this process still holds its lock),
    /// with an empty memory tier.
    private func restarted(_ store: TieredStore) throws -> TieredStore {
        store.flush(timeoutSeconds: 10)
        let copy = directory + "-restart"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        let disk = try DiskTier(directory: copy, limitBytes: 100 << 20) { _ in }
        disk.waitForIndex(timeoutSeconds: 10)
        return TieredStore(memory: MemoryTier(limitBytes: 1 << 20), disk: disk)
    }

    func testSoftPurgeOnDiskSurvivesARestart() throws {
        let first = try tiered()
        first.insert(entry("/s", tags: ["t"]), fetchedSince: first.fetchToken)
        first.flush(timeoutSeconds: 10)
        XCTAssertEqual(first.purge(.tag("t"), soft: true), 1)
        XCTAssertEqual(first.lookup("/s").first?.lifetime, 0)
        let found = try restarted(first).lookup("/s")
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(found.first?.lifetime, 0, "a soft-purged file is still stale after a restart")
    }

    func testAFetchThatStartedBeforeAPurgeDoesNotStore() throws {
        let store = try tiered()
        let token = store.fetchToken
        XCTAssertEqual(store.purge(.prefix("/r/"), soft: false), 0)
        XCTAssertFalse(store.insert(entry("/r/1"), fetchedSince: token))
        XCTAssertTrue(store.lookup("/r/1").isEmpty)
        // One that started after the purge stores.
        XCTAssertTrue(store.insert(entry("/r/1"), fetchedSince: store.fetchToken))
        // A soft purge lets the older fetch store, but stale.
        let older = store.fetchToken
        _ = store.purge(.key("/r/2"), soft: true)
        XCTAssertTrue(store.insert(entry("/r/2"), fetchedSince: older))
        XCTAssertEqual(store.lookup("/r/2").first?.lifetime, 0)
    }

    func testAQueuedDiskWriteLosesToALaterPurge() throws {
        let disk = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        disk.waitForIndex(timeoutSeconds: 10)
        for i in 0..<200 { disk.store(DiskRecord(entry("/q/\(i)", tags: ["t"]), storedAt: 1)!) }
        _ = disk.purge(.tag("t"), soft: false)
        disk.flush(timeoutSeconds: 10)
        XCTAssertEqual(disk.stats.objects, 0)
        for i in 0..<200 { XCTAssertTrue(disk.lookup("/q/\(i)").isEmpty) }
    }

    func testPruneRemovesOnlyOldFiles() throws {
        let disk = try DiskTier(directory: directory, limitBytes: 100 << 20) { _ in }
        disk.store(DiskRecord(entry("/old"), storedAt: 100)!)
        disk.store(DiskRecord(entry("/new"), storedAt: 300)!)
        disk.flush(timeoutSeconds: 10)
        XCTAssertEqual(disk.removeStored(before: 200), ["/old": 1])
        XCTAssertTrue(disk.lookup("/old").isEmpty)
        XCTAssertEqual(disk.lookup("/new").count, 1)
    }

    /// The scopes a start-up rebuild checks each file against: by key,
    /// tag, prefix or all, nothing when none was purged.
    func testPurgedScopesMatchWhatTheyPurged() {
        var scopes = PurgedScopes()
        XCTAssertFalse(scopes.matches(key: "/a", tags: ["t"]))
        scopes.add(.key("/a"))
        scopes.add(.tag("queries"))
        scopes.add(.prefix("/img/"))
        XCTAssertTrue(scopes.matches(key: "/a", tags: []))
        XCTAssertFalse(scopes.matches(key: "/ab", tags: []), "a key is not a prefix")
        XCTAssertTrue(scopes.matches(key: "/q", tags: ["other", "queries"]))
        XCTAssertTrue(scopes.matches(key: "/img/1.png", tags: []))
        XCTAssertFalse(scopes.matches(key: "/b", tags: ["other"]))
        scopes.add(.all)
        XCTAssertTrue(scopes.matches(key: "/b", tags: []))
    }
}
