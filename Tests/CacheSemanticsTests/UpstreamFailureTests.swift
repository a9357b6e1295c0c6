import XCTest
@testable import CacheSemantics

/// What a failed upstream gets answered with (RFC 9111 4.2.4 / 5.2.2.2,
/// RFC 5861 section 4), which requests go again, what invalidates.
final class UpstreamFailureTests: XCTestCase {
    private let plain = CacheControl("max-age=60")
    private let mustRevalidate = CacheControl("max-age=60, must-revalidate")

    private func stale(by seconds: Int, response: String, request: String? = nil) -> UpstreamFailure.StaleCandidate {
        UpstreamFailure.StaleCandidate(lifetime: 60, currentAge: 60 + seconds, response: CacheControl(response),
                                       request: CacheControl(request))
    }

    private func answer(_ kind: UpstreamFailure.Kind, fallback: Bool = false, stale: UpstreamFailure.StaleCandidate? = nil,
                        validating: CacheControl? = nil, shared: Bool = true, grace: Int = 0) -> UpstreamFailure.Answer {
        UpstreamFailure.answer(kind, hasFallback: fallback, stale: stale, validating: validating, shared: shared,
                               disconnectedGrace: grace)
    }

    /// Section 4.2.4 "disconnected": an unreachable or silent upstream lets a
    /// stale response stand in within the grace, unless its directives forbid it.
    func testDisconnectedGrace() {
        let hour = 3600
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 10, response: "max-age=60"), grace: hour), .serveDisconnected)
        XCTAssertEqual(answer(.timedOut, stale: stale(by: hour, response: "max-age=60"), grace: hour), .serveDisconnected,
                       "as stale as the grace allows")
        XCTAssertEqual(answer(.unreachable, stale: stale(by: hour + 1, response: "max-age=60"), grace: hour), .gatewayError(502),
                       "past the grace")
        XCTAssertEqual(answer(.timedOut, stale: stale(by: 10, response: "max-age=60"), grace: 0), .gatewayError(504), "grace off")
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 10, response: "max-age=60"), validating: CacheControl("max-age=60"),
                              grace: hour), .serveDisconnected, "while validating it")
        for kind: UpstreamFailure.Kind in [.status(500), .status(503), .invalidResponse] {
            XCTAssertNotEqual(answer(kind, stale: stale(by: 10, response: "max-age=60"), grace: hour), .serveDisconnected,
                              "\(kind): the upstream answered; only stale-if-error covers it")
        }
        for forbidding in ["max-age=60, must-revalidate", "max-age=60, no-cache", "max-age=60, proxy-revalidate",
                           "max-age=60, s-maxage=60"] {
            XCTAssertNotEqual(answer(.unreachable, stale: stale(by: 10, response: forbidding), grace: hour), .serveDisconnected,
                              forbidding)
        }
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 10, response: "max-age=60, s-maxage=60"), shared: false, grace: hour),
                       .serveDisconnected, "s-maxage binds shared caches only")
        XCTAssertEqual(answer(.unreachable, fallback: true, stale: stale(by: 10, response: "max-age=60"), grace: hour),
                       .serveFallback, "the policy's fallback first")
    }

    func testTransportFailuresAre502AndTimeouts504() {
        XCTAssertEqual(answer(.unreachable), .gatewayError(502))
        XCTAssertEqual(answer(.invalidResponse), .gatewayError(502))
        XCTAssertEqual(answer(.timedOut), .gatewayError(504))
    }

    func testUpstreamStatusesGoThroughUnlessSomethingStandsIn() {
        for status in [500, 501, 502, 503, 504, 505] {
            XCTAssertEqual(answer(.status(status)), .passThrough, "\(status)")
        }
        XCTAssertEqual(answer(.status(503), stale: stale(by: 10, response: "max-age=60, stale-if-error=30")), .serveStale)
        XCTAssertEqual(answer(.status(501), stale: stale(by: 10, response: "max-age=60, stale-if-error=30")), .passThrough,
                       "501 is not an error stale-if-error covers")
        XCTAssertEqual(answer(.status(500), fallback: true), .serveFallback)
        XCTAssertEqual(answer(.status(501), fallback: true), .passThrough)
    }

    func testStaleIfErrorWindowFromTheResponseOrTheRequest() {
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 10, response: "max-age=60, stale-if-error=30")), .serveStale)
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 40, response: "max-age=60, stale-if-error=30")), .gatewayError(502),
                       "past the window")
        XCTAssertEqual(answer(.timedOut, stale: stale(by: 40, response: "max-age=60", request: "stale-if-error=60")), .serveStale)
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 1, response: "max-age=60")), .gatewayError(502), "no window at all")
        XCTAssertEqual(answer(.unreachable, stale: stale(by: 1, response: "max-age=60, stale-if-error=30, must-revalidate")),
                       .gatewayError(502), "must-revalidate forbids serving it stale")
    }

    func testMustRevalidateTurnsEveryFailureInto504() {
        for kind: UpstreamFailure.Kind in [.unreachable, .invalidResponse, .timedOut, .status(500), .status(501), .status(503)] {
            XCTAssertEqual(answer(kind, validating: mustRevalidate), .gatewayError(504), "\(kind)")
        }
        let proxyRevalidate = CacheControl("max-age=60, proxy-revalidate")
        XCTAssertEqual(answer(.status(500), validating: proxyRevalidate, shared: true), .gatewayError(504))
        XCTAssertEqual(answer(.status(500), validating: proxyRevalidate, shared: false), .passThrough,
                       "proxy-revalidate binds shared caches only")
        XCTAssertEqual(answer(.unreachable, validating: plain), .gatewayError(502))
        XCTAssertEqual(answer(.status(500), validating: plain), .passThrough)
    }

    func testThePolicyFallbackComesFirst() {
        XCTAssertEqual(answer(.unreachable, fallback: true, validating: mustRevalidate), .serveFallback,
                       "networkElseCache: the client asked for any stored response")
        XCTAssertEqual(answer(.timedOut, fallback: true), .serveFallback)
    }

    func testOnlyIdempotentRequestsWithoutABodyAreRetried() {
        for method in ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"] {
            XCTAssertTrue(Retry.mayRetry(method: method, hasBody: false, failedAttempts: 0, limit: 1), method)
        }
        for method in ["POST", "PATCH", "CONNECT", "PURGE"] {
            XCTAssertFalse(Retry.mayRetry(method: method, hasBody: false, failedAttempts: 0, limit: 1), method)
        }
        XCTAssertFalse(Retry.mayRetry(method: "PUT", hasBody: true, failedAttempts: 0, limit: 1), "a body cannot be replayed")
        XCTAssertFalse(Retry.mayRetry(method: "GET", hasBody: false, failedAttempts: 1, limit: 1), "attempts are bounded")
        XCTAssertFalse(Retry.mayRetry(method: "GET", hasBody: false, failedAttempts: 0, limit: 0))
    }

    func testNonErrorAnswersToUnsafeMethodsInvalidate() {
        for method in ["POST", "PUT", "DELETE", "PATCH"] {
            XCTAssertTrue(Invalidation.invalidates(method: method, status: 200), method)
            XCTAssertTrue(Invalidation.invalidates(method: method, status: 303), method)
            XCTAssertFalse(Invalidation.invalidates(method: method, status: 404), "an error invalidates nothing")
            XCTAssertFalse(Invalidation.invalidates(method: method, status: 500))
        }
        for method in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            XCTAssertFalse(Invalidation.invalidates(method: method, status: 200), method)
        }
    }
}
