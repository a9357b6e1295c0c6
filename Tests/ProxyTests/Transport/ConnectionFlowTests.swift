import EventLoop
import XCTest
@testable import Proxy

/// The HTTP/1.1 connection's decisions, event by event, without a socket:
/// keep-alive, pipelining and its output bound, the client's end of input,
/// lingering close, and what the socket is watched for.
final class ConnectionFlowTests: XCTestCase {
    private typealias Held = ConnectionFlow.Held
    private func flow() -> ConnectionFlow { ConnectionFlow(outputBound: 1000, pipelineBound: 500) }

    func testAKeptAliveConnectionTakesTheNextRequestAndEndsOnlyWhenAsked() {
        var f = flow()
        XCTAssertEqual(f.next(Held(unparsed: 40)), .parse)
        XCTAssertEqual(f.next(Held(unparsed: 40, exchange: true)), .stop, "one request at a time: the next waits in the input")
        XCTAssertFalse(f.answered(keepAlive: true, draining: false, Held(output: 200)))
        XCTAssertEqual(f.next(Held()), .stop, "no input: nothing to take")
        XCTAssertEqual(f.phase, .open)
        XCTAssertTrue(f.answered(keepAlive: false, draining: false, Held(output: 200)), "Connection: close, or HTTP/1.0")
        XCTAssertEqual(f.phase, .closingWhenFlushed)
        XCTAssertEqual(f.next(Held(unparsed: 40)), .stop, "nothing more is answered once ending")
    }

    func testADrainingWorkerEndsEachConnectionAfterItsAnswer() {
        var f = flow()
        XCTAssertTrue(f.answered(keepAlive: true, draining: true, Held()))
        XCTAssertEqual(f.afterWrite(done: true, pending: 0), .finish)
        XCTAssertFalse(f.lingers(draining: true), "draining: closed at once, not lingering")
    }

    func testAClientThatPipelinesAndNeverReadsStopsBeingAnsweredAtTheBound() {
        var f = flow()
        XCTAssertEqual(f.next(Held(output: 999, unparsed: 40)), .parse)
        XCTAssertEqual(f.next(Held(output: 1000, unparsed: 40)), .waitForOutput(paused: true), "the pause is counted")
        XCTAssertEqual(f.next(Held(output: 1200, unparsed: 40)), .waitForOutput(paused: false), "once")
        XCTAssertFalse(f.interest(Held(output: 1200, unparsed: 40)).contains(.read), "its input is not read meanwhile")
        XCTAssertFalse(f.outputTaken(pending: 1000), "still at the bound")
        XCTAssertTrue(f.outputTaken(pending: 999), "below it: requests are taken again")
        XCTAssertFalse(f.outputTaken(pending: 10), "once")
        XCTAssertEqual(f.next(Held(output: 10, unparsed: 40)), .parse)
    }

    func testReadingStopsAtThePipelineBoundAndWhileTheUpstreamIsBehindWithTheBody() {
        let f = flow()
        XCTAssertTrue(f.mayRead(Held(unparsed: 499)))
        XCTAssertFalse(f.mayRead(Held(unparsed: 500)))
        XCTAssertFalse(f.mayRead(Held(body: true, exchange: true, uploadCongested: true)))
        XCTAssertTrue(f.interest(Held(output: 5000, body: true, exchange: true)).contains(.read),
                      "a request body is read even while output waits (the upstream needs it to answer)")
    }

    func testAClientThatClosesItsSideGetsTheAnswerInHandThenTheConnectionCloses() {
        var f = flow()
        f.inputEnded()
        XCTAssertFalse(f.cannotFinish(Held(exchange: true)), "the answer in hand is finished")
        XCTAssertFalse(f.mayRead(Held()))
        XCTAssertFalse(f.interest(Held(output: 10, exchange: true)).contains(.read))
        XCTAssertTrue(f.answered(keepAlive: true, draining: false, Held()), "nothing more can come: it ends")
        XCTAssertFalse(f.lingers(draining: false), "the client sends nothing more: no lingering")
    }

