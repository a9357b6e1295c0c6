import EdgeControls
import Synchronization
import XCTest

final class RateLimitTests: XCTestCase {
    func testTheCellRateAdmitsBurstPlusOneAtOnce() {
        let limit = RateLimit(requests: 20, periodMilliseconds: 1000, burst: 10)
        XCTAssertEqual(limit.interval, 50_000)
        var tat: UInt64 = 0, admitted = 0
        let now: UInt64 = 5_000_000
        for _ in 0..<30 {
            if case .admit(let next) = CellRate.decide(tat: tat, now: now, interval: limit.interval, tolerance: limit.tolerance) {
                tat = next
                admitted += 1
            }
        }
        XCTAssertEqual(admitted, 11, "nginx's burst=10 nodelay: one plus ten at once")
        // Refused with the wait until the next one fits.
        XCTAssertEqual(CellRate.decide(tat: tat, now: now, interval: limit.interval, tolerance: limit.tolerance), .refuse(retryAfter: 50_000))
        // At the steady rate afterwards.
        XCTAssertEqual(CellRate.decide(tat: tat, now: now + 50_000, interval: limit.interval, tolerance: limit.tolerance),
                       .admit(newTAT: tat + 50_000))
        XCTAssertEqual(CellRate.retryAfterSeconds(50_000), 1)
        XCTAssertEqual(CellRate.retryAfterSeconds(2_000_001), 3)
    }

    func testClientsHaveTheirOwnBuckets() {
        let limiter = RateLimiter(RateLimit(requests: 2, periodMilliseconds: 60_000, burst: 1), slots: 64)
        let a = RateLimiter.hash(IPAddress("127.0.0.2")!), b = RateLimiter.hash(IPAddress("127.0.0.3")!)
        let now: UInt64 = 1_000_000
        func admitted(_ hash: UInt64) -> Bool { if case .admit = limiter.take(hash, now: now) { return true } else { return false } }
        XCTAssertTrue(admitted(a))
        XCTAssertTrue(admitted(a))
        XCTAssertFalse(admitted(a))
        XCTAssertTrue(admitted(b), "another address is not limited by the first")
        guard case .refuse(let wait) = limiter.take(a, now: now) else { return XCTFail("admitted") }
        XCTAssertEqual(wait, 30_000_000)
        XCTAssertNotEqual(RateLimiter.hash("key-1"), RateLimiter.hash("key-2"))
    }

    func testTheTableIsBoundedAndForgetsTheLeastRecentlySeen() {
        let limiter = RateLimiter(RateLimit(requests: 1, periodMilliseconds: 60_000, burst: 0), slots: 8)
        XCTAssertEqual(limiter.slots, 8)
        let now: UInt64 = 10_000_000
        // Thousands of clients through eight words: never a crash, and new
        // ones are admitted (but the few whose tag meets a word's: one in 4,096 here).
        var refused = 0
        for i in 0..<5000 {
            if case .refuse = limiter.take(RateLimiter.hash("client-\(i)"), now: now + UInt64(i)) { refused += 1 }
        }
        XCTAssertLessThan(refused, 10)
        // The one seen last is still tracked; the oldest are forgotten.
        let last = RateLimiter.hash("client-4999")
        guard case .refuse = limiter.take(last, now: now + 5000) else { return XCTFail("the most recent client was forgotten") }
    }

    func testWorkersShareOneCount() {
        let limiter = RateLimiter(RateLimit(requests: 100, periodMilliseconds: 3_600_000, burst: 99))
        let hash = RateLimiter.hash(IPAddress("127.0.0.2")!)
        let admitted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<100 { if case .admit = limiter.take(hash, now: 1_000_000) { admitted.add(1, ordering: .relaxed) } }
        }
        // One bucket of 100 for 400 requests from four threads (a contended swap may admit a few more).
        XCTAssertGreaterThanOrEqual(admitted.load(ordering: .relaxed), 100)
        XCTAssertLessThan(admitted.load(ordering: .relaxed), 120)
    }
}
