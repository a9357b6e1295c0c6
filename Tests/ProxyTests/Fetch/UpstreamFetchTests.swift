import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import HTTPHeaders
import Logging
import Telemetry
import TestSupport
import Upstream
import XCTest
@testable import Proxy

/// One fetch driven event by event against a real worker and store, with
/// a stand-in upstream and client (no sockets): orderings that sockets
/// make hard to force, such as a purge between the head and the body.
final class UpstreamFetchTests: XCTestCase {
    private var worker: Worker!
    private var store: TieredStore!
    private var upstream: StandInUpstream!
    private let key = "/a"
    /// The fetch holds its client unowned (the exchange outlives its hold).
    private var clients: [StandInClient] = []

    override func setUpWithError() throws {
        try makeWorker()
    }

    private func makeWorker(_ adjust: (inout ProxyConfiguration) -> Void = { _ in }) throws {
        var configuration = ProxyConfiguration(upstreamBase: "http://127.0.0.1:1")
        adjust(&configuration)
        store = TieredStore(tiers: [MemoryTier(limitBytes: 1 << 20)])
        let upstream = StandInUpstream()
        self.upstream = upstream
        var logger = Logger(label: "test")
        logger.logLevel = .critical
        worker = try Worker(listener: -1, configuration: configuration, store: store, collapser: Collapser(), stats: ProxyStats(),
                            logger: logger, accessLog: nil) { _, _ in upstream }
    }

    override func tearDown() {
        (worker, store, upstream, clients) = (nil, nil, nil, [])
    }

