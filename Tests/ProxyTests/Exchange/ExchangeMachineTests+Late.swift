import CacheSemantics
import CacheStorage
import HTTP1
import TestSupport
import XCTest
@testable import Proxy

/// Events that come when the machine is past them: each is answered
/// `.ignored`, naming the event and the state it found, and changes nothing.
extension ExchangeMachineTests {
    /// Each event but those `skipping`, in turn, and what it returned.
    private func everyEvent(_ m: inout ExchangeMachine, skipping: [ExchangeEvent] = []) -> [(ExchangeEvent, ExchangeAction)] {
        var out: [(ExchangeEvent, ExchangeAction)] = []
        func send(_ event: ExchangeEvent, _ action: (inout ExchangeMachine) -> ExchangeAction) {
            if !skipping.contains(event) { out.append((event, action(&m))) }
        }
        send(.lookedUp) { $0.lookedUp(found(miss), in: Variants()) }
        send(.joined) { $0.joined(.leading) }
        send(.leaderDone) { $0.leaderDone(.lookUpAgain) }
        send(.served) { $0.served(.served) }
        send(.upstreamHead) { $0.upstreamHead(response(200), now: now) }
        send(.upstreamFailed) { $0.upstreamFailed(.unreachable, detail: "late", now: now) }
        send(.refreshed) { $0.refreshed(nil, now: now) }
        send(.nextTurn) { $0.nextTurn() }
        send(.interim) { $0.interim() }
        send(.upstreamSlow) { $0.standInAtOnce(.slow, now: now) }
        return out
    }

    func testEveryEventAfterTheAnswerIsIgnoredAndSaysSo() {
        var m = machine()
        XCTAssertEqual(m.start(), .lookUp(.local))
        let stored = entry("max-age=60")
        guard case .serve = m.lookedUp(found(.fresh(index: 0, age: 5, ttl: 55)), in: Variants([stored])) else { return XCTFail() }
        XCTAssertEqual(m.served(.served), .none, "served: nothing more to do")
        for (event, action) in everyEvent(&m) {
            XCTAssertEqual(action, .ignored(.init(event: event, state: .done)), "\(event)")
        }
        XCTAssertEqual(m.state, .done)
    }

    func testEventsOfLaterStatesAreIgnoredWhileLookingUpAndTheLookupGoesOn() {
        var m = machine()
        XCTAssertEqual(m.start(), .lookUp(.local))
        for (event, action) in everyEvent(&m, skipping: [.lookedUp]) {
            XCTAssertEqual(action, .ignored(.init(event: event, state: .lookingUp)), "\(event)")
        }
        XCTAssertEqual(m.state, .lookingUp, "nothing changed")
        XCTAssertEqual(m.lookedUp(found(miss), in: Variants()), .collapse(count: .miss), "the lookup's answer still counts")
    }

    /// The decisions about the upstream's head the machine makes: a 200
    /// the client's conditional already has is a 304; a HEAD fetched as a
    /// GET ends at its head (stored only when the fetch may finish without
    /// the client); interim responses pass only while forwarding.
    func testTheUpstreamHeadsAnswerIsDecidedByTheMachine() throws {
        func forwardingMachine(_ method: String = "GET") -> ExchangeMachine {
            var m = machine(method: method)
            XCTAssertEqual(m.start(), .lookUp(.local))
            _ = m.lookedUp(found(miss), in: Variants())
            _ = m.joined(.leading)
            return m
        }
        func request(_ text: String) throws -> RequestHead {
            var parser = RequestParser()
            guard case .complete(let head, _) = Array(text.utf8).withUnsafeBytes({ parser.parse($0) }) else {
                throw TestFailure("the request did not parse")
            }
            return head
        }
        var m = forwardingMachine()
        XCTAssertEqual(m.interim(), .passInterim)
        let conditional = try request("GET /r HTTP/1.1\r\nHost: a\r\nIf-None-Match: \"v1\"\r\n\r\n")
        XCTAssertEqual(m.upstreamHead(response(200, ["etag": "\"v1\""]), now: now), .takeHead)
        let head = m.headSent(response(200, ["etag": "\"v1\""]), stored: true, client: conditional)
        XCTAssertTrue(head.notModified, "the client has it: a 304")
        XCTAssertFalse(head.endsAtHead)
        XCTAssertEqual(m.interim(), .ignored(.init(event: .interim, state: .streaming)), "the answer went out")

        var other = forwardingMachine()
        _ = other.upstreamHead(response(200, ["etag": "\"v2\""]), now: now)
        XCTAssertFalse(other.headSent(response(200, ["etag": "\"v2\""]), stored: true, client: conditional).notModified)

        var head1 = forwardingMachine("HEAD")
        let asked = try request("HEAD /r HTTP/1.1\r\nHost: a\r\n\r\n")
        _ = head1.upstreamHead(response(200), now: now)
        let atHead = head1.headSent(response(200), stored: true, client: asked, mayFinishWithoutClient: false)
        XCTAssertTrue(atHead.endsAtHead, "a HEAD that missed was fetched as a GET: its head is the answer")
        XCTAssertEqual(atHead.cacheStatus, "larder; fwd=uri-miss", "not stored: the fetch will not finish without the client")
        var head2 = forwardingMachine("HEAD")
        _ = head2.upstreamHead(response(200), now: now)
        XCTAssertEqual(head2.headSent(response(200), stored: true, client: asked, mayFinishWithoutClient: true).cacheStatus,
                       "larder; fwd=uri-miss; stored")
    }
}
