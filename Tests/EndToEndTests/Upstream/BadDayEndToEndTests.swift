import Foundation
import XCTest

/// Issue 61's point 2: on a slow or dead upstream, a stale copy that may
/// stand in for it is served at once (stale_timeout, a pool that is down),
/// and `grace` serves a stale copy while one background revalidation runs.
/// The origin holds requests (`hold_after`) until the test releases them:
/// a client answered while its request is still held did not wait for it.
final class BadDayEndToEndTests: ConfiguredTestCase {
    private func start(_ config: String) throws -> (Origin, LarderProcess) {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--config", try writeConfig(config)], environment: LarderProcess.testClock)
        return (origin, larder)
    }

    private func originHeaders(_ origin: Origin, _ target: String) throws -> [String: String] {
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        return Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
    }

    private func isCacheOnlyHit(_ target: String, on larder: LarderProcess, originCount: Int) throws -> Bool {
        let c = try larder.client()
        for _ in 0..<250 {
            let r = try c.get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            if r.header("x-origin-count") == String(originCount) { return true }
            usleep(20_000)
        }
        return false
    }

    func testAHangingUpstreamGetsTheStaleCopyAtOnceAndItsLateAnswerIsStored() throws {
        let (origin, larder) = try start("stale_timeout = \"1s\"\nupstream_timeout = \"60s\"\n")
        let target = "/bad/slow?cc=max-age=5&hold_after=1&size=40"
        let c = try larder.client()
        let first = try c.get(target)
        XCTAssertEqual(first.header("x-origin-count"), "1")
        try larder.advanceClock(10)
        let stale = try c.get(target)
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.body, first.body)
        XCTAssertEqual(stale.header("x-origin-count"), "1", "the stored copy")
        let status = stale.header("cache-status") ?? ""
        XCTAssertTrue(status.hasPrefix("larder; hit; ttl=-") && status.hasSuffix("; detail=upstream-slow"), status)
        XCTAssertEqual(try origin.held(target), 1, "the upstream still holds the request: the client did not wait for it")
        // The fetch goes on without the client: its answer is stored.
        try origin.release(target)
        XCTAssertTrue(try isCacheOnlyHit(target, on: larder, originCount: 2), "the late answer replaced the stale copy")
        XCTAssertEqual(try origin.count(target), 2)
        // Without a stored copy there is nothing to stand in: the request waits for the upstream.
        let fresh = "/bad/slow-miss?hold_after=0"
        let waiting = try larder.client()
        try waiting.send("GET \(fresh) HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(try origin.waitForHeld(fresh, 1), 1)
        try origin.release(fresh)
        XCTAssertEqual(try waiting.readResponse().status, 200, "answered by the upstream once it answered")
    }

