import Foundation
import XCTest

/// Server-Sent Events and `Incremental: ?1` (RFC 10036) responses reach the
/// client as each piece arrives (the origin sends the first piece, then
/// waits until the client, having it, releases the rest: a Larder that held
/// the body back would leave the origin waiting, its gate timing out), and
/// are never stored; a request body sent with `Incremental: ?1` goes upstream
/// as it comes.
final class IncrementalStreamTests: ProxyTestCase {
    private func gate(_ target: String) throws -> String? { try origin.lastRequest(target)["gate"] as? String }

    private func release(_ target: String) -> String {
        "\(origin.url)/__release?key=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    func testAnEventStreamReachesAnHTTP1ClientPieceByPieceAndIsNotStored() throws {
        for (name, field) in [("sse", "type=text/event-stream"), ("incremental", "extra=Incremental:%3F1")] {
            let target = "/stream/\(name)?chunked=1&gate=1&size=7000&cc=max-age%3D60&\(field)"
            let first = Array(try HTTPClient(port: origin.port).get("/stream/\(name)?size=7000").body.prefix(200))
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            let head = try XCTUnwrap(try c.read(until: "\r\n\r\n"), name)
            XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
            XCTAssertNotNil(try c.read(until: String(decoding: first, as: UTF8.self)), "\(name): the first piece, before the rest is sent")
            XCTAssertEqual(try HTTPClient(port: origin.port).get("/__release?key="
                + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!).status, 200)
            XCTAssertNotNil(try c.read(until: "\r\n0\r\n\r\n"), "\(name): then the rest, and the end")
            XCTAssertEqual(try gate(target), "released", "\(name): the client had the first piece while the origin waited")
            let again = try larder.client().get(target)
            XCTAssertEqual(again.body.count, 7000)
            XCTAssertFalse(again.header("cache-status")?.contains("hit") ?? true, "\(name): a stream is never stored")
            XCTAssertEqual(try origin.count(target), 2, name)
        }
    }

    func testOverHTTP2TooEachPieceGoesAtOnce() throws {
        let target = "/stream/h2?chunked=1&gate=1&size=7000&type=text/event-stream"
        let r = try runProgram(["/usr/bin/python3", Paths.h2client, String(larder.port), "first", target, release(target)])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("FIRST "), r.stdout)
        XCTAssertTrue(r.stdout.contains("STREAM 1 200 7000 "), r.stdout)
        XCTAssertEqual(try gate(target), "released")
    }

    func testARequestBodySentIncrementallyGoesUpstreamAsItComes() throws {
        // A chunked upload whose client says Incremental: ?1 is not held
        // (request_buffer_size) before the upstream request starts: its
        // first chunk reaches the origin while the client still sends.
        let c = try larder.client()
        try c.send("POST /echo?incremental-upload=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nIncremental: ?1\r\n"
                   + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
        // (max_concurrent counts a request from its head on, before its body is read.)
        func begun() throws -> Int { try origin.lastRequest("/echo?incremental-upload=1")["max_concurrent"] as? Int ?? 0 }
        let deadline = Date().addingTimeInterval(10)
        while try begun() == 0 && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(try begun(), 1, "the upstream request began before the body ended")
        try c.send("6\r\n world\r\n0\r\n\r\n")
        XCTAssertEqual(try c.readResponse(method: "POST").text, "hello world")
    }
}
