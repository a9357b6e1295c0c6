import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import XCTest
@testable import Proxy

/// A collapsed request reading the leader's shared response, without
/// sockets: pieces in order whenever they arrive, one end, nothing after
/// the client left mid-collapse, and no more than the sink takes.
final class SharedFetchReaderTests: XCTestCase {
    private var loop: EventLoop!
    private var client: RecordingSink!
    private var shared: SharedFetch!
    private var readers: [SharedFetchReader] = []

    override func setUpWithError() throws {
        loop = try EventLoop()
        client = RecordingSink()
        shared = SharedFetch(head: SharedFetch.Head(
            status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
            contentLength: nil, varyNames: [], varyValues: []), limitBytes: 16)
    }

    override func tearDown() {
        (loop, client, shared, readers) = (nil, nil, nil, [])
    }

    /// A reader driven as an exchange drives its body source: pulled when
    /// it says pieces are ready, its end written down.
    private func follow(budget: Int = 1 << 20) -> SharedFetchReader {
        var reader: SharedFetchReader!
        reader = SharedFetchReader(shared, loop: loop, ready: { [unowned self] in self.pull(reader, budget: budget) })
        readers.append(reader)
        return reader
    }

    @discardableResult
    private func pull(_ reader: SharedFetchReader, budget: Int = 1 << 20) -> BodyPull {
        let result = reader.pull(into: client, budget: budget)
        if result == .ended { _ = client.endBody(whole: true) }
        if case .cut = result { client.note("cut") }
        return result
    }

    /// Runs what was queued to the loop (bounded).
    private func runQueued() {
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
    }

    private func piece(_ text: String) -> Bytes { Bytes(Array(text.utf8)) }

    func testPiecesBeforeAndAfterJoiningArriveInOrderThenTheEndOnce() {
        shared.append(piece("ab"))
        let reader = follow()
        pull(reader)
        XCTAssertEqual(client.events, ["body 2"], "what arrived before joining comes first")
        shared.append(piece("cde"))
        shared.append(piece("f"))
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "body 3", "body 1"])
        shared.finish(.complete)
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "body 3", "body 1", "end whole"])
        pull(reader)
        runQueued()
        XCTAssertEqual(client.events.count, 4, "one end, however often it is woken")
        XCTAssertFalse(shared.hasFollowers)
    }

    func testALeaderFailingMidBodyCutsTheFollower() {
        let reader = follow()
        pull(reader)
        shared.append(piece("ab"))
        shared.finish(.failed)
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "cut"])
    }

    func testAResponseTooLargeToKeepCutsTheFollower() {
        let reader = follow()
        pull(reader)
        shared.append(piece(String(repeating: "x", count: 17)))
        runQueued()
        XCTAssertEqual(client.events, ["cut"], "limitBytes (16) exceeded: the follower cannot have it all")
    }

    func testAClientLeavingMidCollapseHearsNothingMore() {
        let reader = follow()
        pull(reader)
        shared.append(piece("ab"))
        reader.stop()  // the client left before its notification ran
        XCTAssertFalse(shared.hasFollowers, "the shared response stops notifying it")
        runQueued()
        shared.finish(.complete)
        runQueued()
        pull(reader)
        XCTAssertEqual(client.events, [])
    }

    func testAFollowerTakesNoMoreThanItsBudgetOrWhatItsSinkTakes() {
        shared.append(piece("ab"))
        shared.append(piece("cd"))
        shared.append(piece("ef"))
        shared.append(piece("gh"))
        let reader = follow(budget: 3)
        XCTAssertEqual(pull(reader, budget: 3), .more, "two pieces (4 bytes reach the budget of 3): more to come")
        XCTAssertEqual(client.events, ["body 2", "body 2"])
        client.congested = true
        XCTAssertEqual(pull(reader, budget: 3), .more, "the sink is behind: one piece goes, then it stops")
        XCTAssertEqual(client.events, ["body 2", "body 2", "body 2"])
        client.congested = false
        XCTAssertEqual(pull(reader, budget: 3), .waiting, "all handed over; the leader is still fetching")
        XCTAssertEqual(client.events.count, 4)
    }
}
