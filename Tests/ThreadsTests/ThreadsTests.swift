import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

final class ThreadsTests: XCTestCase {
    func testAStartedThreadRunsItsBodyUnderItsName() throws {
        let done = Condition()
        var seen: (name: String, sameThread: Bool)?
        let caller = pthread_self()
        try startThread(name: "larder-test-thread-with-a-long-name") {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            done.lock()
            seen = (comm.trimmingCharacters(in: .newlines), pthread_equal(caller, pthread_self()) != 0)
            done.broadcast()
            done.unlock()
        }
        let deadline = Condition.deadline(afterMilliseconds: 10_000)
        done.lock()
        while seen == nil && done.wait(until: deadline) {}
        done.unlock()
        let result = try XCTUnwrap(seen, "the thread did not run within 10 s")
        XCTAssertEqual(result.name, "larder-test-thr", "Linux keeps the first 15 bytes of the name")
        XCTAssertFalse(result.sameThread)
    }

    func testATimedWaitEndsAtItsDeadlineWhenNothingWakesIt() {
        let condition = Condition()
        let start = DispatchTime.now().uptimeNanoseconds
        condition.lock()
        let woken = condition.wait(until: Condition.deadline(afterMilliseconds: 50))
        condition.unlock()
        XCTAssertFalse(woken)
        XCTAssertGreaterThanOrEqual(DispatchTime.now().uptimeNanoseconds - start, 50_000_000)
    }

    func testABroadcastWakesAWaiterBeforeItsDeadline() throws {
        let condition = Condition()
        var ready = false
        try startThread(name: "waker") {
            condition.lock()
            ready = true
            condition.broadcast()
            condition.unlock()
        }
        let deadline = Condition.deadline(afterMilliseconds: 10_000)
        condition.lock()
        while !ready && condition.wait(until: deadline) {}
        let sawIt = ready
        condition.unlock()
        XCTAssertTrue(sawIt)
    }

    func testDeadlinesCarryNanosecondsIntoSeconds() {
        let deadline = Condition.deadline(afterMilliseconds: 1_999)
        XCTAssertLessThan(deadline.tv_nsec, 1_000_000_000)
        XCTAssertGreaterThanOrEqual(deadline.tv_nsec, 0)
    }
}
