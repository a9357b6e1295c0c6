import EventLoop
import Foundation
import XCTest
@testable import Proxy

/// The I/O threads: a job runs off the loop that asked, its result comes
/// back on that loop, and what waits or runs meanwhile is counted.
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
}