    private func request(_ method: String = "GET", _ lines: String = "") throws -> RequestHead {
        var parser = RequestParser()
        let text = "\(method) \(key) HTTP/1.1\r\nHost: x\r\n\(lines)\r\n"
        guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
            throw TestFailure("the request did not parse: \(text)")
        }
        return head
    }

    /// A fetch for a stand-in client, started.
    private func startFetch(leading: Bool = false) throws -> (UpstreamFetch, StandInClient) {
        try startFetch(for: request(), leading: leading)
    }

    private func startFetch(for request: RequestHead, leading: Bool = false) throws -> (UpstreamFetch, StandInClient) {
        let client = StandInClient(request: request, key: key)
        clients.append(client)
        let fetch = UpstreamFetch(fields: [:], for: client, upstream: worker.upstream, leading: leading)
        fetch.start()
        return (fetch, client)
    }

    private func body(_ fetch: UpstreamFetch, _ text: String) -> Bool {
        Array(text.utf8).withUnsafeBytes { fetch.upstreamDidReceiveBody($0) }
    }

    private var storedCount: Int { store.lookup(key).count }

    /// Runs what was queued to the worker's loop (bounded).
    private func runQueued() {
        for _ in 0..<3 { worker.loop.runOnce(maxWaitMilliseconds: 0) }
    }

    func testAStorableResponseGoesToTheClientAndIntoTheStore() throws {
        let (fetch, client) = try startFetch()
        XCTAssertEqual(upstream.requests.map(\.url), ["http://127.0.0.1:1/a"], "a GET goes at once")
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        XCTAssertEqual(client.events, ["head 200 stored"])
        XCTAssertTrue(body(fetch, "hel"))
        XCTAssertTrue(body(fetch, "lo"))
        XCTAssertEqual(storedCount, 1, "stored as soon as the body is known whole")
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(client.events, ["head 200 stored", "body 3", "body 2", "ended whole"])
        XCTAssertEqual(String(decoding: store.lookup(key)[0].body, as: UTF8.self), "hello")
    }

    func testAPurgeBetweenTheHeadAndTheBodyKeepsTheResponseOutOfTheStore() throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        XCTAssertEqual(store.purge(.key(key), soft: false), 0, "nothing stored yet")
        XCTAssertTrue(body(fetch, "hello"))
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(storedCount, 0, "the purge came after the request went out: what it answered is not stored")
        XCTAssertEqual(client.events.last, "ended whole", "the client still gets the whole response")
    }

    func testAPurgeOfAnotherKeyDoesNotKeepTheResponseOut() throws {
        let (fetch, _) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        _ = store.purge(.key("/b"), soft: false)
        XCTAssertTrue(body(fetch, "hello"))
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(storedCount, 1)
    }

    func testAClientLeavingMidBodyLetsAStorableResponseFinishIntoTheStore() throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        XCTAssertTrue(body(fetch, "he"))
        fetch.clientLeft()
        XCTAssertFalse(upstream.started[0].cancelled, "worth finishing: it goes on without the client")
        XCTAssertTrue(body(fetch, "llo"))
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(client.events, ["head 200 stored", "body 2"], "nothing reaches a client that left")
        XCTAssertEqual(storedCount, 1)
    }

    func testAClientLeavingAnUnstorableResponseStopsTheTransfer() throws {
        let (fetch, _) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "no-store", "content-length": "5"])
        fetch.clientLeft()
        XCTAssertTrue(upstream.started[0].cancelled)
        XCTAssertEqual(storedCount, 0)
    }

    func testAResponseCutShortIsNotStoredAndCutsTheClient() throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "10"])
        XCTAssertTrue(body(fetch, "hello"))
        fetch.upstreamDidComplete(.unreachable("reset"))
        XCTAssertEqual(client.events.last, "cut")
        XCTAssertEqual(storedCount, 0, "incomplete: never stored (RFC 9111 section 3.3)")
    }

    /// `error` before any response: asked again on a later turn, the
    /// client told nothing, until upstream_retries (2) is spent.
    private func checkRetriedThenFailed(_ error: UpstreamError, answered: String) throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidComplete(error)
        XCTAssertEqual(upstream.started.count, 1, "not from inside the failed transfer's callback")
        runQueued()
        XCTAssertEqual(upstream.started.count, 2)
        XCTAssertEqual(client.events, [], "the client hears nothing of a retried failure")
        for _ in 0..<2 {
            fetch.upstreamDidComplete(error)
            runQueued()
        }
        XCTAssertEqual(upstream.started.count, 3, "upstream_retries (2) bounds the attempts")
        XCTAssertEqual(client.events, [answered])
    }

    func testAConnectionFailureBeforeAnyResponseIsRetriedOnALaterTurn() throws {
        try checkRetriedThenFailed(.unreachable("refused"), answered: "failed unreachable")
    }

    /// A head that did not come within upstream_timeout goes to the next
    /// server as a connection failure does, within upstream_retries.
    func testATimeoutBeforeTheHeadIsRetriedLikeAConnectionFailure() throws {
        try checkRetriedThenFailed(.timedOut("no response"), answered: "failed timedOut")
    }

    func testAnInvalidResponseFailsTheFetchAndStopsTheTransfer() throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["content-length": "5, 6"])
        XCTAssertEqual(client.events, ["failed invalidResponse"])
        XCTAssertTrue(upstream.started[0].cancelled)
    }

    func testAClientThatAnswersOtherwiseStopsTheFetchAndLetsGoOfTheKey() throws {
        XCTAssertEqual(lead(), .leader)
        let (fetch, client) = try startFetch(leading: true)
        client.takesHead = false  // a 5xx answered with a stale response
        fetch.upstreamDidReceiveHead(status: 503, reason: nil, headers: ["content-length": "0"])
        XCTAssertTrue(upstream.started[0].cancelled)
        XCTAssertEqual(client.events, [])
        XCTAssertEqual(lead(), .leader, "the claim on the key was released")
    }

    func testASlowClientPausesTheTransferUntilItCatchesUp() throws {
        let (fetch, client) = try startFetch()
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "no-store", "content-length": "10"])
        fetch.resume()
        XCTAssertEqual(upstream.started[0].resumes, 0, "not paused: nothing to resume")
        client.congested = true
        XCTAssertFalse(body(fetch, "hello"), "refused: the transfer pauses")
        client.congested = false
        fetch.resume()  // the client's output drained
        XCTAssertEqual(upstream.started[0].resumes, 1)
        XCTAssertTrue(body(fetch, "hello"), "the same bytes again")
        XCTAssertEqual(client.events, ["head 200", "body 5"])
    }

    func testALeadingFetchStreamsItsResponseToAWaitingRequest() throws {
        XCTAssertEqual(lead(), .leader)
        let (fetch, _) = try startFetch(leading: true)
        var woken: [SharedFetch?] = []
        XCTAssertEqual(lead { woken.append($0) }, .waiting)
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        runQueued()
        let shared = try XCTUnwrap(woken.first ?? nil, "published to the waiter once known storable")
        XCTAssertEqual(shared.head.status, 200)
        XCTAssertTrue(body(fetch, "hello"))
        let (chunks, state) = shared.read(ObjectIdentifier(self), from: 0)
        XCTAssertEqual(chunks.map { $0.count }, [5])
        XCTAssertEqual(state, .complete)
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(lead(), .leader, "over: the next request leads again")
    }

    func testALeaderWhoseClientLeftGoesOnForItsFollowers() throws {
        try makeWorker { $0.finishStoreLimitBytes = 0 }  // only followers make it worth finishing
        XCTAssertEqual(lead(), .leader)
        let (fetch, _) = try startFetch(leading: true)
        var woken: [SharedFetch?] = []
        _ = lead { woken.append($0) }
        fetch.upstreamDidReceiveHead(status: 200, reason: "OK", headers: ["cache-control": "max-age=60", "content-length": "5"])
        runQueued()
        let shared = try XCTUnwrap(woken.first ?? nil)
        shared.follow(ObjectIdentifier(self), loop: worker.loop) {}
        fetch.clientLeft()
        XCTAssertFalse(upstream.started[0].cancelled)
        XCTAssertTrue(body(fetch, "hello"))
        fetch.upstreamDidComplete(nil)
        XCTAssertEqual(shared.read(ObjectIdentifier(self), from: 0).state, .complete)
        shared.unfollow(ObjectIdentifier(self))
    }

    func testASmallRequestBodyIsHeldUntilCompleteThenSentWhole() throws {
        let (fetch, _) = try startFetch(for: request("POST", "Content-Length: 5\r\n"))
        XCTAssertEqual(upstream.started.count, 0, "no upstream request while the body is coming")
        Array("hel".utf8).withUnsafeBytes { fetch.requestBody($0) }
        XCTAssertEqual(upstream.started.count, 0)
        Array("lo".utf8).withUnsafeBytes { fetch.requestBody($0) }
        fetch.requestBodyEnd()
        XCTAssertEqual(upstream.requests.map(\.body), [.streamed(length: 5)])
        XCTAssertEqual(upstream.started.first?.supplied, Array("hello".utf8))
        XCTAssertEqual(upstream.started.first?.bodyFinished, true)
    }

    func testARequestBodyLargerThanTheBufferStreamsAsItComes() throws {
        try makeWorker { $0.requestBufferBytes = 4 }
        let (fetch, client) = try startFetch(for: request("POST", "Transfer-Encoding: chunked\r\n"))
        Array("hel".utf8).withUnsafeBytes { fetch.requestBody($0) }
        XCTAssertEqual(upstream.started.count, 0)
        Array("lo".utf8).withUnsafeBytes { fetch.requestBody($0) }
        XCTAssertEqual(upstream.requests.map(\.body), [.streamed(length: nil)], "outgrew the buffer: sent at once, streaming")
        XCTAssertEqual(upstream.started[0].supplied, Array("hello".utf8))
        Array("!".utf8).withUnsafeBytes { fetch.requestBody($0) }
        fetch.requestBodyEnd()
        XCTAssertEqual(upstream.started[0].supplied, Array("hello!".utf8))
        XCTAssertTrue(upstream.started[0].bodyFinished)
        upstream.started[0].onBodyDrained?()
        XCTAssertEqual(client.events, ["body drained"], "the client is told to send more")
    }

    func testAClientLeavingWhileItsBodyIsHeldSendsNothing() throws {
        let (fetch, _) = try startFetch(for: request("POST", "Content-Length: 5\r\n"))
        Array("hel".utf8).withUnsafeBytes { fetch.requestBody($0) }
        fetch.clientLeft()
        Array("lo".utf8).withUnsafeBytes { fetch.requestBody($0) }  // late pieces, had they come
        fetch.requestBodyEnd()
        XCTAssertEqual(upstream.started.count, 0, "nothing to finish without the client: stopped")
    }

    func testAFetchStoppedWhileItsBodyIsHeldSendsNothingWhenTheBodyEnds() throws {
        let (fetch, _) = try startFetch(for: request("POST", "Content-Length: 5\r\n"))
        Array("hello".utf8).withUnsafeBytes { fetch.requestBody($0) }
        fetch.cancel()
        fetch.requestBodyEnd()
        XCTAssertEqual(upstream.started.count, 0)
    }

    /// The role a new request for the key gets.
    private func lead(wake: @escaping (SharedFetch?) -> Void = { _ in }) -> Role {
        switch worker.cache.lock.local.lead(key, loop: worker.loop, wake: wake) {
        case .leader: return .leader
        case .waiting: return .waiting
        case .following: return .following
        }
    }

    private enum Role { case leader, waiting, following }
}

/// The upstream as a list of transfers started, each steered by hand.
