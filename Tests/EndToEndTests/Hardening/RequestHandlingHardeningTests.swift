import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

// Requests that are legal but unusual, or slow: asterisk forms, GETs with bodies, conditional writes, slow and endless uploads.

/// Request forms and bodies: OPTIONS *, GET with a body, slow uploads, and
/// no replay once the upstream has answered.
final class RequestHandlingTests: ConfiguredTestCase {
    func testOptionsAsteriskIsForwardedInAsteriskForm() throws {
        let (origin, larder) = try start(config: "")
        let c = try larder.client()
        try c.send("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertEqual(try origin.count("*"), 1)
        XCTAssertEqual(try origin.lastRequest("*")["method"] as? String, "OPTIONS")
    }

    func testAGetWithABodyIsNeitherStoredNorAnsweredFromTheCache() throws {
        let (origin, larder) = try start(config: "")
        let c = try larder.client()
        try c.send("GET /with-body HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
        XCTAssertEqual(try c.readResponse().status, 200)
        let plain = try c.get("/with-body")
        XCTAssertFalse(plain.header("cache-status")?.contains("hit") ?? true, "the answer to a GET with a body was not stored")
        XCTAssertEqual(try origin.count("/with-body"), 2)
        // A stored response is not the answer to a GET whose body may change it.
        XCTAssertTrue(try c.get("/with-body").header("cache-status")?.contains("hit") ?? false)
        try c.send("GET /with-body HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nother")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertEqual(try origin.count("/with-body"), 3)
        XCTAssertEqual(try origin.lastRequest("/with-body")["body_length"] as? Int, 5)
        XCTAssertTrue(try c.get("/with-body").header("cache-status")?.contains("hit") ?? false, "and it did not invalidate it")
    }

    func testAConditionalPutKeepsItsIfNoneMatch() throws {
        let (origin, larder) = try start(config: "")
        let r = try larder.client().request("PUT", "/create-only", headers: ["If-None-Match: *"])
        XCTAssertEqual(r.status, 200)
        let fields = try origin.lastRequest("/create-only")["headers"] as? [[String]] ?? []
        XCTAssertTrue(fields.contains { $0 == ["if-none-match", "*"] }, "\(fields)")
    }

    func testAnUpstreamWhoseHeadIsTooLargeIsAskedOnce() throws {
        let (origin, larder) = try start(config: "")
        let r = try larder.client().get("/huge-head?bighead=1000000")
        XCTAssertEqual(r.status, 502)
        XCTAssertEqual(try origin.count("/huge-head?bighead=1000000"), 1, "no retry once response bytes arrived")
    }

    /// Sends `body` one byte every 150 ms (an upload that makes steady progress).
    private func slowPost(_ c: HTTPClient, _ target: String, _ body: String) throws {
        try c.send("POST \(target) HTTP/1.1\r\nHost: a\r\nContent-Length: \(body.utf8.count)\r\n\r\n")
        for byte in body.utf8 {
            usleep(150_000)
            try c.send([byte])
        }
    }

    func testASteadyUploadLongerThanUpstreamTimeoutSucceeds() throws {
        // Held whole (the default), and streamed (request_buffer_size = 0).
        for buffering in ["1MiB", "0"] {
            let (_, larder) = try start(config: "upstream_timeout = \"1s\"\nrequest_buffer_size = \"\(buffering)\"\n")
            let c = try larder.client()
            try slowPost(c, "/echo?slow-\(buffering)", "0123456789abcd")  // about 2 s
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200, "request_buffer_size = \(buffering)")
            XCTAssertEqual(r.text, "0123456789abcd")
        }
    }

    func testSlowUploadsDoNotHoldUpstreamConnections() throws {
        let (origin, larder) = try start(config: "upstream_max_connections = 2\nupstream_timeout = \"3s\"\n")
        let uploads = try (0..<8).map { i -> HTTPClient in
            let c = try larder.client()
            try c.send("POST /echo?upload=\(i) HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nab")
            return c
        }
        // Every worker's upstream connection would be held by an upload.
        let r = try larder.client().get("/unrelated-miss")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(try origin.count("/echo?upload=0"), 0, "an incomplete body has not gone upstream")
        for (i, c) in uploads.enumerated() {
            try c.send("cdefghij")
            XCTAssertEqual(try c.readResponse().text, "abcdefghij", "upload \(i)")
        }
    }
}

/// Uploads that never finish streamed upstream once the held ones passed
/// request_buffer_total, each holding an upstream connection: a GET of a
/// new URL then waited for one that never came free. Streaming uploads
/// now have a bounded share of the upstream connections.
final class SlowUploadEndToEndTests: ConfiguredTestCase {
    func testUploadsThatNeverFinishLeaveRoomForMisses() throws {
        let (origin, larder) = try start(config: """
            upstream_max_connections = 4
            request_buffer_total = "64KiB"
            upstream_timeout = "120s"
            """)
        // (With the uploads holding every connection until upstream_timeout,
        // a miss would wait past the test client's 20 s read timeout.)
        var uploads: [HTTPClient] = []
        for i in 0..<12 {
            let c = try larder.client()
            try c.send("POST /upload/\(i) HTTP/1.1\r\nHost: a\r\nContent-Length: 1048576\r\n\r\n" + String(repeating: "u", count: 70_000))
            uploads.append(c)
        }
        // Until every upload is taken (streamed upstream, or waiting for its
        // turn), bounded: each is counted as it goes past the total.
        let deadline = Date().addingTimeInterval(10)
        var streamed = 0
        while streamed < 12 && Date() < deadline {
            let stats = try JSONSerialization.jsonObject(with: Data(try larder.adminClient().get("/stats").body)) as? [String: Any]
            streamed = stats?["streamed_request_bodies"] as? Int ?? 0
            if streamed < 12 { usleep(20_000) }
        }
        XCTAssertEqual(streamed, 12, "every upload went past request_buffer_total")
        for i in 0..<4 {
            let r = try larder.client().get("/miss/\(i)?size=10")
            XCTAssertEqual(r.status, 200, "a miss is answered while the uploads hang")
            XCTAssertEqual(try origin.count("/miss/\(i)?size=10"), 1)
        }
        // An upload that finishes is answered whole.
        let done = try larder.client()
        try done.send("POST /upload/done HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
        XCTAssertEqual(try done.readResponse(method: "POST").status, 200)
        withExtendedLifetime(uploads) {}
    }
}

/// Held request bodies had no total bound: 2,000 connections each holding
/// a body just under request_buffer_size took 2 GB. Beyond
/// request_buffer_total, bodies stream as larger ones do, and are counted.
final class HeldBodyTotalTests: ConfiguredTestCase {
    func testBodiesBeyondTheTotalStreamAndAreCounted() throws {
        let (origin, larder) = try start(config: "request_buffer_size = \"1MiB\"\nrequest_buffer_total = \"2MiB\"\n")
        let length = 900 << 10
        let body = [UInt8](repeating: 0x62, count: length)
        var clients: [HTTPClient] = []
        for _ in 0..<5 {
            let c = try larder.client()
            try c.send(Array("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: \(length)\r\n\r\n".utf8) + body[0..<(100 << 10)])
            clients.append(c)
        }
        func streamed() throws -> Int {
            let r = try larder.adminClient().get("/stats")
            return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])?["streamed_request_bodies"] as? Int ?? -1
        }
        let deadline = Date().addingTimeInterval(10)
        while try streamed() < 3 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try streamed(), 3, "two bodies of 900 KiB fit 2 MiB; the other three stream")
        for c in clients {
            try c.send(Array(body[(100 << 10)...]))
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body.count, length, "every body reaches the upstream whole")
        }
        XCTAssertEqual(try origin.count("/echo"), 5)
    }
}
