import XCTest
import EventLoop
import Transport

/// A connection's deadlines on its loop's one timer, with the loop's clock
/// moved on instead of waited for: each passes once, earliest first, and
/// one moved later keeps its connection.
final class DeadlineKeeperTests: XCTestCase {
    private final class Connection: DeadlineKeeper {
        var deadlines = ConnectionDeadlines()
        var timer = TimerID.none
        var timerAt: UInt64 = 0
        let loop: EventLoop
        var closed = false
        var passedDeadlines: [ConnectionDeadlines.Kind] = []
        init(loop: EventLoop) { self.loop = loop }
        func passed(_ deadline: ConnectionDeadlines.Kind) {
            passedDeadlines.append(deadline)
            if deadline == .idle { closed = true }
        }
    }

    func testDeadlinesPassOnTheLoopsClock() throws {
        let loop = try EventLoop()
        let connection = Connection(loop: loop)
        connection.setDeadline(.idle, after: 30_000)  // keep_alive_timeout
        connection.setDeadline(.send, after: 10_000)  // send_timeout
        loop.advanceClock(milliseconds: 9_000)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(connection.passedDeadlines, [], "nothing due at 9 s")
        loop.advanceClock(milliseconds: 1_000)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(connection.passedDeadlines, [.send])
        connection.setDeadline(.idle, after: 30_000)  // a request came: idle again from now
        loop.advanceClock(milliseconds: 25_000)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(connection.passedDeadlines, [.send], "moved later: not passed at its first time")
        loop.advanceClock(milliseconds: 5_000)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(connection.passedDeadlines, [.send, .idle])
        XCTAssertTrue(connection.closed)
        connection.cancelTimer()
    }
}
