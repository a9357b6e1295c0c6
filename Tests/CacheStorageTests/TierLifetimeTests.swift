import XCTest
import Foundation
import Clocks
import CacheSemantics
@testable import CacheStorage

/// memory_ttl and disk_ttl measured by the tiers' injected clock, moved by
/// hand here: a lifetime ends without the test waiting for it.
final class TierLifetimeTests: DiskTestCase {
    /// A response received now by `clock`, fresh for a minute.
    private func entry(_ key: String, at clock: WallClock, bytes: Int = 100) -> CachedResponse {
        let now = clock.now()
        let head = testHead(key, timing: ResponseTiming(requestTime: now, responseTime: now, dateValue: now, ageValue: 0))
        return [UInt8](repeating: 0x61, count: bytes).withUnsafeBytes { CachedResponse.make(head: head, body: $0) }
    }

    private func storedFiles() -> [String] {
        (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? []).filter { $0.hasSuffix(".lrd") }
    }

    func testMemoryTTLEndsAnEntryThatHTTPStillCallsFresh() {
        let clock = WallClock()
        let tier = MemoryTier(limitBytes: 1 << 20, lifetimeSeconds: 5, clock: clock)
        let storedAt = clock.now()
        tier.insert(entry("/m", at: clock))
        clock.advance(by: 5)
        let kept = tier.lookup("/m").count
        // (Unless the system's own second turned meanwhile: the clock moves with it.)
        if clock.now() == storedAt + 5 { XCTAssertEqual(kept, 1, "at its memory lifetime: still kept") }
        clock.advance(by: 1)
        XCTAssertEqual(tier.lookup("/m").count, 0, "past it: gone, though fresh for another 54 s")
        XCTAssertEqual(tier.stats.objects, 0)
    }

    /// Per-key lifetimes (routes) swapped while the tier serves, as a reload does.
    private struct Rules: TierLifetimes {
        let prefix: String, seconds: Int
        func memoryLifetime(_ key: String) -> Int?? { key.hasPrefix(prefix) ? .some(seconds) : nil }
        func diskLifetime(_ key: String) -> Int?? { nil }
    }

    func testRouteLifetimesApplyAndAReloadReplacesThem() {
        let clock = WallClock()
        let tier = MemoryTier(limitBytes: 1 << 20, clock: clock)
        tier.setLifetimeRules(Rules(prefix: "/short/", seconds: 2))
        tier.insert(entry("/short/a", at: clock))
        tier.insert(entry("/long/a", at: clock))
        clock.advance(by: 3)
        XCTAssertEqual(tier.lookup("/short/a").count, 0, "its route's memory_ttl ended it")
        XCTAssertEqual(tier.lookup("/long/a").count, 1, "no route: kept until evicted")
        tier.setLifetimeRules(Rules(prefix: "/long/", seconds: 1))
        XCTAssertEqual(tier.lookup("/long/a").count, 0, "the new rules apply at once")
        tier.insert(entry("/long/b", at: clock))
        tier.setLifetimeRules(nil)
        clock.advance(by: 5)
        XCTAssertEqual(tier.lookup("/long/b").count, 1, "rules gone: no lifetime")
    }

    func testDiskTTLEndsAFileAndDeletesIt() throws {
        let clock = WallClock()
        let tier = try DiskTier(directory: directory, limitBytes: 100 << 20, lifetimeSeconds: 5, clock: clock) { _ in }
        let storedAt = clock.now()
        XCTAssertTrue(tier.insert(entry("/d", at: clock)))
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(storedFiles().count, 1)
        clock.advance(by: 5)
        let served = tier.lookup("/d").count
        // (Unless the system's own second turned meanwhile: the clock moves with it.)
        if clock.now() == storedAt + 5 { XCTAssertEqual(served, 1, "at its disk lifetime: still served") }
        clock.advance(by: 1)
        XCTAssertEqual(tier.lookup("/d").count, 0, "past it: not served")
        tier.flush(timeoutSeconds: 10)
        XCTAssertEqual(storedFiles(), [], "and its file deleted")
    }

    /// A file stored before a stop, looked up after a restart whose clock
    /// is past its lifetime: the time the tier was stopped counts.
    func testDiskTTLCountsTheTimeTheTierWasStopped() throws {
        let clock = WallClock()
        let first = try DiskTier(directory: directory, limitBytes: 100 << 20, lifetimeSeconds: 5, clock: clock) { _ in }
        XCTAssertTrue(first.insert(entry("/r", at: clock)))
        first.flush(timeoutSeconds: 10)
        first.waitUntilReady(timeoutSeconds: 10)
        // The restart: the directory as the stopped tier left it, without its lock.
        let copy = directory + "-restarted"
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        try FileManager.default.removeItem(atPath: copy + "/lock")
        clock.advance(by: 6)
        let later = try DiskTier(directory: copy, limitBytes: 100 << 20, lifetimeSeconds: 5, clock: clock) { _ in }
        later.waitUntilReady(timeoutSeconds: 10)
        XCTAssertEqual(later.lookup("/r").count, 0, "past disk_ttl after the restart: not served")
        XCTAssertEqual(first.lookup("/r").count, 0)
        let longer = WallClock()
        let kept = try DiskTier(directory: directory + "-kept", limitBytes: 100 << 20, lifetimeSeconds: 60, clock: longer) { _ in }
        defer { try? FileManager.default.removeItem(atPath: directory + "-kept") }
        XCTAssertTrue(kept.insert(entry("/r", at: longer)))
        kept.flush(timeoutSeconds: 10)
        longer.advance(by: 6)
        XCTAssertEqual(kept.lookup("/r").count, 1, "a longer disk_ttl keeps it")
    }
}
