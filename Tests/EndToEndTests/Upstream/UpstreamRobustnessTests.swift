import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Retries after failed upstream connections, and fetches that finish (and
/// store) after their client went away.
final class UpstreamRobustnessTests: ProxyTestCase {
    func testAnIdempotentRequestIsRetriedWhenTheConnectionFails() throws {
        let c = try larder.client()
        let r = try c.get("/retry?reset=1")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(try origin.count("/retry?reset=1"), 2, "one failed attempt, one retry")
    }

    /// Pooled upstream connections stay registered with epoll while idle;
    /// one the origin closes meanwhile is dropped, never reused, and
    /// connections that stay open are reused.
    func testPooledUpstreamConnectionsAreReusedAndDroppedWhenClosed() throws {
        let c = try larder.client()
        func peerPort(_ target: String) throws -> Int { try origin.lastRequest(target)["peer_port"] as? Int ?? -1 }
        XCTAssertEqual(try c.get("/pool-a").status, 200)
        XCTAssertEqual(try c.get("/pool-b").status, 200)
        XCTAssertEqual(try peerPort("/pool-a"), try peerPort("/pool-b"), "an idle connection is reused")
        for i in 0..<5 {
            XCTAssertEqual(try c.get("/pool-closed-\(i)?closeafter=1").status, 200)
            let next = try c.get("/pool-next-\(i)")
            XCTAssertEqual(next.status, 200)
            XCTAssertNotEqual(try peerPort("/pool-closed-\(i)?closeafter=1"), try peerPort("/pool-next-\(i)"),
                              "a connection the origin closed is not reused")
        }
        XCTAssertEqual(try origin.count("/pool-next-4"), 1)
    }

    /// Upstream handles are pooled and keep the options all transfers share:
    /// on one connection (one worker, the same handle each time) every
    /// request still goes with its own method, body and fields.
    func testAPooledHandleCarriesNothingFromOneRequestToTheNext() throws {
        let c = try larder.client()
        let steps: [(method: String, body: String?, field: String?)] = [
            // (A HEAD that misses is fetched as a GET: this one reloads, so it goes as a HEAD.)
            ("POST", "abc", "X-First: 1"), ("GET", nil, nil), ("HEAD", nil, "Larder-Cache-Policy: reloadIgnoringLocalCacheData"),
            ("PUT", "hello", nil), ("DELETE", nil, nil),
            ("GET", nil, "X-Last: 2"), ("OPTIONS", nil, nil), ("PATCH", "x", nil), ("GET", nil, nil),
        ]
        for (i, step) in steps.enumerated() {
            let target = "/pooled-\(i)"
            let field = step.field.map { $0 + "\r\n" } ?? ""
            if let body = step.body {
                try c.send("\(step.method) \(target) HTTP/1.1\r\nHost: t\r\n\(field)Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
            } else {
                try c.send("\(step.method) \(target) HTTP/1.1\r\nHost: t\r\n\(field)\r\n")
            }
            let r = try c.readResponse(method: step.method)
            XCTAssertEqual(r.status, 200, "\(step)")
            if step.method == "GET" { XCTAssertFalse(r.body.isEmpty, "\(step)") }
            let seen = try origin.lastRequest(target)
            XCTAssertEqual(seen["method"] as? String, step.method, "\(step)")
            XCTAssertEqual(seen["body_length"] as? Int, step.body?.utf8.count ?? 0, "\(step)")
            let names = (seen["headers"] as? [[String]] ?? []).map { $0[0] }
            XCTAssertEqual(names.contains("x-first"), step.field == "X-First: 1", "\(step): \(names)")
            XCTAssertEqual(names.contains("x-last"), step.field == "X-Last: 2", "\(step): \(names)")
            if step.body == nil && step.method != "POST" && step.method != "PUT" && step.method != "PATCH" {
                XCTAssertFalse(names.contains("content-length") || names.contains("transfer-encoding"), "\(step): \(names)")
            }
        }
    }

    /// A reverse proxy talks to its upstream directly: proxy variables in
    /// its environment (a shell's http_proxy) are not followed.
    func testProxyEnvironmentVariablesAreIgnored() throws {
        let deadProxy = "http://127.0.0.1:\(unusedPort())"
        let l = try LarderProcess(upstream: origin.url, environment: [
            "http_proxy": deadProxy, "HTTP_PROXY": deadProxy, "https_proxy": deadProxy, "all_proxy": deadProxy,
            "ALL_PROXY": deadProxy, "no_proxy": "", "NO_PROXY": "",
        ])
        defer { l.stop() }
        let r = try l.client().get("/direct")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(try origin.count("/direct"), 1)
    }

    func testRetriesAreBounded() throws {
        let r = try larder.client().get("/retry-forever?reset=100")
        XCTAssertEqual(r.status, 502)
        XCTAssertEqual(try origin.count("/retry-forever?reset=100"), 3, "the first attempt and upstream_retries = 2")
    }

    func testAPostIsNeverRetried() throws {
        let r = try larder.client().request("POST", "/no-retry?reset=1")
        XCTAssertEqual(r.status, 502)
        XCTAssertEqual(try origin.count("/no-retry?reset=1"), 1)
    }

    /// Sends a GET, reads only the response head, then disconnects.
    private func disconnectAfterHead(_ target: String) throws {
        let c = try larder.client()
        try c.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(10)
        while !received.contains(0x0A) && Date() < deadline {  // at least the status line
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        XCTAssertTrue(String(decoding: received, as: UTF8.self).hasPrefix("HTTP/1.1 200"))
        var linger = linger(l_onoff: 1, l_linger: 0)
        setsockopt(c.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
    }

    /// Polls with the cacheOnly policy (never goes upstream) until stored.
    private func waitUntilStored(_ target: String) throws -> HTTPResponse? {
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            let r = try larder.client().get(target, headers: ["Larder-Cache-Policy: cacheOnly"])
            if r.status == 200 { return r }
            usleep(50_000)
        }
        return nil
    }

    func testAFetchWhoseClientLeftIsStillStored() throws {
        let target = "/orphan?size=50000&trickle=0.1"
        try disconnectAfterHead(target)
        let stored = try XCTUnwrap(try waitUntilStored(target), "the response was stored after the client left")
        XCTAssertEqual(stored.body.count, 50000)
        XCTAssertEqual(stored.body, try HTTPClient(port: origin.port).get(target).body)
        XCTAssertNil(try origin.lastRequest(target)["aborted"], "the origin sent the whole body")
    }
}

extension UpstreamRobustnessTests {
    /// RFC 5861: many requests for a stale-while-revalidate response are all
    /// answered at once, and only one of them (on any worker) refreshes it.
    func testStaleWhileRevalidateRefreshesOncePerKey() throws {
        let target = "/swr-many?cc=max-age%3D0,stale-while-revalidate%3D60&delay=0.5"
        XCTAssertEqual(try larder.client().get(target).status, 200)
        let port = larder.port
        let group = DispatchGroup()
        final class Box: @unchecked Sendable { let lock = NSLock(); var counts: [String] = [] }
        let box = Box()
        for _ in 0..<20 {
            group.enter()
            Thread {
                let r = try? HTTPClient(port: port).get(target)
                box.lock.lock(); box.counts.append(r?.header("x-origin-count") ?? "none"); box.lock.unlock()
                group.leave()
            }.start()
        }
        // Answered from the stale copy: well before the 0.5 s refresh ends.
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(box.counts, Array(repeating: "1", count: 20), "every answer is the stored copy")
        XCTAssertEqual(try waitForOriginCount(target, atLeast: 2), 2)
        XCTAssertEqual(try origin.count(target), 2, "exactly one background refresh")
    }

    /// A client that reads a large response slowly: the upstream transfer is
    /// paused, so Larder holds a bounded amount of it.
    func testASlowReaderKeepsMemoryBounded() throws {
        try skipMemoryFiguresUnderSanitizers()
        let size = 64 << 20
        let target = "/slow-reader?size=\(size)"
        let c = try larder.client()
        try c.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        var received = 0
        // Read 4 MiB in small sips, as a slow mobile client would.
        while received < 4 << 20 {
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            XCTAssertGreaterThan(n, 0)
            if n <= 0 { return }
            received += n
            usleep(1_000)
        }
        let peak = memory(of: larder.child.process.processIdentifier).peak
        XCTAssertLessThan(peak, 48 << 20, "Larder buffered \(peak >> 20) MiB for a slow reader")
        // The rest arrives intact.
        while received < size {
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += n
        }
        XCTAssertGreaterThanOrEqual(received, size)
    }
}

/// With finish_store_limit = 0, a fetch is abandoned with its client.
final class AbandonedFetchTests: ConfiguredTestCase {
    func testTheFetchIsAbandonedWhenTheLimitIsZero() throws {
        let (origin, larder) = try start(config: "finish_store_limit = \"0\"\n")
        let target = "/abandoned?size=50000&trickle=0.1"
        do {
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
            var chunk = [UInt8](repeating: 0, count: 64)
            XCTAssertGreaterThan(chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }, 0)
        }  // the client disconnects here
        // The origin notices that its reader went away.
        let deadline = Date().addingTimeInterval(15)
        while try origin.lastRequest(target)["aborted"] == nil && Date() < deadline { usleep(50_000) }
        XCTAssertEqual(try origin.lastRequest(target)["aborted"] as? Bool, true)
        let r = try larder.client().get(target, headers: ["Larder-Cache-Policy: cacheOnly"])
        XCTAssertEqual(r.status, 504, "nothing was stored")
    }
}

/// upstream_total_timeout bounds the whole exchange, body included.
final class TotalTimeoutTests: ConfiguredTestCase {
    func testABodyThatTakesTooLongIsCutAndNotStored() throws {
        let (_, larder) = try start(config: "upstream_total_timeout = \"1s\"\n")
        let target = "/too-long?size=10000&trickle=0.3"  // about 3 s of body
        let c = try larder.client()
        try c.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {  // until Larder closes the connection (bounded by the client's 20 s receive timeout)
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        let text = String(decoding: received, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("HTTP/1.1 200"), text)
        let body = received.count - (received.firstRange(of: [13, 10, 13, 10])?.upperBound ?? 0)
        XCTAssertLessThan(body, 10000, "the body was cut")
        let again = try larder.client().get(target, headers: ["Larder-Cache-Policy: cacheOnly"])
        XCTAssertEqual(again.status, 504, "an incomplete response is never stored")
    }
}

/// upstream_max_connections caps the connections to the upstream; further
/// requests queue for a free one.
final class ConnectionLimitTests: ConfiguredTestCase {
    func testRequestsQueueForTheConnectionLimit() throws {
        let (origin, larder) = try start(config: "upstream_max_connections = 2\n")  // 2 workers: 1 connection each
        let targets = (0..<6).map { "/queued/\($0)?delay=0.3&cc=no-store" }
        let group = DispatchGroup()
        final class Box: @unchecked Sendable { let lock = NSLock(); var statuses: [Int] = [] }
        let box = Box()
        for target in targets {
            group.enter()
            Thread {
                let status = (try? HTTPClient(port: larder.port).get(target))?.status ?? 0
                box.lock.lock(); box.statuses.append(status); box.lock.unlock()
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(box.statuses, Array(repeating: 200, count: 6), "queued requests are answered, not refused")
        // Every request reached the origin over one of at most 2 connections.
        let ports = Set(try targets.map { try origin.lastRequest($0)["peer_port"] as? Int ?? -1 })
        XCTAssertLessThanOrEqual(ports.count, 2, "origin saw connections from ports \(ports)")
    }
}
