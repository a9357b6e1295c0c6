import XCTest
@testable import Proxy

/// Streaming uploads take at most their share of a worker's upstream
/// connections; the rest wait their turn, in order.
final class UploadShareTests: XCTestCase {
    func testUploadsBeyondTheShareWaitTheirTurnInOrder() {
        XCTAssertEqual(UploadShare.limit(connections: 256), 128)
        XCTAssertEqual(UploadShare.limit(connections: 1), 1, "at least one")
        let share = UploadShare()
        var resumed: [Int] = []
        XCTAssertTrue(share.take(limit: 2) { XCTFail(); return true })
        XCTAssertTrue(share.take(limit: 2) { XCTFail(); return true })
        for i in 0..<3 { XCTAssertFalse(share.take(limit: 2) { resumed.append(i); return i != 1 }) }
        XCTAssertEqual(share.waitingCount, 3)
        share.wake(limit: 2)
        XCTAssertEqual(resumed, [], "no place is free")
        // One place frees (the loop's turn is `wake` here): the first waiting takes it.
        XCTAssertFalse(share.take(limit: 3) { resumed.append(9); return true }, "nobody jumps the queue")
        share.wake(limit: 3)
        XCTAssertEqual(resumed, [0], "the first in line")
        share.wake(limit: 4)
        XCTAssertEqual(resumed, [0, 1, 2], "1 was gone: its place went on to 2")
        XCTAssertEqual(share.inFlight, 4)
        share.wake(limit: 5)
        XCTAssertEqual(resumed, [0, 1, 2, 9])
        XCTAssertEqual(share.waitingCount, 0)
    }

    func testATurnKeepsWhatCameWhileItWaited() {
        var turn = UploadTurn()
        XCTAssertFalse(turn.leave(), "no place to let go")
        turn.wait(["content-length": "10"], .streamed(length: 10))
        XCTAssertTrue(turn.isWaiting)
        Array("hello".utf8).withUnsafeBytes { turn.hold($0) }
        turn.end()
        let waited = turn.resume()
        XCTAssertEqual(waited?.bytes, Array("hello".utf8))
        XCTAssertEqual(waited?.ended, true)
        XCTAssertTrue(turn.hasPlace)
        XCTAssertFalse(turn.isWaiting)
        XCTAssertNil(turn.resume(), "once")
        XCTAssertTrue(turn.leave())
        XCTAssertFalse(turn.hasPlace)
    }
}
