import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Request collapsing: many concurrent misses, one upstream request.
final class CollapsingTests: ProxyTestCase {
    private func concurrentGets(_ target: String, count: Int, on other: LarderProcess? = nil) -> [HTTPResponse?] {
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var responses: [HTTPResponse?]
            init(_ n: Int) { responses = Array(repeating: nil, count: n) }
        }
        let results = Results(count)
        let group = DispatchGroup()
        let port = (other ?? larder).port
        for i in 0..<count {
            group.enter()
            Thread {
                let r = try? HTTPClient(port: port).get(target)
                results.lock.lock()
                results.responses[i] = r
                results.lock.unlock()
                group.leave()
            }.start()
        }
        _ = group.wait(timeout: .now() + 60)
        results.lock.lock()
        defer { results.lock.unlock() }
        return results.responses
    }

    func testConcurrentMissesMakeOneUpstreamRequest() throws {
        let target = "/stampede?delay=1.5&size=20000"
        let responses = concurrentGets(target, count: 50)
        XCTAssertEqual(responses.compactMap { $0 }.count, 50)
        let bodies = Set(responses.compactMap { $0?.body })
        XCTAssertEqual(bodies.count, 1, "every client got the same body")
        XCTAssertEqual(bodies.first?.count, 20000)
        XCTAssertEqual(try origin.count(target), 1)
        let statuses = responses.compactMap { $0?.header("cache-status") }
        XCTAssertTrue(statuses.contains("larder; fwd=uri-miss; collapsed"), "\(statuses)")
    }

    /// Clients asking at once for the whole of a response whose first
    /// piece is stored: one completes it (the rest alone is asked), the
    /// others wait for it and are then answered from the joined whole;
    /// none is sent the rest alone.
    func testConcurrentRequestsForAStoredPiecesWholeMakeOneRestRequest() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        let target = "/stampede-rest?size=20000&etag=s1&ranges=1&delay=1"
        XCTAssertEqual(try larder.client().get(target, headers: ["Range: bytes=0-4999"]).status, 206)
        let responses = concurrentGets(target, count: 20, on: larder)
        XCTAssertEqual(responses.compactMap { $0 }.count, 20)
        XCTAssertEqual(Set(responses.compactMap { $0?.status }), [200])
        let bodies = Set(responses.compactMap { $0?.body })
        XCTAssertEqual(bodies.count, 1, "every client got the same body")
        XCTAssertEqual(bodies.first?.count, 20000)
        XCTAssertEqual(try origin.count(target), 2, "the piece, then one request for the rest")
        let statuses = responses.compactMap { $0?.header("cache-status") }
        XCTAssertEqual(statuses.filter { $0.contains("fwd=partial") }.count, 1, "\(statuses)")
        XCTAssertTrue(statuses.allSatisfy { $0.contains("fwd=partial") || $0 == "larder; fwd=uri-miss; collapsed" || $0.contains("; hit") },
                      "the others waited for it (or came after it): \(statuses)")
    }

    func testAWaiterReceivesTheFirstBytesBeforeTheUpstreamFinishes() throws {
        let target = "/trickle?size=100000&trickle=0.3&delay=0.3"
        let port = larder.port
        let leaderDone = expectation(description: "leader answered")
        final class Box: @unchecked Sendable { var response: HTTPResponse? }
        let leader = Box()
        Thread {
            leader.response = try? HTTPClient(port: port).get(target)
            leaderDone.fulfill()
        }.start()
        // Once the leader's request is at the origin, a second client asks.
        let deadline = Date().addingTimeInterval(10)
        while try origin.count(target) < 1 && Date() < deadline { usleep(10_000) }
        let waiter = try larder.client()
        try waiter.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        guard var response = try readHeadAndFirstBodyBytes(waiter) else { return }
        XCTAssertLessThan(try origin.lastRequest(target)["pieces"] as? Int ?? 10, 10, "body bytes arrived while the origin was still sending")
        let head = String(decoding: response.received[..<response.headEnd], as: UTF8.self)
        XCTAssertTrue(head.contains("Cache-Status: larder; fwd=uri-miss; collapsed"), head)
        // The rest of the body, then the same bytes as the leader got.
        guard readBody(waiter, into: &response, length: 100_000) else { return }
        wait(for: [leaderDone], timeout: 20)
        XCTAssertEqual(Array(response.received[response.headEnd...]), leader.response?.body)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A request arriving once the leader's body is already streaming (the
    /// leader shares it only when asked) follows it: the body so far, then
    /// the rest as it arrives.
    func testARequestArrivingMidBodyFollowsTheStreamingResponse() throws {
        let target = "/late-follower?size=100000&trickle=0.2"
        let leader = try larder.client()
        try leader.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        guard var leaderResponse = try readHeadAndFirstBodyBytes(leader) else { return }
        let waiter = try larder.client()
        try waiter.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        guard var response = try readHeadAndFirstBodyBytes(waiter) else { return }
        XCTAssertLessThan(try origin.lastRequest(target)["pieces"] as? Int ?? 10, 10, "the follower had bytes while the origin was still sending")
        let head = String(decoding: response.received[..<response.headEnd], as: UTF8.self)
        XCTAssertTrue(head.contains("Cache-Status: larder; fwd=uri-miss; collapsed"), head)
        guard readBody(waiter, into: &response, length: 100_000), readBody(leader, into: &leaderResponse, length: 100_000) else { return }
        XCTAssertEqual(Array(response.received[response.headEnd...]), Array(leaderResponse.received[leaderResponse.headEnd...]))
        XCTAssertEqual(response.received.count - response.headEnd, 100_000)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// Reads from a raw client until the head and at least one body byte are in.
    private func readHeadAndFirstBodyBytes(_ client: HTTPClient) throws -> (received: [UInt8], headEnd: Int)? {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        var headEnd: Int?
        while headEnd == nil || received.count - headEnd! < 1 {
            let n = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            XCTAssertGreaterThan(n, 0)
            if n <= 0 { return nil }
            received += chunk[0..<n]
            if headEnd == nil, let r = received.firstRange(of: [13, 10, 13, 10]) { headEnd = r.upperBound }
        }
        return (received, headEnd!)
    }

    /// Reads on until `length` body bytes are in; false if the connection ended first.
    private func readBody(_ client: HTTPClient, into response: inout (received: [UInt8], headEnd: Int), length: Int) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while response.received.count - response.headEnd < length {
            let n = chunk.withUnsafeMutableBytes { recv(client.fd, $0.baseAddress, $0.count, 0) }
            XCTAssertGreaterThan(n, 0)
            if n <= 0 { return false }
            response.received += chunk[0..<n]
        }
        return true
    }

    func testWaitersGetTheWholeResponseWhenTheLeaderDisconnects() throws {
        let target = "/leader-gone?size=60000&trickle=0.1&delay=0.3"
        let leader = try larder.client()
        try leader.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        let deadline = Date().addingTimeInterval(10)
        while try origin.count(target) < 1 && Date() < deadline { usleep(10_000) }
        let port = larder.port
        let waiterDone = expectation(description: "waiter answered")
        final class Box: @unchecked Sendable { var response: HTTPResponse? }
        let waiter = Box()
        Thread {
            waiter.response = try? HTTPClient(port: port).get(target)
            waiterDone.fulfill()
        }.start()
        // The leader's client goes away once the waiter follows the response.
        var chunk = [UInt8](repeating: 0, count: 16)
        _ = chunk.withUnsafeMutableBytes { recv(leader.fd, $0.baseAddress, $0.count, 0) }
        var lingerOff = linger(l_onoff: 1, l_linger: 0)
        setsockopt(leader.fd, SOL_SOCKET, SO_LINGER, &lingerOff, socklen_t(MemoryLayout<linger>.size))
        shutdown(leader.fd, Int32(SHUT_RDWR))
        wait(for: [waiterDone], timeout: 20)
        XCTAssertEqual(waiter.response?.status, 200)
        XCTAssertEqual(waiter.response?.body, try HTTPClient(port: origin.port).get(target).body)
        XCTAssertEqual(try origin.count(target), 2, "the proxy's one fetch, and this test's direct one")
    }

    func testAWaiterForAnotherVariantFetchesOnItsOwn() throws {
        let target = "/variants?vary=Accept-Language&delay=0.5"
        let port = larder.port
        final class Box: @unchecked Sendable { var responses: [String: HTTPResponse] = [:]; let lock = NSLock() }
        let box = Box()
        let group = DispatchGroup()
        for language in ["en", "fr"] {
            group.enter()
            Thread {
                let r = try? HTTPClient(port: port).get(target, headers: ["Accept-Language: \(language)"])
                box.lock.lock(); box.responses[language] = r; box.lock.unlock()
                group.leave()
            }.start()
            // "fr" is sent once "en" leads: its fetch is at the origin (counted before the delay).
            let deadline = Date().addingTimeInterval(10)
            while language == "en", try origin.count(target) < 1, Date() < deadline { usleep(5_000) }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 20), .success)
        XCTAssertTrue(box.responses["en"]?.text.hasPrefix("Accept-Language=en") ?? false)
        XCTAssertTrue(box.responses["fr"]?.text.hasPrefix("Accept-Language=fr") ?? false)
        XCTAssertEqual(try origin.count(target), 2)
    }

    func testANonStorableResponseReleasesTheWaitersToFetchOnTheirOwn() throws {
        let target = "/nostampede?delay=0.3&cc=no-store&size=100"
        let responses = concurrentGets(target, count: 5)
        XCTAssertEqual(responses.compactMap { $0?.status }, [200, 200, 200, 200, 200])
        XCTAssertEqual(try origin.count(target), 5)
    }
}