    func testCollapsedRequestsNeverWaitLongerThanTheOneTheyFollow() throws {
        let (origin, larder) = try start("stale_timeout = \"1s\"\nupstream_timeout = \"60s\"\n")
        let target = "/bad/many?cc=max-age=5&hold_after=1&size=64"
        let stored = try larder.client().get(target)
        try larder.advanceClock(10)
        let responses = UnsafeSendableBox(Array<HTTPResponse?>(repeating: nil, count: 6))
        let group = DispatchGroup()
        for i in 0..<6 {
            group.enter()
            Thread {
                let r = try? HTTPClient(port: larder.port).get(target)
                responses.lock.withLock { responses.value[i] = r }
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        let answers = responses.lock.withLock { responses.value }
        for (i, answer) in answers.enumerated() {
            XCTAssertEqual(answer?.body, stored.body, "request \(i)")
            XCTAssertTrue(answer?.header("cache-status")?.hasSuffix("detail=upstream-slow") ?? false, "request \(i)")
        }
        XCTAssertEqual(try origin.held(target), 1, "one fetch went upstream, still held: none waited for it")
        XCTAssertEqual(try origin.count(target), 2)
        try origin.release(target)
        XCTAssertTrue(try isCacheOnlyHit(target, on: larder, originCount: 2))
    }

    func testWhileEveryServerOfThePoolIsDownAStaleCopyIsServedWithoutAsking() throws {
        let origin = try startOrigin()
        let config = """
        upstream = "api"
        [upstreams.api]
        servers = ["\(origin.url)"]
        fail_timeout = "1h"
        """
        let larder = try startLarder(upstream: origin.url, ["--config", try writeConfig(config)], environment: LarderProcess.testClock)
        let c = try larder.client()
        let target = "/bad/down?cc=max-age=5&drop_after=1&size=30"
        let stored = try c.get(target)
        try larder.advanceClock(10)
        let failed = try c.get(target)
        XCTAssertEqual(failed.body, stored.body)
        XCTAssertTrue(failed.header("cache-status")?.hasSuffix("detail=upstream-unreachable") ?? false)
        let asked = try origin.count(target)
        XCTAssertGreaterThan(asked, 1, "the upstream was asked, and failed")
        let meanwhile = try c.get(target)
        XCTAssertEqual(meanwhile.body, stored.body)
        XCTAssertTrue(meanwhile.header("cache-status")?.hasSuffix("detail=upstream-unreachable") ?? false)
        XCTAssertEqual(try origin.count(target), asked, "the server is marked failed: not asked again")
        // With nothing stored to stand in, a request still tries the server.
        XCTAssertEqual(try c.get("/bad/down-miss?drop_after=0").status, 502)
        XCTAssertEqual(try origin.count("/bad/down-miss?drop_after=0"), 3, "tried (and retried) though marked failed")
    }

    func testGraceServesTheStaleCopyAtOnceWhileOneRevalidationRuns() throws {
        let (origin, larder) = try start("grace = \"1m\"\n[[route]]\nprefix = \"/nograce/\"\ngrace = \"0s\"\n")
        let target = "/bad/grace?cc=max-age=5&etag=g1&hold_after=1&size=50"
        let c = try larder.client()
        let first = try c.get(target)
        try larder.advanceClock(10)
        let graced = try c.get(target)
        XCTAssertEqual(graced.body, first.body)
        let status = graced.header("cache-status") ?? ""
        XCTAssertTrue(status.hasPrefix("larder; hit; ttl=-") && status.hasSuffix("; detail=grace"), status)
        XCTAssertEqual(try origin.waitForHeld(target, 1), 1, "one revalidation in the background")
        XCTAssertEqual(try c.get(target).header("cache-status").map { $0.hasSuffix("detail=grace") }, true, "served again meanwhile")
        XCTAssertEqual(try origin.held(target), 1, "still one revalidation")
        try origin.release(target)
        // The 304 refreshed the stored copy (its X-Validated joins the stored fields).
        var refreshed = false
        for _ in 0..<250 where !refreshed {
            refreshed = try c.get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"]).header("x-validated") == "2"
            if !refreshed { usleep(20_000) }
        }
        XCTAssertTrue(refreshed, "revalidated")
        XCTAssertEqual(try origin.count(target), 2, "one revalidation for both")
        XCTAssertEqual(try originHeaders(origin, target)["if-none-match"], "\"g1\"", "conditional")
        // Past the grace (and where it is off, or the response forbids it): validated before answering.
        // (A new connection after each move of the clock: an idle one may have timed out.)
        try larder.advanceClock(120)
        XCTAssertTrue(try larder.client().get(target).header("cache-status")?.contains("fwd=stale") ?? false, "past the grace")
        for (other, why) in [("/nograce/x?cc=max-age=5&size=5", "grace = 0s"), ("/bad/grace-mr?cc=max-age=5,must-revalidate", "must-revalidate")] {
            _ = try larder.client().get(other)
            try larder.advanceClock(10)
            XCTAssertTrue(try larder.client().get(other).header("cache-status")?.contains("fwd=stale") ?? false, why)
        }
    }
}

/// A value threads share behind a lock (test results gathered from threads).
final class UnsafeSendableBox<Value>: @unchecked Sendable {
    let lock = NSLock()
    var value: Value
    init(_ value: Value) { self.value = value }
}
