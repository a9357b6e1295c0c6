import CacheSemantics
import XCTest
@testable import Proxy

/// One request's life driven event by event, including orderings that
/// sockets make hard to force.
final class ExchangeMachineTests: XCTestCase {
    private let never: () -> Bool = { XCTFail("not to be asked here"); return false }

    private let fetch = SharedFetch(head: SharedFetch.Head(
        status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
        contentLength: nil, varyNames: [], varyValues: []), limitBytes: 1 << 20)

    private func streaming() -> ExchangeMachine {
        var m = ExchangeMachine()
        m.forward()
        m.responseHeadSent()
        return m
    }

    func testAMissForwardsStreamsAndFinishes() {
        var m = ExchangeMachine()
        XCTAssertEqual(m.state, .lookingUp)
        XCTAssertFalse(m.responseStarted)
        m.forward()
        XCTAssertEqual(m.state, .forwarding)
        XCTAssertTrue(m.takesUpstreamHead)
        XCTAssertFalse(m.responseStarted, "a failure now can still be answered with a stand-in")
        m.responseHeadSent()
        XCTAssertEqual(m.state, .streaming)
        XCTAssertFalse(m.takesUpstreamHead)
        XCTAssertEqual(m.upstreamBody(clientCongested: { false }, storeBacklogged: { false }), .deliver)
        XCTAssertEqual(m.upstreamComplete(failed: false, retryable: false), .endResponse)
        m.finish()
        XCTAssertEqual(m.state, .done)
        XCTAssertTrue(m.clientDone)
    }

    func testAHitIsAnsweredWithoutGoingUpstream() {
        var m = ExchangeMachine()
        m.finish()
        XCTAssertTrue(m.responseStarted)
        XCTAssertFalse(m.takesUpstreamHead)
        XCTAssertEqual(m.upstreamComplete(failed: true, retryable: true), .ignore)
    }

    func testAConnectionFailureIsRetriedThenAnswered() {
        var m = ExchangeMachine()
        m.forward()
        XCTAssertEqual(m.upstreamComplete(failed: true, retryable: true), .retry)
        XCTAssertEqual(m.failedAttempts, 1)
        m.forward()
        XCTAssertEqual(m.upstreamComplete(failed: true, retryable: false), .answerFailure)
        XCTAssertEqual(m.state, .forwarding, "the driver answers, then finishes")
        m.finish()
        XCTAssertEqual(m.upstreamComplete(failed: false, retryable: false), .ignore)
    }

    func testAFailureAfterTheHeadCutsTheResponse() {
        var m = streaming()
        XCTAssertEqual(m.upstreamComplete(failed: true, retryable: true), .cutResponse, "no retry once bytes went out")
        XCTAssertEqual(m.state, .done)
    }

    func testTheRestOfAResponseAnsweredFromTheStoreIsDiscarded() {
        // A 5xx answered with the stale response, or a 304 refresh: the
        // upstream's body may still come.
        var m = ExchangeMachine()
        m.forward()
        m.finish()
        XCTAssertFalse(m.takesUpstreamHead)
        XCTAssertEqual(m.upstreamBody(clientCongested: never, storeBacklogged: never), .discard)
        XCTAssertEqual(m.upstreamComplete(failed: false, retryable: false), .ignore)
    }

