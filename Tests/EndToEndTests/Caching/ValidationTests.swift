import Foundation
import XCTest

/// RFC 9111 validation end to end: conditional requests upstream, 304
/// merging, client conditionals answered from the cache.
final class ValidationEndToEndTests: ProxyTestCase {

    func testStaleResponseIsRevalidatedAnd304RefreshesIt() throws {
        let target = "/val?etag=v1&cc=max-age=0&size=64"
        let c = try larder.client()
        let first = try c.get(target)
        XCTAssertEqual(first.header("cache-status"), "larder; fwd=uri-miss; stored")
        let second = try c.get(target)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(second.header("cache-status"), "larder; fwd=stale; fwd-status=304; stored")
        XCTAssertEqual(second.header("x-validated"), "2", "headers of the 304 update the stored response")
        XCTAssertEqual(try originHeaders(target)["if-none-match"], "\"v1\"")
        XCTAssertEqual(try origin.count(target), 2)
    }

    func testLastModifiedIsUsedForValidation() throws {
        let target = "/lmval?lm=3600&cc=no-cache&size=10"
        let c = try larder.client()
        _ = try c.get(target)
        let second = try c.get(target)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.body.count, 10)
        XCTAssertNotNil(try originHeaders(target)["if-modified-since"])
        XCTAssertTrue(second.header("cache-status")?.contains("fwd-status=304") ?? false)
    }

    func testClientConditionalIsAnsweredFromTheCache() throws {
        let target = "/cond?etag=e1&size=20"
        let c = try larder.client()
        _ = try c.get(target)
        let notModified = try c.get(target, headers: ["If-None-Match: \"other\", \"e1\""])
        XCTAssertEqual(notModified.status, 304)
        XCTAssertEqual(notModified.header("etag"), "\"e1\"")
        XCTAssertTrue(notModified.body.isEmpty)
        let full = try c.get(target, headers: ["If-None-Match: \"other\""])
        XCTAssertEqual(full.status, 200)
        XCTAssertEqual(full.body.count, 20)
        XCTAssertEqual(try origin.count(target), 1)
    }

    func testIfModifiedSinceWithoutLastModifiedComparesTheStoredDate() throws {
        // No Last-Modified: the stored Date stands in (RFC 9111 section 4.3.2).
        let target = "/ims-no-lm?size=10"
        let c = try larder.client()
        let stored = try c.get(target)
        let date = try XCTUnwrap(stored.header("date"))
        XCTAssertEqual(try c.get(target, headers: ["If-Modified-Since: \(date)"]).status, 304, "not modified since its Date")
        XCTAssertEqual(try c.get(target, headers: ["If-Modified-Since: Sat, 01 Jan 2000 00:00:00 GMT"]).status, 200,
                       "a Date after the condition: it may have changed since")
        XCTAssertEqual(try origin.count(target), 1)
    }

    func testAnExpiresWithItsMonthOrZoneInAnotherCaseIsAValidDate() throws {
        // RFC 9110 section 5.6.7: robust parsing; read as invalid it would mean "already expired".
        let c = try larder.client()
        for (n, expires) in ["Thu, 01 jan 2099 00:00:00 GMT", "Thu, 01 JAN 2099 00:00:00 gmt", "thursday, 01-jan-60 00:00:00 Gmt"]
            .enumerated() {
            let target = "/expires-case/\(n)?cc=none&extra=Expires:" + expires.replacingOccurrences(of: " ", with: "%20")
            _ = try c.get(target)
            let again = try c.get(target)
            XCTAssertTrue(again.header("cache-status")?.contains("hit") == true, "\(expires): \(again.header("cache-status") ?? "")")
            XCTAssertEqual(try origin.count(target), 1, expires)
        }
    }

    func testConditionalMissFetchesFullResponseToStore() throws {
        let target = "/cond2?etag=e2&size=30"
        let c = try larder.client()
        let r = try c.get(target, headers: ["If-None-Match: \"e2\""])
        XCTAssertEqual(r.status, 304)
        XCTAssertNil(try originHeaders(target)["if-none-match"], "the cache asks for the full response to store")
        let full = try c.get(target)
        XCTAssertEqual(full.status, 200)
        XCTAssertEqual(full.body.count, 30)
        XCTAssertTrue(full.header("cache-status")?.contains("hit") ?? false)
    }

    func testMustRevalidateWithFailingOriginGives504() throws {
        let target = "/mr?cc=max-age=0,must-revalidate&etag=m&fail_after=1"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target).status, 200)
        XCTAssertEqual(try c.get(target).status, 504)
    }

    func testOnlyIfCached() throws {
        let c = try larder.client()
        let miss = try c.get("/oic?size=5", headers: ["Cache-Control: only-if-cached"])
        XCTAssertEqual(miss.status, 504)
        XCTAssertEqual(try origin.count("/oic?size=5"), 0)
        _ = try c.get("/oic?size=5")
        XCTAssertEqual(try c.get("/oic?size=5", headers: ["Cache-Control: only-if-cached"]).status, 200)
    }

    func testHeuristicFreshnessFromLastModified() throws {
        let target = "/heur?cc=none&lm=864000&size=8"
        let c = try larder.client()
        _ = try c.get(target)
        XCTAssertTrue(try c.get(target).header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// RFC 9213: the targeted field wins over Cache-Control and is passed
    /// on (section 3), on a miss and on a hit.
    func testTargetedCacheControlTakesPrecedence() throws {
        let c = try larder.client()
        for (target, name) in [("/tcc?cc=no-store&tcc=max-age=60", "larder-cache-control"), ("/cdn?cc=no-store&cdn=max-age=60", "cdn-cache-control")] {
            let first = try c.get(target)
            XCTAssertEqual(first.header(name), "max-age=60", target)
            XCTAssertEqual(first.header("cache-control"), "no-store")
            let second = try c.get(target)
            XCTAssertTrue(second.header("cache-status")?.contains("hit") ?? false, target)
            XCTAssertEqual(second.header(name), "max-age=60", target)
            XCTAssertEqual(try origin.count(target), 1, target)
        }
        _ = try c.get("/tcc2?cc=max-age=60&tcc=no-store")
        _ = try c.get("/tcc2?cc=max-age=60&tcc=no-store")
        XCTAssertEqual(try origin.count("/tcc2?cc=max-age=60&tcc=no-store"), 2)
    }

    /// strip_targeted_fields: Larder obeys the targeted fields and keeps them from clients.
    func testTargetedFieldsAreRemovedWhenConfiguredSo() throws {
        let l = try startLarder(upstream: origin.url, ["--config", try writeConfig("strip_targeted_fields = true\n")])
        let c = try l.client()
        for target in ["/tcc-s?cc=no-store&tcc=max-age=60", "/cdn-s?cc=no-store&cdn=max-age=60"] {
            let first = try c.get(target)
            XCTAssertNil(first.header("larder-cache-control"))
            XCTAssertNil(first.header("cdn-cache-control"))
            let second = try c.get(target)
            XCTAssertTrue(second.header("cache-status")?.contains("hit") ?? false, target)
            XCTAssertNil(second.header("larder-cache-control"))
            XCTAssertNil(second.header("cdn-cache-control"))
        }
    }

    /// With store_set_cookie = true, Set-Cookie is stored and replayed (RFC
    /// 9111 section 7.3) and updated by a 304; private="Set-Cookie" keeps it
    /// out of the stored copy.
    func testSetCookieIsStoredUnlessPrivateWhenAllowed() throws {
        let l = try startLarder(upstream: origin.url, ["--config", try writeConfig("store_set_cookie = true\n")])
        let c = try l.client()
        _ = try c.get("/cookie?cookie=1")
        let hit = try c.get("/cookie?cookie=1")
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(hit.header("set-cookie"), "session=1")
        let privateTarget = "/pcookie?cookie=1&cc=max-age=60,private=%22Set-Cookie%22"
        XCTAssertEqual(try c.get(privateTarget).header("set-cookie"), "session=1")
        let privateHit = try c.get(privateTarget)
        XCTAssertTrue(privateHit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertNil(privateHit.header("set-cookie"))
    }

    /// RFC 9111 section 5.2.2.4: no-cache="a" keeps field a out of the stored
    /// copy, which is otherwise reused without validation.
    func testQualifiedNoCacheOmitsTheFieldAndStillCaches() throws {
        let target = "/ncf?cc=max-age=3600,no-cache=%22a%22&extra=a:1;b:2"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target).header("a"), "1")
        let hit = try c.get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertNil(hit.header("a"))
        XCTAssertEqual(hit.header("b"), "2")
        XCTAssertEqual(try origin.count(target), 1)
    }


    /// RFC 5861 section 3: served stale at once, refreshed in the background.
    func testStaleWhileRevalidateServesAtOnceAndRefreshes() throws {
        let target = "/swr?cc=max-age=0,stale-while-revalidate=60&size=16"
        let c = try larder.client()
        let first = try c.get(target)
        XCTAssertEqual(first.header("x-origin-count"), "1")
        let stale = try c.get(target)
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.header("x-origin-count"), "1", "the stale copy is served without waiting")
        XCTAssertTrue(stale.header("cache-status")?.hasPrefix("larder; hit; ttl=") ?? false)
        XCTAssertEqual(try waitForOriginCount(target, atLeast: 2), 2, "one background revalidation")
        // The refreshed copy replaced the stale one.
        let deadline = Date().addingTimeInterval(10)
        var refreshed = try c.get(target)
        while refreshed.header("x-origin-count") == "1" && Date() < deadline { refreshed = try c.get(target) }
        XCTAssertNotEqual(refreshed.header("x-origin-count"), "1")
    }

    /// A background refresh answered with a response that may not be
    /// stored removes the stale copy (as a client's fetch would): the
    /// next request goes upstream instead of being served what the origin
    /// no longer lets caches keep.
    func testABackgroundRefreshAnsweredNoStoreRemovesTheStaleCopy() throws {
        let target = "/swr-nostore?cc=max-age=0,stale-while-revalidate=60&cc_then=no-store&size=16"
        let c = try larder.client()
        XCTAssertEqual(try c.get(target).header("x-origin-count"), "1")
        let stale = try c.get(target)
        XCTAssertTrue(stale.header("cache-status")?.hasPrefix("larder; hit") ?? false, "served stale, refreshed in the background")
        XCTAssertEqual(try waitForOriginCount(target, atLeast: 2), 2)
        let deadline = Date().addingTimeInterval(10)
        var next = try c.get(target)
        while next.header("cache-status")?.hasPrefix("larder; hit") ?? false && Date() < deadline { next = try c.get(target) }
        XCTAssertEqual(next.header("cache-status"), "larder; fwd=uri-miss", "the stale copy is gone")
        XCTAssertEqual(next.header("cache-control"), "no-store")
    }

    /// RFC 5861 section 4: a 500 or a dead origin yields the stale response within the window.
    func testStaleIfErrorServesStaleWhenTheOriginFails() throws {
        let c = try larder.client()
        let failing = "/sie?cc=max-age=0,stale-if-error=60&fail_after=1&size=12"
        let first = try c.get(failing)
        let second = try c.get(failing)
        XCTAssertEqual(second.status, 200)
        XCTAssertEqual(second.body, first.body)
        XCTAssertTrue(second.header("cache-status")?.hasPrefix("larder; hit; ttl=") ?? false)
        // Without stale-if-error the 500 goes through.
        _ = try c.get("/nosie?cc=max-age=0&fail_after=1")
        XCTAssertEqual(try c.get("/nosie?cc=max-age=0&fail_after=1").status, 500)
        // The origin gone entirely.
        let gone = "/sie2?cc=max-age=0,stale-if-error=60&size=9"
        let kept = try c.get(gone)
        origin.stop()
        let afterStop = try c.get(gone)
        XCTAssertEqual(afterStop.status, 200)
        XCTAssertEqual(afterStop.body, kept.body)
    }

    /// RFC 9111 section 4.2.4 "disconnected" (cache-tests `stale-close`):
    /// an upstream that closes without answering, or is gone, gets the
    /// stale stored response in its place, said so in Cache-Status, within
    /// `stale_on_disconnect` and unless the response forbids it.
    func testStaleOnDisconnectServesWhenTheUpstreamIsGone() throws {
        let config = """
        stale_on_disconnect = "10m"
        [[route]]
        prefix = "/nograce/"
        stale_on_disconnect = "0"
        """
        let l = try startLarder(upstream: origin.url, ["--config", try writeConfig(config)])
        let c = try l.client()
        let dropping = "/grace?cc=max-age=0&drop_after=1&size=21"
        let stored = try c.get(dropping)
        let stale = try c.get(dropping)
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.body, stored.body)
        let status = stale.header("cache-status") ?? ""
        XCTAssertTrue(status.hasPrefix("larder; hit; ttl=") && status.hasSuffix("; detail=upstream-unreachable"), status)
        XCTAssertGreaterThan(try origin.count(dropping), 1, "the upstream was asked first")
        // What forbids serving stale, a route without grace, a response staler than the grace.
        for (target, why) in [("/grace-mr?cc=max-age=0,must-revalidate&drop_after=1", "must-revalidate"),
                              ("/grace-nc?cc=max-age=60,no-cache&drop_after=1", "no-cache"),
                              ("/grace-sm?cc=max-age=0,s-maxage=0&drop_after=1", "s-maxage in a shared cache"),
                              ("/nograce/x?cc=max-age=0&drop_after=1", "stale_on_disconnect = 0"),
                              ("/grace-old?cc=max-age=0&extra=Age:900&drop_after=1", "15 minutes stale, grace 10")] {
            XCTAssertEqual(try c.get(target).status, 200, why)
            let answer = try c.get(target)
            XCTAssertEqual(answer.status, 502, why)
            XCTAssertFalse(answer.header("cache-status")?.contains("hit") ?? true, why)
        }
        // The origin gone altogether (connection refused).
        let kept = "/grace-gone?cc=max-age=0&size=33"
        let before = try c.get(kept)
        origin.stop()
        let after = try c.get(kept)
        XCTAssertEqual(after.status, 200)
        XCTAssertEqual(after.body, before.body)
        XCTAssertTrue(after.header("cache-status")?.hasSuffix("detail=upstream-unreachable") ?? false)
        XCTAssertEqual(try c.get("/grace-never-stored").status, 502, "nothing stored: nothing to stand in")
    }

    /// RFC 9110 section 14: a range of a stored response, and If-Range.
    func testRangeRequestsAreAnsweredFromTheStoredResponse() throws {
        let target = "/range?etag=r1&size=1000"
        let c = try larder.client()
        let full = try c.get(target)
        let part = try c.get(target, headers: ["Range: bytes=10-19"])
        XCTAssertEqual(part.status, 206)
        XCTAssertEqual(part.header("content-range"), "bytes 10-19/1000")
        XCTAssertEqual(part.body, Array(full.body[10..<20]))
        let suffix = try c.get(target, headers: ["Range: bytes=-5"])
        XCTAssertEqual(suffix.body, Array(full.body[995..<1000]))
        XCTAssertEqual(try c.get(target, headers: ["Range: bytes=5000-"]).status, 416)
        let stale = try c.get(target, headers: ["Range: bytes=0-1", "If-Range: \"old\""])
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.body.count, 1000)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// RFC 9111 section 4.3.5: a HEAD response updates the stored GET's headers.
    func testHeadResponseUpdatesTheStoredGet() throws {
        let target = "/headupd?etag=h1&cc=max-age=0&size=10"
        let c = try larder.client()
        _ = try c.get(target)
        try c.send("HEAD \(target) HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try c.readResponse(method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("x-origin-count"), "2")
        // The stored GET now carries the HEAD's fields; its body is unchanged.
        let get = try c.get(target)
        XCTAssertEqual(get.body.count, 10)
        // (the revalidating 304 carries no X-Origin-Count, so "2" can only come from the HEAD)
        XCTAssertEqual(get.header("x-origin-count"), "2")
    }

    /// RFC 9111 section 3: any final status with explicit freshness is reused,
    /// with the upstream's reason phrase.
    func testUnknownStatusWithFreshnessIsCachedWithItsReasonPhrase() throws {
        let c = try larder.client()
        try c.send("GET /s299?status=299&reason=Whatever HTTP/1.1\r\nHost: t\r\n\r\n")
        _ = try c.readResponse()
        let raw = try HTTPClient(port: larder.port)
        try raw.send("GET /s299?status=299&reason=Whatever HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(raw.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 299 Whatever\r\n"), text)
        XCTAssertTrue(text.contains("larder; hit"), text)
        XCTAssertEqual(try origin.count("/s299?status=299&reason=Whatever"), 1)
    }

    /// RFC 9110 section 9.3.3: a POST response with explicit freshness whose
    /// Content-Location is its own target answers later GETs (the
    /// cache-tests' optimal `method-POST`).
    func testAPostResponseNamingItselfInContentLocationAnswersLaterGets() throws {
        let c = try larder.client()
        func post(_ target: String) throws -> HTTPResponse {
            try c.send("POST \(target) HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n12345")
            return try c.readResponse()
        }
        for target in ["/post/a?size=40&cl_self=1&cc=max-age=600", "/post/b?size=40&cl_self=abs&cc=none&extra=Expires:Thu,%2001%20Jan%202099%2000:00:00%20GMT"] {
            _ = try c.get(target)  // a stored GET, which the POST replaces
            let posted = try post(target)
            XCTAssertEqual(posted.status, 200, target)
            XCTAssertEqual(posted.header("cache-status"), "larder; fwd=method; stored", target)
            let got = try c.get(target)
            XCTAssertTrue(got.header("cache-status")?.hasPrefix("larder; hit") ?? false, target)
            XCTAssertEqual(got.header("x-origin-count"), "2", "\(target): the POST's response, not the GET's before it")
            XCTAssertEqual(got.body, posted.body, target)
            XCTAssertEqual(try origin.count(target), 2, target)
        }
        // Not without Content-Location, another Content-Location, explicit
        // freshness, or a storable GET response's other conditions.
        for target in ["/post/c?size=40&cc=max-age=600", "/post/d?size=40&cc=max-age=600&extra=Content-Location:/post/other",
                       "/post/e?size=40&cl_self=1&cc=none&lm=3600", "/post/f?size=40&cl_self=1&cc=max-age=600,%20private",
                       "/post/g?size=40&cl_self=1&cc=max-age=600&status=201"] {
            XCTAssertLessThan(try post(target).status, 300, target)
            let got = try c.get(target)
            XCTAssertEqual(got.header("x-origin-count"), "2", "\(target): the GET went upstream")
        }
    }
}
