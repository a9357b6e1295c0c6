import HTTPHeaders
import XCTest
import CacheSemantics
import CacheStorage
@testable import Proxy

/// What answers in the upstream's place when it fails before a response.
final class StandInsTests: XCTestCase {
    private func entry(_ cacheControl: String, body: String = "stored") -> CachedResponse {
        let builder = StoredResponseBuilder(shared: true, targetedField: "x")
        return Array(body.utf8).withUnsafeBytes {
            builder.build(key: "/r", status: 200, reason: nil, headers: ["cache-control": cacheControl], body: $0,
                          timing: ResponseTiming(requestTime: 100, responseTime: 100, dateValue: 100, ageValue: 0), tags: [],
                          varyFrom: { _ in nil })
        }
    }

    private func served(_ answer: StandIns.Answer) -> CachedResponse? {
        if case .serve(let entry, _) = answer { return entry }
        return nil
    }

    private func gatewayError(_ answer: StandIns.Answer) -> (Int, String)? {
        if case .gatewayError(let status, let message) = answer { return (status, message) }
        return nil
    }

    func testTheFallbackThenTheStaleResponseThenAnError() {
        let fallback = entry("max-age=1", body: "fallback")
        let stale = entry("max-age=1, stale-if-error=100", body: "stale")
        var standIns = StandIns(fallback: fallback, stale: stale)
        let now: Int64 = 110  // 9 seconds stale
        XCTAssertEqual(served(standIns.answer(.unreachable, detail: "down", validating: nil, now: now, shared: true))?.bodyLength,
                       fallback.bodyLength)
        XCTAssertEqual(served(standIns.answer(.unreachable, detail: "down", validating: nil, now: now, shared: true))?.bodyLength,
                       stale.bodyLength, "the fallback's body was gone: the stale response is next")
        XCTAssertEqual(gatewayError(standIns.answer(.unreachable, detail: "down", validating: nil, now: now, shared: true))?.0, 502)
    }

    func testAStaleResponseBeyondStaleIfErrorIsNotServed() {
        var standIns = StandIns(stale: entry("max-age=1, stale-if-error=5"))
        let answer = standIns.answer(.timedOut, detail: "no answer within 30000 ms", validating: nil, now: 200, shared: true)
        XCTAssertEqual(gatewayError(answer)?.0, 504)
        XCTAssertEqual(gatewayError(answer)?.1, "no answer within 30000 ms")
    }

    func testTheRequestsStaleIfErrorCounts() {
        var standIns = StandIns(stale: entry("max-age=1"), requestStaleIfError: CacheControl("stale-if-error=60").staleIfError)
        XCTAssertNotNil(served(standIns.answer(.status(503), detail: "upstream answered 503", validating: nil, now: 120, shared: true)))
    }

    func testAMustRevalidateResponseThatFailsToRevalidateIs504() {
        var standIns = StandIns()
        let validating = CacheControl("max-age=1, must-revalidate")
        let answer = standIns.answer(.unreachable, detail: "down", validating: validating, now: 120, shared: true)
        XCTAssertEqual(gatewayError(answer)?.0, 504)
        XCTAssertEqual(gatewayError(answer)?.1, "upstream failed to revalidate a must-revalidate response: down")
        XCTAssertEqual(gatewayError(standIns.answer(.status(501), detail: "upstream answered 501", validating: validating,
                                                    now: 120, shared: true))?.0, 504, "never passed off as its revalidation")
    }

    func testWithinTheGraceAnUnreachableUpstreamGetsTheStaleResponseSaidSo() {
        var standIns = StandIns(stale: entry("max-age=1", body: "stale"), disconnectedGrace: 60)
        guard case .serve(_, let detail) = standIns.answer(.unreachable, detail: "refused", validating: nil, now: 150,
                                                           shared: true) else { return XCTFail("the stale response stands in") }
        XCTAssertEqual(detail, "upstream-unreachable")
        var beyond = StandIns(stale: entry("max-age=1"), disconnectedGrace: 60)
        XCTAssertEqual(gatewayError(beyond.answer(.timedOut, detail: "slow", validating: nil, now: 170, shared: true))?.0, 504,
                       "69 seconds stale: past the grace")
    }

    func testAnErrorStatusWithNothingToStandInGoesThrough() {
        var standIns = StandIns()
        guard case .passThrough = standIns.answer(.status(503), detail: "upstream answered 503", validating: nil, now: 120,
                                                  shared: true) else { return XCTFail("a 503 with no stand-in is the answer") }
    }
}
