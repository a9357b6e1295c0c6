import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import XCTest
@testable import Proxy

/// The waiting side of collapsing, without sockets: who leads, follows,
/// waits or fetches alone, and that a wait ends exactly once (published,
/// released, timed out), or not at all once stopped.
final class LeaderWaitTests: XCTestCase {
    private var loop: EventLoop!
    private var collapser: Collapser!
    private var ended: [String] = []

    override func setUpWithError() throws {
        loop = try EventLoop()
        collapser = Collapser()
        ended = []
    }

    override func tearDown() {
        (loop, collapser) = (nil, nil)
    }

    private func request(_ method: String = "GET", accept: String = "text/a") throws -> RequestHead {
        var parser = RequestParser()
        let text = "\(method) /k HTTP/1.1\r\nHost: x\r\nAccept: \(accept)\r\n\r\n"
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else { throw XCTSkip("unparsed") }
        return head
    }

    /// A response varying on Accept, as the leader (Accept: text/a) got it.
    private func shared() -> SharedFetch {
        SharedFetch(head: SharedFetch.Head(status: 200, reason: nil, headers: [:],
                                           timing: ResponseTiming(requestTime: 1, responseTime: 1, dateValue: 1, ageValue: 0),
                                           contentLength: nil, varyNames: ["accept"],
                                           varyValues: [Vary.normalize("text/a", field: "accept")]),
                    limitBytes: 1 << 20)
    }

    private func join(_ request: RequestHead, timeout: UInt64 = 60_000) -> LeaderWait.Joined {
        LeaderWait.join("/k", for: request, collapser: collapser, loop: loop, timeoutMilliseconds: timeout) { [self] in
            switch $0 {
            case .follow: ended.append("follow")
            case .fetchAlone: ended.append("fetch alone")
            case .lookUpAgain: ended.append("look up again")
            case .claimedAcrossFleet(let claimed): ended.append("claimed \(claimed)")
            }
        }
    }

    /// Runs what was queued to the loop (bounded).
    private func runQueued() {
        for _ in 0..<3 { loop.runOnce(maxWaitMilliseconds: 0) }
    }

    func testTheFirstLeadsAndTheNextWaitsUntilTheResponseIsPublished() throws {
        guard case .leading = join(try request()) else { return XCTFail("the first leads") }
        guard case .waiting(let wait) = join(try request()) else { return XCTFail("the next waits") }
        runQueued()
        XCTAssertEqual(ended, [], "nothing is told while the leader fetches")
        collapser.publish("/k", shared())
        runQueued()
        XCTAssertEqual(ended, ["follow"])
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(ended, ["follow"], "a wait ends once")
        withExtendedLifetime(wait) {}
    }

    func testAWaiterForAnotherVariantFetchesAlone() throws {
        _ = join(try request())
        guard case .waiting(let wait) = join(try request(accept: "text/b")) else { return XCTFail("it waits") }
        collapser.publish("/k", shared())
        runQueued()
        XCTAssertEqual(ended, ["fetch alone"], "the leader's response varies on a field this request sends otherwise")
        withExtendedLifetime(wait) {}
    }

    func testALeaderDoneWithNothingToShareSendsTheWaiterBackToTheStore() throws {
        _ = join(try request())
        guard case .waiting(let wait) = join(try request()) else { return XCTFail("it waits") }
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(ended, ["look up again"])
        withExtendedLifetime(wait) {}
    }

    func testASlowLeaderStopsBeingWaitedForOnce() throws {
        _ = join(try request())
        guard case .waiting(let wait) = join(try request(), timeout: 30_000) else { return XCTFail("it waits") }
        loop.advanceClock(milliseconds: 29_999)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(ended, [], "waited for up to upstream_timeout")
        loop.advanceClock(milliseconds: 1)
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(ended, ["look up again"], "the timer ends the wait")
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(ended, ["look up again"], "the leader's release comes too late to count")
        withExtendedLifetime(wait) {}
    }

    func testAStoppedWaitIsToldNothing() throws {
        _ = join(try request())
        guard case .waiting(let wait) = join(try request(), timeout: 30_000) else { return XCTFail("it waits") }
        wait.stop()
        loop.advanceClock(milliseconds: 30_000)
        loop.runOnce(maxWaitMilliseconds: 0)
        collapser.release("/k")
        runQueued()
        XCTAssertEqual(ended, [], "the client left: neither the timer nor the leader reaches it")
    }

    func testAResponseAlreadyStreamingIsFollowedWhenItSuits() throws {
        _ = join(try request())
        guard case .waiting(let first) = join(try request()) else { return XCTFail("it waits") }
        collapser.publish("/k", shared())
        guard case .following = join(try request()) else { return XCTFail("a newcomer follows at once") }
        guard case .fetchAlone = join(try request(accept: "text/b")) else { return XCTFail("another variant fetches alone") }
        withExtendedLifetime(first) {}
    }

    func testOnlyAGetCollapses() throws {
        _ = join(try request())
        guard case .fetchAlone = join(try request("HEAD")) else { return XCTFail("a HEAD fetches alone") }
        XCTAssertEqual(ended, [])
    }
}
