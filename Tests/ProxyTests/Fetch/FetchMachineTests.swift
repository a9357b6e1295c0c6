import CacheSemantics
import XCTest
@testable import Proxy

/// One upstream fetch driven event by event: retries, pauses, the client
/// leaving at each point, the claim on the key.
final class FetchMachineTests: XCTestCase {
    private let never: () -> Bool = { XCTFail("not to be asked here"); return false }

    private let shared = SharedFetch(head: SharedFetch.Head(
        status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
        contentLength: nil, varyNames: [], varyValues: []), limitBytes: 1 << 20)

    private func streaming(leading: Bool = false) -> FetchMachine {
        var m = FetchMachine(leading: leading)
        m.headTaken()
        return m
    }

    func testAResponseStreamsThenEnds() {
        var m = FetchMachine(leading: false)
        XCTAssertEqual(m.state, .requesting)
        XCTAssertTrue(m.takesHead)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: never), .discard, "no body before a head")
        m.headTaken()
        XCTAssertEqual(m.state, .streaming)
        XCTAssertFalse(m.takesHead, "one head per fetch")
        XCTAssertEqual(m.body(clientCongested: { false }, storeBacklogged: { false }), .take)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ended)
        XCTAssertEqual(m.state, .done)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ignore, "late completion")
    }

    func testAConnectionFailureIsRetriedThenAnswered() {
        var m = FetchMachine(leading: false)
        XCTAssertEqual(m.complete(failed: true, retryable: true), .retry)
        XCTAssertEqual(m.failedAttempts, 1)
        XCTAssertEqual(m.state, .requesting, "the request goes out again")
        XCTAssertEqual(m.complete(failed: true, retryable: false), .failed)
        XCTAssertEqual(m.state, .done)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ignore)
    }

    func testAResponseWithoutAHeadIsAFailure() {
        var m = FetchMachine(leading: false)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .failed, "closed before any response")
    }

    func testAFailureAfterTheHeadCutsTheResponse() {
        var m = streaming()
        XCTAssertEqual(m.complete(failed: true, retryable: true), .cut, "no retry once bytes went out")
        XCTAssertEqual(m.state, .done)
    }

    func testTheRestOfAResponseAnsweredOtherwiseIsDiscarded() {
        // A 5xx answered with the stale response, or a 304 refresh.
        var m = FetchMachine(leading: false)
        m.finish()
        XCTAssertFalse(m.takesHead)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: never), .discard)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ignore)
    }

    func testASlowClientOrASlowStorePausesUntilCaughtUp() {
        var m = streaming()
        XCTAssertEqual(m.body(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertTrue(m.paused)
        XCTAssertTrue(m.caughtUp())
        XCTAssertFalse(m.caughtUp(), "resumed once")
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { true }), .pause,
                       "the store is asked first; the client need not be")
        XCTAssertTrue(m.caughtUp())
        XCTAssertEqual(m.body(clientCongested: { false }, storeBacklogged: { false }), .take)
    }

    func testAClientLeavingMidResponseKeepsAStorableFetchGoing() {
        var m = streaming()
        XCTAssertEqual(m.body(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .keepFetching(resume: true), "paused for the client: resumed")
        XCTAssertEqual(m.state, .orphaned)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { false }), .take, "the client is gone: never asked")
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { true }), .pause, "a slow store still pauses")
        XCTAssertTrue(m.caughtUp())
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .none)
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ended)
        XCTAssertEqual(m.state, .done)
    }

    func testAnOrphanThatBreaksOffIsCut() {
        var m = streaming()
        _ = m.clientGone(mayFinishWithoutClient: true)
        XCTAssertEqual(m.complete(failed: true, retryable: true), .cut, "nothing stored, no retry")
    }

    func testAClientLeavingBeforeTheHeadCancelsTheFetch() {
        var m = FetchMachine(leading: false)
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .cancel, "nothing to keep fetching for yet")
        XCTAssertFalse(m.takesHead)
        XCTAssertEqual(m.complete(failed: true, retryable: true), .ignore, "no retry for a client that left")
        var unstorable = streaming()
        XCTAssertEqual(unstorable.clientGone(mayFinishWithoutClient: false), .cancel)
        XCTAssertEqual(unstorable.clientGone(mayFinishWithoutClient: true), .none, "over already")
    }

    func testALeaderPublishesOnceAndReleasesItsClaimOnce() {
        var m = streaming(leading: true)
        XCTAssertTrue(m.mayPublish)
        m.publish(shared)
        XCTAssertEqual(m.published, shared)
        XCTAssertFalse(m.mayPublish, "published once")
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .keepFetching(resume: false))
        XCTAssertEqual(m.published, shared, "an orphaned leader still feeds its followers")
        XCTAssertEqual(m.complete(failed: false, retryable: false), .ended)
        XCTAssertTrue(m.endLeadership(), "the claim is released")
        XCTAssertFalse(m.endLeadership(), "once")
        XCTAssertNil(m.published)
    }

    func testAFetchThatDoesNotLeadNeitherPublishesNorReleases() {
        var m = streaming()
        XCTAssertFalse(m.mayPublish)
        m.publish(shared)
        XCTAssertNil(m.published, "only a leader publishes")
        XCTAssertFalse(m.endLeadership(), "no claim to release")
    }
}
