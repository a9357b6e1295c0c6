import Foundation
import XCTest

/// `compress`: listed types stored gzip encoded, served as stored to
/// clients that take gzip and decoded to the others.
final class CompressEndToEndTests: ConfiguredTestCase {
    private let config = """
        compress = ["application/json", "text/*"]

        [[route]]
        prefix = "/raw/"
        compress = []
        """

    /// gzip's own decoder (not Larder's): what a client would do.
    private func gunzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "gzip -dc"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "gzip -dc")
        return Array(data)
    }

    private func memoryBytes(_ l: LarderProcess) throws -> Int {
        let r = try l.adminClient().get("/stats")
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any])
        return try XCTUnwrap((json["memory"] as? [String: Any])?["bytes"] as? Int)
    }

    /// The gzip copy is made on an I/O thread after the response is stored
    /// as it came: waits (bounded) until the memory tier holds less than
    /// `below` bytes more than `before`, and returns what it holds more.
    private func compressedCost(_ l: LarderProcess, since before: Int, below: Int) throws -> Int {
        let deadline = Date().addingTimeInterval(20)
        var cost = try memoryBytes(l) - before
        while cost >= below && Date() < deadline {
            usleep(10_000)
            cost = try memoryBytes(l) - before
        }
        return cost
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    func testAListedTypeIsStoredCompressedAndServedToEveryClient() throws {
        let (origin, larder) = try start(config: config)
        let c = try larder.client()
        let json = "/api/a?size=10000&etag=j1&cc=max-age=60&extra=Content-Type:application/json"
        let before = try memoryBytes(larder)
        let first = try c.get(json)
        XCTAssertEqual(first.status, 200)
        XCTAssertNil(first.header("content-encoding"), "the fetching client gets what the upstream sent")
        XCTAssertEqual(first.header("etag"), "\"j1\"")
        let plain = first.body
        XCTAssertEqual(plain.count, 10000)
        let jsonCost = try compressedCost(larder, since: before, below: plain.count / 2)

        let gzipped = try c.get(json, headers: ["Accept-Encoding: gzip, deflate"])
        XCTAssertTrue(isHit(gzipped))
        XCTAssertEqual(gzipped.header("content-encoding"), "gzip")
        XCTAssertEqual(gzipped.header("vary"), "Accept-Encoding")
        XCTAssertEqual(gzipped.header("etag"), "W/\"j1\"", "the gzip bytes are not what the strong tag names")
        XCTAssertEqual(gzipped.header("content-type"), "application/json")
        XCTAssertEqual(gzipped.header("content-length"), String(gzipped.body.count))
        XCTAssertLessThan(gzipped.body.count, plain.count / 3)
        XCTAssertTrue(try gunzip(gzipped.body) == plain, "gzip -dc gives the upstream's body")

        let decoded = try c.get(json)
        XCTAssertTrue(isHit(decoded))
        XCTAssertNil(decoded.header("content-encoding"))
        XCTAssertEqual(decoded.header("content-length"), "10000")
        XCTAssertTrue(decoded.body == plain, "decoded for a client without gzip")
        XCTAssertEqual(try c.get(json, headers: ["If-None-Match: \"j1\""]).status, 304, "weak comparison")
        XCTAssertEqual(try c.get(json, headers: ["Range: bytes=0-9"]).body, Array(plain[0..<10]))
        XCTAssertEqual(try origin.count(json), 1, "one stored copy for every client")

        // The same body under a route that turns compress off: stored as it came.
        let raw = "/raw/a?size=10000&cc=max-age=60&extra=Content-Type:application/json"
        let mark = try memoryBytes(larder)
        _ = try c.get(raw)
        let rawCost = try memoryBytes(larder) - mark
        let again = try c.get(raw, headers: ["Accept-Encoding: gzip"])
        XCTAssertTrue(isHit(again))
        XCTAssertNil(again.header("content-encoding"))
        XCTAssertGreaterThan(rawCost, 10000)
        XCTAssertLessThan(jsonCost * 3, rawCost, "the compressed copy takes a fraction of the memory")
    }

    func testWhatMustNotOrNeedNotBeCompressedIsStoredAsItCame() throws {
        let (_, larder) = try start(config: config)
        let c = try larder.client()
        for (target, why) in [("/n/1?size=5000&cc=max-age=60,%20no-transform&extra=Content-Type:text/plain", "no-transform"),
                              ("/n/2?size=5000&extra=Content-Type:image/png", "a type not listed"),
                              ("/n/3?size=5000", "no Content-Type"),
                              ("/raw/4?size=5000&extra=Content-Type:text/plain", "a route with compress = []")] {
            let first = try c.get(target)
            let hit = try c.get(target, headers: ["Accept-Encoding: gzip"])
            XCTAssertTrue(isHit(hit), why)
            XCTAssertNil(hit.header("content-encoding"), why)
            XCTAssertNil(hit.header("vary"), why)
            XCTAssertTrue(hit.body == first.body, why)
        }
        // Already gzip from the upstream: kept as it came, not encoded twice.
        let coded = "/n/5?gzip=always&size=5000&extra=Content-Type:text/plain"
        let first = try c.get(coded, headers: ["Accept-Encoding: gzip"])
        let hit = try c.get(coded, headers: ["Accept-Encoding: gzip"])
        XCTAssertTrue(isHit(hit))
        XCTAssertTrue(hit.body == first.body)
        XCTAssertEqual(hit.header("content-encoding"), "gzip")
    }

    /// A 304 refreshes the compressed copy: still compressed, its ETag still
    /// weak though the origin repeats the strong one.
    func testARevalidatedCompressedCopyStaysCompressedAndWeak() throws {
        let (origin, larder) = try start(config: config)
        let c = try larder.client()
        let target = "/api/r?size=8000&etag=r1&cc=max-age=0&extra=Content-Type:text/csv"
        let before = try memoryBytes(larder)
        let plain = try c.get(target).body
        XCTAssertLessThan(try compressedCost(larder, since: before, below: plain.count / 2), plain.count / 2, "the gzip copy took its place")
        let revalidated = try c.get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertEqual(try origin.lastRequest(target)["method"] as? String, "GET")
        XCTAssertEqual(revalidated.status, 200)
        XCTAssertEqual(revalidated.header("content-encoding"), "gzip")
        XCTAssertEqual(revalidated.header("etag"), "W/\"r1\"")
        XCTAssertTrue(try gunzip(revalidated.body) == plain)
        let decoded = try c.get(target)
        XCTAssertTrue(decoded.body == plain, "decoded for a client without gzip")
        XCTAssertEqual(decoded.header("etag"), "W/\"r1\"")
        XCTAssertEqual(try origin.count(target), 3)
        XCTAssertEqual(try originHeaders(origin, target)["if-none-match"], "W/\"r1\"", "revalidated with the stored tag")
    }

    private func originHeaders(_ origin: Origin, _ target: String) throws -> [String: String] {
        let pairs = try origin.lastRequest(target)["headers"] as? [[String]] ?? []
        return Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { a, _ in a })
    }
}
