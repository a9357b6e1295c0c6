import CacheSemantics
import Upstream
import XCTest
@testable import Proxy

/// One upstream fetch driven event by event, comparing the actions it
/// returns: heads refused or dropped, retries and failures (and which mark
/// the server), pauses, the client leaving at each point, the claim on the
/// key, and every late event ignored with the state that found it.
final class FetchMachineTests: XCTestCase {
    private let never: () -> Bool = { XCTFail("not to be asked here"); return false }
    private let unreachable = UpstreamError.unreachable("connection refused")

    private let shared = SharedFetch(head: SharedFetch.Head(
        status: 200, reason: nil, headers: [:], timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
        contentLength: nil, varyNames: [], varyValues: []), limitBytes: 1 << 20)

    private func ignored(_ event: FetchEvent, _ state: FetchMachine.State) -> FetchAction {
        .ignored(FetchIgnored(event: event, state: state))
    }

    /// Streaming a response the store takes (`storing`), of `length`
    /// bytes, with a finish_store_limit of 1,000 bytes.
    private func streaming(leading: Bool = false, storing: Bool = true, length: Int? = 100) -> FetchMachine {
        var m = FetchMachine(leading: leading, retryLimit: 1, finishStoreLimit: 1000)
        XCTAssertEqual(m.head(invalid: nil, clientTakes: true), .stream)
        XCTAssertEqual(m.storeChosen(storing, expectedLength: length), storing ? .store : .pass)
        return m
    }

