import Foundation
import XCTest

/// A `cache_post` route with a disk tier: the queries' answers are kept in
/// files too, and a write's invalidation of them deletes those files off
/// the worker's loop (the debug build traps on an unlink made there).
final class PostCachingOnDiskTests: DiskEndToEndCase {
    private func post(_ c: HTTPClient, _ body: String) throws -> HTTPResponse {
        try c.send("POST /echo?api=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        return try c.readResponse(method: "POST")
    }

    func testAWriteInvalidatesTheQueriesKeptOnDisk() throws {
        let larder = try start(["--config", try config("[[route]]\nprefix = \"/echo\"\ncache_post = true\n")])
        let c = try larder.client()
        let queries = (1...3).map { #"{"query":"{ user(id: \#($0)) { name } }"}"# }
        for query in queries { XCTAssertEqual(try post(c, query).text, query) }
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().count < queries.count && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, queries.count, "each query's answer in a file")
        XCTAssertTrue(try post(c, queries[0]).header("cache-status")?.contains("; hit") ?? false)

        let mutation = #"{"query":"mutation { rename(id: 1, name: \"x\") }"}"#
        let written = try post(c, mutation)
        XCTAssertEqual(written.status, 200)
        XCTAssertEqual(written.text, mutation)
        XCTAssertEqual(try origin.count("/echo?api=1"), 4)
        // The stored queries are gone at once, their files soon after.
        let again = try post(c, queries[1])
        XCTAssertTrue(again.header("cache-status")?.hasPrefix("larder; fwd=uri-miss; stored") ?? false, "fetched again: \(again.header("cache-status") ?? "-")")
        XCTAssertEqual(try origin.count("/echo?api=1"), 5)
        while cacheFiles().count != 1 && Date() < deadline.addingTimeInterval(10) { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 1, "the invalidated answers' files deleted (the new one written)")
        XCTAssertEqual(try larder.client().get("/alive?size=3").status, 200, "the worker still serves")
    }
}