    func testASlowClientOrASlowStorePausesUntilCaughtUp() {
        var m = streaming()
        XCTAssertEqual(m.upstreamBody(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertTrue(m.upstreamPaused)
        XCTAssertTrue(m.caughtUp())
        XCTAssertFalse(m.caughtUp(), "resumed once")
        XCTAssertEqual(m.upstreamBody(clientCongested: never, storeBacklogged: { true }), .pause,
                       "the store is asked first; the client need not be")
        XCTAssertTrue(m.caughtUp())
        XCTAssertEqual(m.upstreamBody(clientCongested: { false }, storeBacklogged: { false }), .deliver)
    }

    func testAClientLeavingMidResponseKeepsAStorableFetchGoing() {
        var m = streaming()
        XCTAssertEqual(m.upstreamBody(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .keepFetching(resume: true), "paused for the client: resumed")
        XCTAssertEqual(m.state, .orphaned)
        XCTAssertTrue(m.clientDone)
        XCTAssertEqual(m.upstreamBody(clientCongested: never, storeBacklogged: { false }), .storeOnly,
                       "the connection is gone: never asked")
        XCTAssertEqual(m.upstreamBody(clientCongested: never, storeBacklogged: { true }), .pause, "a slow store still pauses")
        XCTAssertTrue(m.caughtUp())
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .none)
        XCTAssertEqual(m.upstreamComplete(failed: false, retryable: false), .endOrphan)
        XCTAssertEqual(m.state, .done)
    }

    func testAClientLeavingBeforeTheHeadCancelsTheFetch() {
        var m = ExchangeMachine()
        m.forward()
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .cancel(unfollow: nil), "nothing to keep fetching for yet")
        XCTAssertEqual(m.upstreamComplete(failed: true, retryable: true), .ignore)
        var unstorable = streaming()
        XCTAssertEqual(unstorable.clientGone(mayFinishWithoutClient: false), .cancel(unfollow: nil))
    }

    func testWaitingForALeaderThenFollowingItsResponse() {
        var m = ExchangeMachine()
        m.waitForLeader()
        XCTAssertEqual(m.state, .waitingForLeader)
        XCTAssertFalse(m.responseStarted)
        XCTAssertEqual(m.leaderDone(streaming: true), .follow)
        m.follow(fetch)
        XCTAssertEqual(m.state, .following(fetch, read: 0))
        XCTAssertTrue(m.responseStarted)
        m.read(2)
        m.read(1)
        XCTAssertEqual(m.followed?.read, 3, "the next read starts after the pieces queued")
        XCTAssertEqual(m.leaderDone(streaming: false), .ignore, "a second wake-up (the timer) does nothing")
        XCTAssertEqual(m.upstreamBody(clientCongested: never, storeBacklogged: never), .discard, "no transfer of its own")
    }

    func testALeaderDoneWithoutSharingSendsTheWaiterBackToTheStore() {
        var m = ExchangeMachine()
        m.waitForLeader()
        XCTAssertEqual(m.leaderDone(streaming: false), .lookUpAgain)
        XCTAssertEqual(m.state, .lookingUp)
        m.forward()
        XCTAssertEqual(m.state, .forwarding)
    }

    func testTheClientLeavingMidCollapseThenTheLeaderFinishing() {
        var waiting = ExchangeMachine()
        waiting.waitForLeader()
        XCTAssertEqual(waiting.clientGone(mayFinishWithoutClient: false), .cancel(unfollow: nil))
        XCTAssertEqual(waiting.leaderDone(streaming: true), .ignore, "the leader's wake-up after the client left")
        XCTAssertEqual(waiting.state, .done)

        var following = ExchangeMachine()
        following.waitForLeader()
        _ = following.leaderDone(streaming: true)
        following.follow(fetch)
        XCTAssertEqual(following.clientGone(mayFinishWithoutClient: false), .cancel(unfollow: fetch),
                       "the shared response stops notifying this request")
        XCTAssertNil(following.followed)
        following.forward()
        XCTAssertEqual(following.state, .done, "nothing goes upstream for a client that left")
    }

    func testATimerFiringAfterCompletionDoesNothing() {
        var m = ExchangeMachine()
        m.waitForLeader()
        _ = m.leaderDone(streaming: false)
        m.finish()  // served what the leader stored
        XCTAssertEqual(m.leaderDone(streaming: false), .ignore)
        m.forward()  // a retry scheduled before the answer
        XCTAssertEqual(m.state, .done)
    }

    func testALeaderPublishesOnceAndReleasesItsClaimOnce() {
        var m = ExchangeMachine()
        XCTAssertFalse(m.mayPublish, "not leading")
        m.publish(fetch)
        XCTAssertNil(m.published, "only a leader publishes")
        m.lead()
        m.forward()
        m.responseHeadSent()
        XCTAssertTrue(m.mayPublish)
        m.publish(fetch)
        XCTAssertEqual(m.published, fetch)
        XCTAssertFalse(m.mayPublish, "published once")
        XCTAssertEqual(m.clientGone(mayFinishWithoutClient: true), .keepFetching(resume: false))
        XCTAssertEqual(m.published, fetch, "an orphaned leader still feeds its followers")
        XCTAssertEqual(m.upstreamComplete(failed: false, retryable: false), .endOrphan)
        XCTAssertTrue(m.endLeadership(), "the claim is released")
        XCTAssertFalse(m.endLeadership(), "once")
        XCTAssertNil(m.published)
    }

    func testAFollowerDoesNotLead() {
        var m = ExchangeMachine()
        m.waitForLeader()
        _ = m.leaderDone(streaming: true)
        m.follow(fetch)
        XCTAssertFalse(m.endLeadership(), "no claim to release")
        m.follow(fetch)
        XCTAssertEqual(m.followed?.read, 0)
        m.finish()
        XCTAssertNil(m.followed)
        m.read(1)
        XCTAssertEqual(m.state, .done)
    }
}