    func testAResponseStreamsThenEnds() {
        var m = FetchMachine(leading: false)
        XCTAssertEqual(m.state, .requesting)
        XCTAssertTrue(m.takesHead)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: never), ignored(.body, .requesting), "no body before a head")
        XCTAssertEqual(m.head(invalid: nil, clientTakes: true), .stream)
        XCTAssertEqual(m.state, .streaming)
        XCTAssertEqual(m.head(invalid: nil, clientTakes: true), ignored(.head, .streaming), "one head per fetch")
        XCTAssertEqual(m.body(clientCongested: { false }, storeBacklogged: { false }), .take)
        XCTAssertEqual(m.complete(nil), .end)
        XCTAssertEqual(m.state, .done)
        XCTAssertEqual(m.complete(nil), ignored(.complete, .done), "late completion")
        XCTAssertEqual(m.stop(), ignored(.stop, .done))
    }

    func testAnInvalidHeadIsRefusedAndOneAnsweredOtherwiseDropped() {
        var invalid = FetchMachine(leading: false)
        XCTAssertEqual(invalid.head(invalid: "two Content-Length values", clientTakes: false), .refuse("two Content-Length values"))
        XCTAssertEqual(invalid.stop(), .stop)
        var answered = FetchMachine(leading: false)
        XCTAssertEqual(answered.head(invalid: nil, clientTakes: false), .drop, "a 5xx's stand-in, or a 304 refresh")
        XCTAssertEqual(answered.stop(), .stop)
        XCTAssertEqual(answered.body(clientCongested: never, storeBacklogged: never), ignored(.body, .done))
    }

    func testAConnectionFailureOrATimeoutIsRetriedWhileRetryAllowsThenAnswered() {
        var m = FetchMachine(leading: false, method: "GET", hasBody: false, retryLimit: 1)
        XCTAssertEqual(m.complete(unreachable), .retry(markServer: true))
        XCTAssertEqual(m.failedAttempts, 1)
        XCTAssertEqual(m.state, .requesting, "the request goes out again")
        XCTAssertEqual(m.complete(unreachable), .fail(.unreachable, markServer: true), "the retries are spent")
        XCTAssertEqual(m.state, .done)
        XCTAssertEqual(m.complete(nil), ignored(.complete, .done))

        var post = FetchMachine(leading: false, method: "POST", hasBody: true, retryLimit: 3)
        XCTAssertEqual(post.complete(unreachable), .fail(.unreachable, markServer: true), "a body cannot be replayed")
        var late = FetchMachine(leading: false, retryLimit: 1)
        XCTAssertEqual(late.complete(.timedOut("30 s")), .retry(markServer: true), "a head that did not come in time: the next server")
        XCTAssertEqual(late.complete(.timedOut("30 s")), .fail(.timedOut, markServer: true), "the retries are spent")
        var slowPost = FetchMachine(leading: false, method: "POST", hasBody: true, retryLimit: 3)
        XCTAssertEqual(slowPost.complete(.timedOut("30 s")), .fail(.timedOut, markServer: true), "not idempotent, with a body")
        var closed = FetchMachine(leading: false, retryLimit: 3)
        XCTAssertEqual(closed.complete(nil), .fail(.unreachable, markServer: false), "closed before any response")
    }

    func testAFailureAfterTheHeadCutsTheResponse() {
        var m = streaming()
        XCTAssertEqual(m.complete(unreachable), .cut, "no retry, no server marked, once bytes went out")
        XCTAssertEqual(m.state, .done)
    }

    func testASlowClientOrASlowStorePausesUntilCaughtUp() {
        var m = streaming()
        XCTAssertEqual(m.caughtUp(), ignored(.caughtUp, .streaming), "nothing paused")
        XCTAssertEqual(m.body(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertTrue(m.paused)
        XCTAssertEqual(m.caughtUp(), .resume)
        XCTAssertEqual(m.caughtUp(), ignored(.caughtUp, .streaming), "resumed once")
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { true }), .pause,
                       "the store is asked first; the client need not be")
        XCTAssertEqual(m.caughtUp(), .resume)
        XCTAssertEqual(m.body(clientCongested: { false }, storeBacklogged: { false }), .take)
    }

    func testAClientLeavingMidResponseKeepsAStorableFetchGoing() {
        var m = streaming()
        XCTAssertEqual(m.body(clientCongested: { true }, storeBacklogged: { false }), .pause)
        XCTAssertEqual(m.clientGone(), .keepFetching(resume: true), "paused for the client: resumed")
        XCTAssertEqual(m.state, .orphaned)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { false }), .take, "the client is gone: never asked")
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { true }), .pause, "a slow store still pauses")
        XCTAssertEqual(m.caughtUp(), .resume)
        XCTAssertEqual(m.clientGone(), ignored(.clientGone, .orphaned))
        XCTAssertEqual(m.complete(nil), .end)
        XCTAssertEqual(m.state, .done)
    }

    func testAnOrphanThatBreaksOffIsCut() {
        var m = streaming()
        _ = m.clientGone()
        XCTAssertEqual(m.complete(unreachable), .cut, "nothing stored, no retry")
    }

    func testAClientLeavingBeforeTheHeadStopsTheFetch() {
        var m = FetchMachine(leading: false, retryLimit: 3)
        XCTAssertEqual(m.clientGone(), .stop, "nothing to keep fetching for yet")
        XCTAssertFalse(m.takesHead)
        XCTAssertEqual(m.complete(unreachable), ignored(.complete, .done), "no retry for a client that left")
        XCTAssertEqual(m.head(invalid: nil, clientTakes: true), ignored(.head, .done))
        var unstorable = streaming(storing: false)
        XCTAssertEqual(unstorable.clientGone(), .stop, "not stored: nothing to finish it for")
        XCTAssertEqual(unstorable.clientGone(), ignored(.clientGone, .done), "over already")
    }

    func testALeaderPublishesOnceAndReleasesItsClaimOnce() {
        var m = streaming(leading: true)
        XCTAssertTrue(m.mayPublish)
        XCTAssertEqual(m.publish(shared), .publish)
        XCTAssertEqual(m.published, shared)
        XCTAssertFalse(m.mayPublish, "published once")
        XCTAssertEqual(m.publish(shared), ignored(.publish, .streaming))
        XCTAssertEqual(m.clientGone(), .keepFetching(resume: false))
        XCTAssertEqual(m.published, shared, "an orphaned leader still feeds its followers")
        XCTAssertEqual(m.complete(nil), .end)
        XCTAssertEqual(m.endLeadership(), .releaseClaim, "the claim is released")
        XCTAssertEqual(m.endLeadership(), ignored(.endLeadership, .done), "once")
        XCTAssertNil(m.published)
    }

    func testAFetchThatDoesNotLeadNeitherPublishesNorReleases() {
        var m = streaming()
        XCTAssertFalse(m.mayPublish)
        XCTAssertEqual(m.publish(shared), ignored(.publish, .streaming), "only a leader publishes")
        XCTAssertNil(m.published)
        XCTAssertEqual(m.endLeadership(), ignored(.endLeadership, .streaming), "no claim to release")
    }

    /// Whether an orphan is worth finishing is the machine's: the length
    /// said, or what came so far, within finish_store_limit, and a store
    /// that still takes it.
    func testAnOrphanGoesOnOnlyWhileWorthFinishing() {
        XCTAssertEqual(streaming(length: 5000).mayFinishUnattended, false, "a length over the limit")
        var said = streaming(length: 5000)
        XCTAssertEqual(said.clientGone(), .stop)

        var unsaid = streaming(length: nil)
        XCTAssertEqual(unsaid.took(received: 600, storing: true), .take)
        XCTAssertEqual(unsaid.clientGone(), .keepFetching(resume: false))
        XCTAssertEqual(unsaid.took(received: 1000, storing: true), .take, "at the limit")
        XCTAssertEqual(unsaid.took(received: 1001, storing: true), .stop, "past finish_store_limit, with no client")
        XCTAssertEqual(unsaid.state, .done)
        XCTAssertEqual(unsaid.took(received: 1200, storing: true), ignored(.took, .done))
        XCTAssertEqual(unsaid.complete(nil), ignored(.complete, .done))

        var withClient = streaming(length: nil)
        XCTAssertEqual(withClient.took(received: 5000, storing: true), .take, "its client still takes it all")
        XCTAssertEqual(withClient.clientGone(), .stop, "then leaves: too large to finish")

        var givenUp = streaming()
        XCTAssertEqual(givenUp.clientGone(), .keepFetching(resume: false))
        XCTAssertEqual(givenUp.took(received: 10, storing: false), .stop, "the store gave it up: nobody wants the rest")

        var noLimit = FetchMachine(leading: false, finishStoreLimit: 0)
        XCTAssertEqual(noLimit.storeChosen(true, expectedLength: 1), ignored(.storeChosen, .requesting), "before its head")
        _ = noLimit.head(invalid: nil, clientTakes: true)
        XCTAssertEqual(noLimit.storeChosen(true, expectedLength: 1), .store)
        XCTAssertEqual(noLimit.clientGone(), .stop, "finish_store_limit = 0: never without the client")
    }

    func testAFetchWhoseClientHadAStaleCopyGoesOnAloneIntoTheStore() {
        var m = FetchMachine(leading: true, retryLimit: 1, finishStoreLimit: 1000)
        XCTAssertEqual(m.clientAnsweredElsewhere(), .keepFetching(resume: false), "no head yet: it goes on")
        XCTAssertEqual(m.state, .requesting)
        XCTAssertEqual(m.complete(.timedOut("30 s")), .retry(markServer: true), "retried and counted, as with a client")
        XCTAssertEqual(m.head(invalid: nil, clientTakes: true), .stream)
        XCTAssertEqual(m.state, .orphaned, "the response is the store's alone")
        XCTAssertEqual(m.storeChosen(true, expectedLength: 100), .store)
        XCTAssertTrue(m.mayFinishUnattended)
        XCTAssertEqual(m.body(clientCongested: never, storeBacklogged: { false }), .take, "no client to ask")
        XCTAssertEqual(m.took(received: 100, storing: true), .take)
        XCTAssertEqual(m.complete(nil), .end)

        var notStored = FetchMachine(leading: true, finishStoreLimit: 1000)
        _ = notStored.clientAnsweredElsewhere()
        _ = notStored.head(invalid: nil, clientTakes: true)
        XCTAssertEqual(notStored.storeChosen(false, expectedLength: 100), .pass)
        XCTAssertFalse(notStored.mayFinishUnattended, "nothing to finish it for: the driver stops it")

        var failing = FetchMachine(leading: false)
        _ = failing.clientAnsweredElsewhere()
        XCTAssertEqual(failing.complete(.timedOut("30 s")), .fail(.timedOut, markServer: true), "the server is still counted against")

        var streaming = self.streaming()
        XCTAssertEqual(streaming.clientAnsweredElsewhere(), .keepFetching(resume: false), "past the head: as a client that left")
        XCTAssertEqual(streaming.state, .orphaned)
    }
}
