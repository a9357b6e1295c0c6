import EventLoop
import Foundation
import Threads
import XCTest

/// The I/O threads: a job runs off the loop that asked, its result comes
/// back on that loop, what waits or runs meanwhile is counted, and no more
/// than the queue's bound waits.
final class BlockingWorkTests: XCTestCase {
    func testAJobRunsOffTheLoopAndItsResultComesBackOnIt() throws {
        let pool = BlockingWork(threads: 1)
        let loop = try EventLoop()
        let release = DispatchSemaphore(value: 0)
        let asker = pthread_self()
        var ranOn: pthread_t?
        var result: Int?
        pool.run({ () -> Int in
            ranOn = pthread_self()
            release.wait()
            return 42
        }, on: loop) { result = $0 }
        let deadline = Date().addingTimeInterval(10)
        while pool.pending != 1 && Date() < deadline { usleep(1_000) }
        XCTAssertEqual(pool.pending, 1, "the job is counted while it runs")
        pool.run({ 7 }, on: loop) { _ in }
        XCTAssertEqual(pool.pending, 2, "and one waiting for the thread")
        release.signal()
        while (result == nil || pool.pending > 0) && Date() < deadline { loop.runOnce(maxWaitMilliseconds: 20) }
        XCTAssertEqual(result, 42, "handed back on the loop")
        XCTAssertEqual(pool.pending, 0)
        XCTAssertEqual(pthread_equal(try XCTUnwrap(ranOn), asker), 0, "run on another thread")
    }

    /// A full queue takes no more: what comes then is asked again on its
    /// loop until there is room, never run on the loop, and every job runs once.
    func testAFullQueueDefersJobsUntilThereIsRoomAndRunsEachOnce() throws {
        let pool = BlockingWork(threads: 1, maxQueued: 2)
        let loop = try EventLoop()
        let release = DispatchSemaphore(value: 0)
        let asker = pthread_self()
        var results: [Int] = []
        var mostPending = 0
        var ranOnLoop = false
        let running = DispatchSemaphore(value: 0)
        pool.run({ () -> Int in running.signal(); release.wait(); return 0 }, on: loop) { results.append($0) }
        let deadline = Date().addingTimeInterval(10)
        XCTAssertEqual(running.wait(timeout: .now() + 10), .success, "the first job holds the thread")
        for n in 1...5 {
            pool.run({ () -> Int in
                if pthread_equal(pthread_self(), asker) != 0 { ranOnLoop = true }
                return n
            }, on: loop) { results.append($0) }
            mostPending = max(mostPending, pool.pending)
        }
        XCTAssertEqual(pool.pending, 3, "the running job and the two the queue holds")
        XCTAssertEqual(pool.deferred, 3, "the other three wait on the loop")
        release.signal()
        while results.count < 6 && Date() < deadline {
            loop.runOnce(maxWaitMilliseconds: 20)
            mostPending = max(mostPending, pool.pending)
        }
        XCTAssertEqual(results.sorted(), [0, 1, 2, 3, 4, 5], "each job ran once")
        XCTAssertLessThanOrEqual(mostPending, 3, "never more than the bound waited")
        XCTAssertFalse(ranOnLoop)
    }
}
