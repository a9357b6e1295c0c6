import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// End to end: the real larder binary in front of the python origin.
final class ProxyTests: ProxyTestCase {
    func testMissThenHitReachesOriginOnce() throws {
        let c = try larder.client()
        let first = try c.get("/hit?size=500")
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.header("cache-status"), "larder; fwd=uri-miss; stored")
        let second = try c.get("/hit?size=500")
        XCTAssertEqual(second.status, 200)
        XCTAssertTrue(second.header("cache-status")?.hasPrefix("larder; hit; ttl=") ?? false, "\(second.headers)")
        XCTAssertNotNil(second.header("age"))
        // The origin's Date is kept (RFC 9110 section 6.6.1), not regenerated per hit.
        XCTAssertEqual(second.header("date"), first.header("date"))
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(second.body.count, 500)
        XCTAssertEqual(try origin.count("/hit?size=500"), 1)
        // Another connection (maybe another worker) shares the memory tier.
        for _ in 0..<4 {
            XCTAssertEqual(try larder.client().get("/hit?size=500").body, first.body)
        }
        XCTAssertEqual(try origin.count("/hit?size=500"), 1)
    }

    func testHeadIsAnsweredFromAStoredGet() throws {
        let c = try larder.client()
        let get = try c.get("/head?size=300")
        try c.send("HEAD /head?size=300 HTTP/1.1\r\nHost: t\r\n\r\n")
        let head = try c.readResponse(method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("content-length"), "300")
        XCTAssertTrue(head.header("cache-status")?.contains("hit") ?? false)
        // The connection stays usable: no body bytes were sent for HEAD.
        XCTAssertEqual(try c.get("/head?size=300").body, get.body)
        XCTAssertEqual(try origin.count("/head?size=300"), 1)
    }

    func testPostBodyIsForwardedAndNotCached() throws {
        let body = [UInt8]((0..<100_000).map { UInt8($0 % 251) })
        for _ in 0..<2 {
            let c = try larder.client()
            try c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\nContent-Type: application/octet-stream\r\n\r\n")
            try c.send(body)
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body, body)
            XCTAssertEqual(r.header("cache-status"), "larder; fwd=method")
        }
        XCTAssertEqual(try origin.count("/echo"), 2)
        let seen = try origin.lastRequest("/echo")
        XCTAssertEqual(seen["method"] as? String, "POST")
        XCTAssertEqual(seen["body_length"] as? Int, body.count)
    }

    func testLargeUploadAndEchoStreamBothWaysIntact() throws {
        var body = [UInt8](repeating: 0, count: 8_000_000)
        for i in body.indices { body[i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 13) }
        let c = try larder.client()
        // Send from another thread: the echo comes back while we are still sending.
        try c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.count)\r\n\r\n")
        let payload = body
        let sender = Thread { try? c.send(payload) }
        sender.start()
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body.count, body.count)
        XCTAssertTrue(r.body == body)
    }

    func testChunkedRequestBodyWithExpectContinue() throws {
        let c = try larder.client()
        try c.send("PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
        try c.send("5\r\nhello\r\n")
        try c.send("6;x=y\r\n world\r\n0\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.text, "hello world")
        XCTAssertEqual(try origin.lastRequest("/echo")["method"] as? String, "PUT")
    }

    func testChunkedUpstreamResponseIsCachedAndReplayedByteExact() throws {
        let direct = try HTTPClient(port: origin.port).get("/chunky?chunked=1&size=70000").body
        let c = try larder.client()
        let miss = try c.get("/chunky?chunked=1&size=70000")
        let hit = try c.get("/chunky?chunked=1&size=70000")
        XCTAssertEqual(miss.body.count, 70000)
        XCTAssertEqual(miss.body, hit.body)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(hit.header("content-length"), "70000")
        XCTAssertEqual(try origin.count("/chunky?chunked=1&size=70000"), 2)  // once direct, once through larder
        XCTAssertEqual(direct.count, 70000)
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let c = try larder.client()
        // The first is slow: a proxy that answered as responses arrive would reorder.
        try c.send("GET /p1?delay=0.3&size=11 HTTP/1.1\r\nHost: t\r\n\r\n"
                 + "GET /p2?size=22 HTTP/1.1\r\nHost: t\r\n\r\n"
                 + "GET /p1?delay=0.3&size=11 HTTP/1.1\r\nHost: t\r\n\r\n"
                 + "GET /p3?size=33 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        let sizes = try (0..<4).map { _ in try c.readResponse().body.count }
        XCTAssertEqual(sizes, [11, 22, 11, 33])
        XCTAssertTrue(c.isClosedByPeer())
        XCTAssertEqual(try origin.count("/p1?delay=0.3&size=11"), 1)
    }

    func testKeepAliveServesManyRequestsOnOneConnection() throws {
        let c = try larder.client()
        for i in 0..<20 {
            XCTAssertEqual(try c.get("/ka/\(i % 3)?size=\(10 + i % 3)").body.count, 10 + i % 3)
        }
        XCTAssertEqual(try origin.count("/ka/0?size=10"), 1)
    }

    func testHopByHopRemovedAndForwardedForAdded() throws {
        let c = try larder.client()
        _ = try c.get("/fwd?cc=no-store", headers: ["Connection: X-Secret", "X-Secret: 1", "Keep-Alive: timeout=5",
                                                     "Larder-Cache-Policy: useProtocolCachePolicy", "X-Kept: yes"])
        let seen = try origin.lastRequest("/fwd?cc=no-store")
        let headers = (seen["headers"] as? [[String]] ?? []).map { ($0[0], $0[1]) }
        let names = Set(headers.map(\.0))
        XCTAssertFalse(names.contains("x-secret"))
        XCTAssertFalse(names.contains("keep-alive"))
        XCTAssertFalse(names.contains("larder-cache-policy"))
        XCTAssertTrue(names.contains("x-kept"))
        XCTAssertEqual(headers.first { $0.0 == "x-forwarded-for" }?.1, "127.0.0.1")
    }

    func testHopByHopAndTagHeadersAreRemovedFromResponses() throws {
        let c = try larder.client()
        for _ in 0..<2 {  // the miss and the hit
            let r = try c.get("/hop?hop=1&tags=a%20b")
            XCTAssertEqual(r.status, 200)
            for name in ["x-hop-secret", "keep-alive", "upgrade", "surrogate-key", "cache-tag"] {
                XCTAssertNil(r.header(name), name)
            }
            XCTAssertNotEqual(r.header("connection")?.lowercased(), "x-hop-secret")
        }
    }

    func testUpstreamConnectionsAreReused() throws {
        let c = try larder.client()
        var ports: Set<Int> = []
        for i in 0..<5 {
            _ = try c.get("/reuse/\(i)?cc=no-store")
            ports.insert(try origin.lastRequest("/reuse/\(i)?cc=no-store")["peer_port"] as? Int ?? -1)
        }
        XCTAssertEqual(ports.count, 1, "sequential misses on one worker should share one upstream connection: \(ports)")
    }

    func testHTTP10ClientGetsACloseDelimitedBodyFromAChunkedUpstream() throws {
        let c = try larder.client()
        try c.send("GET /h10?chunked=1&size=5000 HTTP/1.0\r\n\r\n")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body.count, 5000)
        XCTAssertTrue(c.isClosedByPeer())
        // Stored all the same, and replayed with a length.
        let hit = try larder.client().get("/h10?chunked=1&size=5000")
        XCTAssertEqual(hit.header("content-length"), "5000")
        XCTAssertEqual(hit.body, r.body)
    }

    func testGetWithABodyOnAHitKeepsTheConnectionInSync() throws {
        let c = try larder.client()
        _ = try c.get("/gb?size=7")
        try c.send("GET /gb?size=7 HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcdeGET /gb2?size=9 HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(try c.readResponse().body.count, 7)
        XCTAssertEqual(try c.readResponse().body.count, 9)
    }

    func testResponsesThatMustNotBeStoredAreNot() throws {
        let c = try larder.client()
        for target in ["/ns?cc=no-store", "/pv?cc=private,max-age=60", "/nofresh?cc=public"] {
            _ = try c.get(target)
            let again = try c.get(target)
            XCTAssertFalse(again.header("cache-status")?.contains("hit") ?? true, target)
            XCTAssertEqual(try origin.count(target), 2, target)
        }
        _ = try c.get("/auth?size=5", headers: ["Authorization: Bearer x"])
        _ = try c.get("/auth?size=5", headers: ["Authorization: Bearer x"])
        XCTAssertEqual(try origin.count("/auth?size=5"), 2)
    }

    func testVaryKeepsVariantsApart() throws {
        let c = try larder.client()
        let en = try c.get("/v?vary=Accept-Language", headers: ["Accept-Language: en"])
        let fr = try c.get("/v?vary=Accept-Language", headers: ["Accept-Language: fr"])
        XCTAssertTrue(en.text.hasPrefix("Accept-Language=en"))
        XCTAssertTrue(fr.text.hasPrefix("Accept-Language=fr"))
        XCTAssertEqual(fr.header("cache-status"), "larder; fwd=vary-miss; stored")
        let frAgain = try c.get("/v?vary=Accept-Language", headers: ["Accept-Language: fr"])
        XCTAssertTrue(frAgain.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(frAgain.body, fr.body)
        // Both variants are kept side by side.
        let enAgain = try c.get("/v?vary=Accept-Language", headers: ["Accept-Language: en"])
        XCTAssertTrue(enAgain.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(enAgain.body, en.body)
        XCTAssertEqual(try origin.count("/v?vary=Accept-Language"), 2)
    }

    func testSuccessfulPostInvalidatesTheStoredGet() throws {
        let c = try larder.client()
        _ = try c.get("/inv?size=10")
        try c.send("POST /inv?size=10 HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx")
        _ = try c.readResponse()
        let after = try c.get("/inv?size=10")
        XCTAssertEqual(after.header("cache-status"), "larder; fwd=uri-miss; stored")
    }

    func testUnsafeResponseInvalidatesItsLocationAndContentLocation() throws {
        let c = try larder.client()
        _ = try c.get("/inv2/target")
        _ = try c.get("/inv2/other")
        XCTAssertTrue(try c.get("/inv2/target").header("cache-status")?.contains("hit") ?? false)
        try c.send("DELETE /inv2/post?extra=Location:target;Content-Location:/inv2/other HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertEqual(try c.get("/inv2/target").header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertEqual(try c.get("/inv2/other").header("cache-status"), "larder; fwd=uri-miss; stored")
    }

    func testMalformedRequestsGetTheirStatus() throws {
        let cases: [(String, Int, Bool)] = [
            ("GET / HTTP/1.1\r\nHost: t\r\nX: " + String(repeating: "a", count: 40_000) + "\r\n\r\n", 431, true),
            ("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: t\r\n\r\n", 414, true),
            ("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400, true),
            ("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, true),
            ("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501, true),
            ("GET / HTTP/1.1\r\nHost t\r\n\r\n", 400, true),
            ("GET / HTTP/1.1\r\n\r\n", 400, true),
            ("BAD\u{1} / HTTP/1.1\r\nHost: t\r\n\r\n", 400, true),
            ("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, true),
        ]
        for (request, status, closes) in cases {
            let c = try larder.client()
            try c.send(request)
            let r = try c.readResponse()
            XCTAssertEqual(r.status, status, String(request.prefix(60)))
            if closes { XCTAssertTrue(c.isClosedByPeer(), String(request.prefix(60))) }
        }
        XCTAssertEqual(try origin.count("/echo"), 0)
    }

    func testHalfClosedClientStillGetsItsAnswer() throws {
        let c = try larder.client()
        try c.send("GET /half?delay=0.2&size=40 HTTP/1.1\r\nHost: t\r\n\r\n")
        shutdown(c.fd, Int32(SHUT_WR))
        XCTAssertEqual(try c.readResponse().body.count, 40)
        XCTAssertTrue(c.isClosedByPeer())
    }

    /// A hit too large to be written at once, asked by a client that
    /// closes its sending side right after the request (as `nc -N` or an
    /// HTTP/1.0-style client does): answered whole, then the connection closes.
    func testHalfClosedClientGetsAWholeLargeHit() throws {
        let size = 8 << 20
        let target = "/half-large?size=\(size)"
        XCTAssertEqual(try larder.client().get(target).body.count, size)
        let c = try HTTPClient(port: larder.port, receiveBuffer: 64 << 10)  // it cannot take the answer at once
        try c.send("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n")
        shutdown(c.fd, Int32(SHUT_WR))
        let hit = try c.readResponse()
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        XCTAssertEqual(hit.body.count, size)
        XCTAssertTrue(c.isClosedByPeer())
        // An idle connection whose client closes its side is closed at once.
        let idle = try larder.client()
        XCTAssertEqual(try idle.get("/half-idle?size=10").status, 200)
        shutdown(idle.fd, Int32(SHUT_WR))
        XCTAssertTrue(idle.isClosedByPeer())
    }

    func testClientClosingMidBodyCancelsTheUpstreamRequest() throws {
        let c = try larder.client()
        try c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n12345")
        shutdown(c.fd, Int32(SHUT_WR))
        XCTAssertTrue(c.isClosedByPeer())  // closed at once, not after an upstream timeout
    }

    func testClientThatHangsUpMidResponseDoesNotHurtOthers() throws {
        let c = try larder.client()
        try c.send("GET /big1?size=3000000 HTTP/1.1\r\nHost: t\r\n\r\n")
        shutdown(c.fd, Int32(SHUT_RDWR))
        let other = try larder.client()
        XCTAssertEqual(try other.get("/after?size=10").status, 200)
    }
}
