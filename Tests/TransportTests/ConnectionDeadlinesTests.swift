import XCTest
import Transport

/// A connection's deadlines: which comes first, which expired, and when
/// the one timer must be armed again; time moved by hand.
final class ConnectionDeadlinesTests: XCTestCase {
    func testTheEarliestDeadlineExpiresFirstAndEachOnce() {
        var deadlines = ConnectionDeadlines()
        XCTAssertNil(deadlines.next)
        XCTAssertNil(deadlines.expired(now: 1_000_000))
        deadlines[.idle] = 500
        deadlines[.send] = 300
        deadlines[.body] = 400
        XCTAssertEqual(deadlines.next, 300)
        XCTAssertNil(deadlines.expired(now: 299), "nothing due yet")
        XCTAssertEqual(deadlines.expired(now: 450), .send, "the earliest of those passed")
        XCTAssertEqual(deadlines.expired(now: 450), .body)
        XCTAssertNil(deadlines.expired(now: 450))
        XCTAssertEqual(deadlines.next, 500)
        XCTAssertEqual(deadlines.expired(now: 500), .idle)
        XCTAssertNil(deadlines.next)
    }

    func testMovingADeadlineLaterKeepsTheArmedTimerAndEarlierNeedsANewOne() {
        var deadlines = ConnectionDeadlines()
        XCTAssertTrue(deadlines.timerServes(armedAt: 0), "nothing due: no timer needed")
        XCTAssertFalse(deadlines.timerServes(armedAt: 100), "a timer with nothing to do is cancelled")
        deadlines[.idle] = 5_000
        XCTAssertFalse(deadlines.timerServes(armedAt: 0))
        XCTAssertTrue(deadlines.timerServes(armedAt: 5_000))
        // Keep-alive after each request: the deadline moves later, the timer stays.
        deadlines[.idle] = 9_000
        XCTAssertTrue(deadlines.timerServes(armedAt: 5_000), "it fires early, finds nothing due, and is armed again")
        XCTAssertNil(deadlines.expired(now: 5_000))
        // A send stall due before it: armed again.
        deadlines[.send] = 3_000
        XCTAssertFalse(deadlines.timerServes(armedAt: 5_000))
        XCTAssertEqual(deadlines.next, 3_000)
    }

    func testAClearedDeadlineNeverExpires() {
        var deadlines = ConnectionDeadlines()
        deadlines[.body] = 100
        deadlines[.body] = nil
        deadlines[.linger] = 200
        XCTAssertEqual(deadlines.expired(now: 1_000), .linger)
        XCTAssertNil(deadlines[.body])
        XCTAssertEqual(deadlines, ConnectionDeadlines())
    }

    /// Every kind (HTTP/2's stream windows too) is due in the order of its
    /// deadline, whatever the order they were set in.
    func testEveryKindExpiresInTheOrderOfItsDeadline() {
        var deadlines = ConnectionDeadlines()
        let order: [ConnectionDeadlines.Kind] = [.window, .linger, .idle, .send, .body]
        for (i, kind) in order.enumerated() { deadlines[kind] = UInt64(100 * (i + 1)) }
        XCTAssertEqual(deadlines.next, 100)
        var due: [ConnectionDeadlines.Kind] = []
        while let kind = deadlines.expired(now: 1_000) { due.append(kind) }
        XCTAssertEqual(due, order)
        XCTAssertEqual(Set(ConnectionDeadlines.Kind.allCases), Set(order), "each kind is kept apart")
    }
}