    func testAClientThatClosesMidRequestIsCut() {
        var f = flow()
        f.inputEnded()
        XCTAssertTrue(f.cannotFinish(Held(body: true, exchange: true)), "its body can never complete")
        XCTAssertTrue(f.cannotFinish(Held(unparsed: 10)), "nor its head")
    }

    func testAnAnswerStillBeingWrittenWhenTheClientClosesItsSideIsWrittenWhole() {
        var f = flow()
        XCTAssertFalse(f.answered(keepAlive: true, draining: false, Held(output: 5000)), "kept alive")
        f.inputEnded()
        XCTAssertFalse(f.cannotFinish(Held(output: 5000)), "the answer is not cut")
        XCTAssertTrue(f.endIfInputOver(Held(output: 5000)), "it ends once written")
        XCTAssertEqual(f.afterWrite(done: false, pending: 3000), .none)
        XCTAssertEqual(f.afterWrite(done: true, pending: 0), .finish)
        XCTAssertFalse(f.lingers(draining: false), "then closes: the client sends nothing more")
    }

    func testPipelinedRequestsWaitingForTheClientToReadAreAnsweredAfterItClosesItsSide() {
        var f = flow()
        XCTAssertEqual(f.next(Held(output: 1000, unparsed: 80)), .waitForOutput(paused: true))
        f.inputEnded()
        XCTAssertFalse(f.cannotFinish(Held(output: 1000, unparsed: 80)), "complete requests, not a broken one")
        XCTAssertFalse(f.endIfInputOver(Held(output: 1000, unparsed: 80)), "not ended: they are answered once it reads")
        XCTAssertTrue(f.outputTaken(pending: 10))
        XCTAssertEqual(f.next(Held(output: 10, unparsed: 80)), .parse)
    }

    func testPipelinedRequestsLeftAfterTheClientClosedAreAnsweredFirst() {
        var f = flow()
        f.inputEnded()
        XCTAssertFalse(f.answered(keepAlive: true, draining: false, Held(unparsed: 40)), "the next pipelined request first")
        XCTAssertEqual(f.next(Held(unparsed: 40)), .parse)
        XCTAssertFalse(f.endIfInputOver(Held(exchange: true)), "while it is answered")
        XCTAssertTrue(f.endIfInputOver(Held()), "then the connection ends")
        XCTAssertEqual(f.phase, .closingWhenFlushed)
    }

    func testAnEndedConnectionLingersOnceItsOutputIsWritten() {
        var f = flow()
        f.end()
        XCTAssertEqual(f.afterWrite(done: false, pending: 2000), .none)
        XCTAssertEqual(f.afterWrite(done: true, pending: 0), .finish)
        XCTAssertTrue(f.lingers(draining: false), "the client may still be sending: read and discard before closing")
        XCTAssertEqual(f.interest(Held()), [.read], "lingering reads, only")
        f.close()
        XCTAssertTrue(f.closed)
        XCTAssertFalse(f.mayRead(Held()))
    }

    func testAnExchangeIsToldToGoOnOnceTheClientCatchesUp() {
        let f = flow()
        XCTAssertEqual(f.afterWrite(done: true, pending: 0), .drained)
        XCTAssertEqual(f.afterWrite(done: false, pending: 249), .drained, "under a quarter of the bound")
        XCTAssertEqual(f.afterWrite(done: false, pending: 250), .none)
    }

    func testWritesAreAskedOfEpollOnlyWhenNoneIsDueOtherwise() {
        var f = flow()
        XCTAssertTrue(f.interest(Held(output: 10)).contains(.write))
        XCTAssertFalse(f.interest(Held()).contains(.write), "nothing queued")
        f.flushQueued = true
        XCTAssertFalse(f.interest(Held(output: 10)).contains(.write), "a write is due at the batch's end")
        f.flushQueued = false
        f.waitingForDisk = true
        XCTAssertFalse(f.interest(Held(output: 10)).contains(.write), "the next bytes are being read from the disk")
    }
}
