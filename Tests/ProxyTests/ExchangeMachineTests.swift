import CacheSemantics
import XCTest
@testable import Proxy

/// One request's life as the client sees it, driven event by event,
/// including orderings that sockets make hard to force.
final class ExchangeMachineTests: XCTestCase {
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
        XCTAssertTrue(m.responseStarted)
        XCTAssertFalse(m.takesUpstreamHead, "one head per answer")
        m.finish()
        XCTAssertEqual(m.state, .done)
        XCTAssertTrue(m.clientDone)
    }

    func testAskingTheFleetThenGoingOn() {
        var m = ExchangeMachine()
        m.askFleet()
        XCTAssertEqual(m.state, .askingFleet)
        XCTAssertFalse(m.responseStarted)
        XCTAssertTrue(m.fleetAnswered())
        XCTAssertEqual(m.state, .lookingUp, "decides again with what the fleet had")
        XCTAssertFalse(m.fleetAnswered(), "once")
        m.forward()
        XCTAssertEqual(m.state, .forwarding)
    }

    func testTheClientLeavingWhileTheFleetIsAsked() {
        var m = ExchangeMachine()
        m.askFleet()
        m.finish()
        XCTAssertFalse(m.fleetAnswered(), "a late answer does nothing")
        XCTAssertEqual(m.state, .done)
    }

    func testAHitIsAnsweredWithoutGoingUpstream() {
        var m = ExchangeMachine()
        m.finish()
        XCTAssertTrue(m.responseStarted)
        XCTAssertFalse(m.takesUpstreamHead)
    }

    /// A stored gzip body decoded as the client drains: started, not done
    /// until the body ends; a 304's refresh may start it while forwarding.
    func testADecodedStoredBodyStreamsUntilItEnds() {
        var machine = ExchangeMachine()
        machine.decodeStored()
        XCTAssertEqual(machine.state, .decoding)
        XCTAssertTrue(machine.responseStarted)
        XCTAssertFalse(machine.clientDone)
        XCTAssertFalse(machine.takesUpstreamHead)
        machine.finish()
        XCTAssertTrue(machine.clientDone)
        machine.decodeStored()
        XCTAssertEqual(machine.state, .done, "late: nothing")

        var validating = ExchangeMachine()
        validating.forward()
        validating.decodeStored()
        XCTAssertEqual(validating.state, .decoding)
    }

    func testAnAnswerFromTheStoreWhileForwardingTakesNoUpstreamHead() {
        // A 5xx answered with the stale response, or a 304's refresh: the
        // exchange is done before the upstream's head could be written.
        var m = ExchangeMachine()
        m.forward()
        m.finish()
        XCTAssertFalse(m.takesUpstreamHead)
        m.responseHeadSent()
        XCTAssertEqual(m.state, .done)
    }

    func testAskingAgainWithoutValidators() {
        var m = ExchangeMachine()
        m.forward()
        m.forward()  // the 304 named nothing held
        XCTAssertEqual(m.state, .forwarding)
        XCTAssertTrue(m.takesUpstreamHead)
    }

    func testWaitingForALeaderThenFollowingItsResponse() {
        var m = ExchangeMachine()
        m.waitForLeader()
        XCTAssertEqual(m.state, .waitingForLeader)
        XCTAssertFalse(m.responseStarted)
        XCTAssertEqual(m.leaderDone(streaming: true), .follow)
        m.follow()
        XCTAssertEqual(m.state, .following)
        XCTAssertTrue(m.responseStarted)
        XCTAssertFalse(m.takesUpstreamHead, "no fetch of its own")
        XCTAssertEqual(m.leaderDone(streaming: false), .ignore, "a second wake-up (the timer) does nothing")
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
        waiting.finish()  // the client left
        XCTAssertEqual(waiting.leaderDone(streaming: true), .ignore, "the leader's wake-up after the client left")
        XCTAssertEqual(waiting.state, .done)

        var following = ExchangeMachine()
        following.waitForLeader()
        _ = following.leaderDone(streaming: true)
        following.follow()
        following.finish()  // the client left
        following.forward()
        XCTAssertEqual(following.state, .done, "nothing goes upstream for a client that left")
    }

    func testATimerFiringAfterCompletionDoesNothing() {
        var m = ExchangeMachine()
        m.waitForLeader()
        _ = m.leaderDone(streaming: false)
        m.finish()  // served what the leader stored
        XCTAssertEqual(m.leaderDone(streaming: false), .ignore)
        m.forward()  // a refetch scheduled before the answer
        XCTAssertEqual(m.state, .done)
    }

    func testFollowingOnceAndNothingAfterTheEnd() {
        var m = ExchangeMachine()
        m.waitForLeader()
        _ = m.leaderDone(streaming: true)
        m.follow()
        m.finish()
        m.follow()
        XCTAssertEqual(m.state, .done, "nothing is followed after the end")
    }
}
