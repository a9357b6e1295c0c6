import Foundation
import XCTest

/// `access_log_format = "json"`: one JSON object per request.
final class AccessLogFormatTests: ConfiguredTestCase {
    func testEachRequestIsOneJSONObjectWithTimesResultAndUpstream() throws {
        let log = temporaryPath("larder-access-json") + ".log"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: log) }
        let (origin, l) = try start(config: "access_log = \"\(log)\"\naccess_log_format = \"json\"\n")
        let c = try l.client()
        _ = try c.get("/j?size=100&delay=0.05")
        _ = try c.get("/j?size=100&delay=0.05")
        _ = try c.get("/odd%22%5C?size=3")
        let h2 = try runProgram(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "http://127.0.0.1:\(l.port)/h2?size=3"])
        XCTAssertEqual(h2.status, 0, h2.stderr)
        let old = try l.client()
        try old.send("GET /h10?size=3 HTTP/1.0\r\n\r\n")
        _ = try old.readResponse()
        let written = lines(atLeast: 5, in: log)
        XCTAssertEqual(written.count, 5, written.joined(separator: "\n"))
        let objects = written.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(objects.count, 5, "every line is valid JSON: \(written)")
        guard objects.count == 5 else { return }
        // Lines of both workers in time order (RFC 3339 with milliseconds sorts as text).
        let times = objects.compactMap { $0["time"] as? String }
        XCTAssertEqual(times, times.sorted(), "in time order across workers")
        let protocols = objects.map { "\($0["target"] as? String ?? "-") \($0["protocol"] as? String ?? "-")" }
        XCTAssertEqual(Set(protocols), ["/j?size=100&delay=0.05 HTTP/1.1", "/odd%22%5C?size=3 HTTP/1.1", "/h2?size=3 HTTP/2",
                                        "/h10?size=3 HTTP/1.0"])
        let miss = objects[0], hit = objects[1]
        XCTAssertEqual(miss["method"] as? String, "GET")
        XCTAssertEqual(miss["target"] as? String, "/j?size=100&delay=0.05")
        XCTAssertEqual(miss["client"] as? String, "127.0.0.1")
        XCTAssertEqual(miss["status"] as? Int, 200)
        XCTAssertEqual(miss["bytes"] as? Int, 100)
        XCTAssertEqual(miss["result"] as? String, "miss")
        XCTAssertEqual(miss["cache"] as? String, "fwd=uri-miss; stored")
        XCTAssertEqual(miss["upstream_status"] as? Int, 200)
        XCTAssertGreaterThanOrEqual(miss["upstream_ms"] as? Double ?? 0, 50, "the origin waited 50 ms")
        XCTAssertGreaterThanOrEqual(miss["first_byte_ms"] as? Double ?? 0, 50)
        XCTAssertGreaterThanOrEqual(miss["total_ms"] as? Double ?? 0, miss["first_byte_ms"] as? Double ?? .infinity)
        XCTAssertNotNil(miss["worker"] as? Int)
        XCTAssertNotNil((miss["time"] as? String)?.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/#), "\(miss)")
        XCTAssertEqual(miss["host"] as? String, "127.0.0.1", "the request's Host, as sent")
        XCTAssertEqual(miss["upstream_addr"] as? String, String(origin.url.dropFirst("http://".count)), "the server that answered")
        XCTAssertNil(miss["tls_sni"], "no TLS")
        XCTAssertEqual(hit["upstream_addr"] as? String, "", "a hit: none")
        XCTAssertEqual(hit["result"] as? String, "hit")
        XCTAssertTrue((hit["cache"] as? String)?.hasPrefix("hit; ttl=") ?? false)
        XCTAssertNil(hit["upstream_status"], "a hit asked no upstream")
        XCTAssertLessThan(hit["total_ms"] as? Double ?? .infinity, 50)
        XCTAssertEqual(objects[2]["target"] as? String, "/odd%22%5C?size=3")
    }

    func testAnUnknownFormatIsAConfigError() throws {
        let config = try writeConfig("access_log_format = \"xml\"\n")
        let child = try startChild(Paths.larder, ["check-config", "--config", config])
        XCTAssertEqual(child.waitForExit(timeout: 15), 78)
        XCTAssertNotNil(child.waitFor("access_log_format: expected \"text\", \"json\" or \"custom\"", timeout: 2), child.stderr)
    }
}
