import CacheSemantics
import CacheStorage
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
        send(.fleetUnavailable) { $0.fleetUnavailable() }
        send(.joined) { $0.joined(.leading) }
        send(.leaderDone) { $0.leaderDone(.lookUpAgain) }
        send(.claimed) { $0.claimed(true) }
        send(.served) { $0.served(.served) }
        send(.upstreamHead) { $0.upstreamHead(response(200), now: now) }
        send(.upstreamFailed) { $0.upstreamFailed(.unreachable, detail: "late", now: now) }
        send(.refreshed) { $0.refreshed(nil, now: now) }
        send(.nextTurn) { $0.nextTurn() }
        return out
    }

    func testEveryEventAfterTheAnswerIsIgnoredAndSaysSo() {
        var m = machine()
        XCTAssertEqual(m.start(), .lookUp(forgetting: false))
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
        XCTAssertEqual(m.start(), .lookUp(forgetting: false))
        for (event, action) in everyEvent(&m, skipping: [.lookedUp]) {
            XCTAssertEqual(action, .ignored(.init(event: event, state: .lookingUp)), "\(event)")
        }
        XCTAssertEqual(m.state, .lookingUp, "nothing changed")
        XCTAssertEqual(m.lookedUp(found(miss), in: Variants()), .collapse(count: .miss), "the lookup's answer still counts")
    }
}
