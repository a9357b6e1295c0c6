import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import XCTest
@testable import Proxy

/// A collapsed request reading the leader's shared response, without
/// sockets: pieces in order whenever they arrive, one end, and nothing
/// after the client left mid-collapse.
final class SharedFetchReaderTests: XCTestCase {
    private var loop: EventLoop!
    private var client: StandInClient!
    private var shared: SharedFetch!

    override func setUpWithError() throws {
        loop = try EventLoop()
        var parser = RequestParser()
        guard case .complete(let head, _) = Array("GET /a HTTP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes({ parser.parse($0) })
        else { throw XCTSkip("unparsed") }
        client = StandInClient(request: head, key: "/a")
        shared = SharedFetch(head: SharedFetch.Head(
            status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
            contentLength: nil, varyNames: [], varyValues: []), limitBytes: 16)
    }

    override func tearDown() {
        (loop, client, shared) = (nil, nil, nil)
    }

    /// Runs what was queued to the loop (bounded).
    private func runQueued() {
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
    }

    private func piece(_ text: String) -> Bytes { Bytes(Array(text.utf8)) }

    func testPiecesBeforeAndAfterJoiningArriveInOrderThenTheEndOnce() {
        shared.append(piece("ab"))
        let reader = SharedFetchReader(shared, for: client, loop: loop)
        reader.pull()
        XCTAssertEqual(client.events, ["body 2"], "what arrived before joining comes first")
        shared.append(piece("cde"))
        shared.append(piece("f"))
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "body 3", "body 1"])
        shared.finish(.complete)
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "body 3", "body 1", "ended whole"])
        reader.pull()
        runQueued()
        XCTAssertEqual(client.events.count, 4, "one end, however often it is woken")
        XCTAssertFalse(shared.hasFollowers)
    }

    func testALeaderFailingMidBodyCutsTheFollower() {
        let reader = SharedFetchReader(shared, for: client, loop: loop)
        reader.pull()
        shared.append(piece("ab"))
        shared.finish(.failed)
        runQueued()
        XCTAssertEqual(client.events, ["body 2", "cut"])
    }

    func testAResponseTooLargeToKeepCutsTheFollower() {
        let reader = SharedFetchReader(shared, for: client, loop: loop)
        reader.pull()
        shared.append(piece(String(repeating: "x", count: 17)))
        runQueued()
        XCTAssertEqual(client.events, ["cut"], "limitBytes (16) exceeded: the follower cannot have it all")
    }

    func testAClientLeavingMidCollapseHearsNothingMore() {
        let reader = SharedFetchReader(shared, for: client, loop: loop)
        reader.pull()
        shared.append(piece("ab"))
        reader.stop()  // the client left before its notification ran
        XCTAssertFalse(shared.hasFollowers, "the shared response stops notifying it")
        runQueued()
        shared.finish(.complete)
        runQueued()
        reader.pull()
        XCTAssertEqual(client.events, [])
    }
}
