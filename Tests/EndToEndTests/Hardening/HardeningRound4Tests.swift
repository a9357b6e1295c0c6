import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 59: defects found by trying Larder as an attacker and as a new
/// operator would. Each test failed on the code before its fix.

/// Every response written to the disk tier stayed in memory: the writer's
/// queue kept each op it had popped (the record and its whole body) until
/// 1,024 had gone by, so RSS grew by every stored body (3.4 GB after 800
/// objects of 4 MiB with memory_limit = "256MiB").
final class DiskStoreMemoryEndToEndTests: DiskEndToEndCase {
    func testResidentMemoryStaysNearTheMemoryLimitWhateverTheDiskHolds() throws {
        try skipMemoryFiguresUnderSanitizers()
        let larder = try start(["--memory-limit", "32MiB"])
        let pid = larder.child.process.processIdentifier
        let c = try larder.client()
        let size = 1 << 20
        // Warm-up: the memory tier full, the allocator's pools in use.
        for i in 0..<48 { XCTAssertEqual(try c.get("/store/\(i)?size=\(size)").body.count, size) }
        let before = memory(of: pid).rss
        for i in 48..<288 { XCTAssertEqual(try c.get("/store/\(i)?size=\(size)").body.count, size) }
        // Every object reached the disk (so the writer popped every op).
        let stats = try JSONSerialization.jsonObject(with: Data(try larder.adminClient().get("/stats").body)) as? [String: Any]
        let disk = try XCTUnwrap(stats?["disk"] as? [String: Any])
        let deadline = Date().addingTimeInterval(20)
        var objects = disk["objects"] as? Int ?? 0
        while objects < 280 && Date() < deadline {
            usleep(100_000)
            let s = try JSONSerialization.jsonObject(with: Data(try larder.adminClient().get("/stats").body)) as? [String: Any]
            objects = (s?["disk"] as? [String: Any])?["objects"] as? Int ?? 0
        }
        XCTAssertGreaterThanOrEqual(objects, 280, "the disk tier holds them")
        let grown = memory(of: pid).rss - before
        // 240 MiB went to disk: kept, it would be 240 MiB more.
        XCTAssertLessThan(grown, 96 << 20, "RSS grew by \(grown >> 20) MiB while 240 MiB were stored on disk")
        XCTAssertEqual(try c.get("/store/50?size=\(size)").header("cache-status")?.hasPrefix("larder; hit"), true,
                       "and they are hits from the disk")
    }
}

/// The POST cache fails closed: only a body read positively as queries is
/// cached. A mutation whose body was not understood (too deep, NaN, a byte
/// order mark, a raw GraphQL document, a listed method with deep params, a
/// persisted query named by its hash) was cached by its bytes: the second
/// write never reached the upstream.
final class PostCacheFailsClosedEndToEndTests: ConfiguredTestCase {
    private func post(_ c: HTTPClient, _ target: String, _ body: [UInt8], type: String = "application/json") throws -> HTTPResponse {
        try c.send(Array("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\n\r\n".utf8)
                   + body)
        return try c.readResponse(method: "POST")
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }

    private func startCaching(_ extra: String = "") throws -> (Origin, LarderProcess) {
        let origin = try startOrigin()
        let config = try writeConfig("""
            upstream = "\(origin.url)"
            [[route]]
            prefix = "/echo"
            cache_post = true
            normalize_json = true
            uncached_rpc_methods = ["send"]
            \(extra)
            """)
        return (origin, try startLarder(upstream: origin.url, ["--config", config]))
    }

    func testEveryKindOfBodyNotReadAsQueriesReachesTheUpstreamEachTime() throws {
        let (origin, larder) = try startCaching()
        let c = try larder.client()
        let deep = String(repeating: #"{"a":"#, count: 70) + "1" + String(repeating: "}", count: 70)
        let kinds: [(String, [UInt8], String)] = [
            ("deep", Array((#"{"query":"mutation { like(id: 1) }","variables":"# + deep + "}").utf8), "application/json"),
            ("nan", Array(#"{"query":"mutation { like(id: 1) }","variables":{"x":NaN}}"#.utf8), "application/json"),
            ("bom", [0xEF, 0xBB, 0xBF] + Array(#"{"query":"mutation { like(id: 1) }"}"#.utf8), "application/json"),
            ("raw", Array("mutation { like(id: 1) }".utf8), "application/graphql"),
            ("rpc", Array((#"{"jsonrpc":"2.0","method":"send","params":"# + deep + #","id":1}"#).utf8), "application/json"),
            ("apq", Array(#"{"operationName":"Like","extensions":{"persistedQuery":{"version":1,"sha256Hash":"ab12"}}}"#.utf8),
             "application/json"),
            ("other", Array(#"{"search":"shoes"}"#.utf8), "application/json"),
        ]
        for (name, body, type) in kinds {
            let target = "/echo?kind=\(name)"
            for _ in 0..<2 {
                let r = try post(c, target, body, type: type)
                XCTAssertEqual(r.status, 200, name)
                XCTAssertTrue(r.body == body, "\(name): the upstream's own answer")
                XCTAssertFalse(isHit(r), "\(name): \(r.header("cache-status") ?? "")")
            }
            XCTAssertEqual(try origin.count(target), 2, "\(name): both writes reached the upstream")
        }
        // Such a body is an unsafe request: it invalidates the URL's stored queries.
        let target = "/echo?kind=mixed"
        let query = Array(#"{"query":"{ user(id: 1) { name } }"}"#.utf8)
        _ = try post(c, target, query)
        XCTAssertTrue(isHit(try post(c, target, query)))
        _ = try post(c, target, kinds[1].1)
        XCTAssertFalse(isHit(try post(c, target, query)), "the write invalidated the stored query")
    }

    func testPersistedQueriesAreCachedOnlyWhenTheRouteSaysSo() throws {
        let (origin, larder) = try startCaching("cache_persisted_queries = true")
        let c = try larder.client()
        let body = Array(#"{"operationName":"Q","extensions":{"persistedQuery":{"version":1,"sha256Hash":"cd34"}}}"#.utf8)
        _ = try post(c, "/echo?apq=1", body)
        XCTAssertTrue(isHit(try post(c, "/echo?apq=1", body)))
        XCTAssertEqual(try origin.count("/echo?apq=1"), 1)
    }

    /// `{"id":1,"\u0069d":2}` (id 2 for a last-wins parser) and
    /// `{"\u0069d":2,"id":1}` (id 1) were normalised to one key: the second
    /// client got the first one's answer.
    func testBodiesThatRepeatAKeyNeverShareAnAnswer() throws {
        let (origin, larder) = try startCaching()
        let c = try larder.client()
        let first = Array(#"{"query":"query ($id: ID) { user(id: $id) { name } }","variables":{"id":1,"\u0069d":2}}"#.utf8)
        let second = Array(#"{"query":"query ($id: ID) { user(id: $id) { name } }","variables":{"\u0069d":2,"id":1}}"#.utf8)
        XCTAssertTrue(try post(c, "/echo?dup=1", first).body == first)
        let other = try post(c, "/echo?dup=1", second)
        XCTAssertTrue(other.body == second, "its own answer, never the first body's")
        XCTAssertFalse(isHit(other))
        XCTAssertEqual(try origin.count("/echo?dup=1"), 2)
        // Keys written with escapes are the same keys: one query, one entry.
        let plain = Array(#"{"query":"{ a }","variables":{"id":1}}"#.utf8)
        let escaped = Array(#"{"variables":{"\u0069d":1},"query":"{ a }"}"#.utf8)
        _ = try post(c, "/echo?esc=1", plain)
        XCTAssertTrue(isHit(try post(c, "/echo?esc=1", escaped)), "decoded keys compared")
    }
}

/// A stored zstd body (Vary: Accept-Encoding) answered clients that do not
/// take zstd: the variant key told clients apart by gzip and br alone.
final class VaryCodingEndToEndTests: ConfiguredTestCase {
    func testABodyInACodingTheClientDoesNotTakeNeverAnswersIt() throws {
        let (origin, larder) = try start(config: "")
        for coding in ["zstd", "deflate"] {
            let target = "/coded/\(coding)?extra=Content-Encoding:\(coding);Vary:Accept-Encoding"
            let filled = try larder.client().get(target, headers: ["Accept-Encoding: \(coding)"])
            XCTAssertEqual(filled.header("content-encoding"), coding)
            let again = try larder.client().get(target, headers: ["Accept-Encoding: \(coding)"])
            XCTAssertTrue(again.header("cache-status")?.hasPrefix("larder; hit") ?? false, "\(coding): a hit for a client that takes it")
            var fetches = 1
            for accept in [["Accept-Encoding: identity"], [], ["Accept-Encoding: gzip"]] {
                let r = try larder.client().get(target, headers: accept)
                XCTAssertFalse(r.header("cache-status")?.contains("; hit") ?? false,
                               "\(coding) to \(accept): \(r.header("cache-status") ?? "")")
                fetches += 1
                XCTAssertEqual(try origin.count(target), fetches, "\(coding) to \(accept): fetched for it")
            }
        }
    }
}

/// A middle piece stored, a plain GET makes Larder ask the upstream for the
/// two sides (`bytes=0-39,60-`). An upstream that answered that with an
/// error had it passed to the client, and stored for every later GET,
/// though it serves a plain GET; malformed parts left the URL cut for good.
final class MadeUpRangeEndToEndTests: ConfiguredTestCase {
    private func storePiece(_ larder: LarderProcess, _ target: String) throws {
        let piece = try larder.client().get(target, headers: ["Range: bytes=40-59"])
        XCTAssertEqual(piece.status, 206, target)
    }

    func testAnErrorToARangeLarderMadeUpIsNeverTheClientsAnswer() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        for status in [400, 416, 500, 501] {
            let target = "/madeup/s\(status)?size=100&etag=m\(status)&ranges=1&range_error=\(status)"
            let whole = try HTTPClient(port: origin.port).get(target).body
            XCTAssertEqual(whole.count, 100)
            try storePiece(larder, target)
            for attempt in 0..<2 {
                let r = try larder.client().get(target)
                XCTAssertEqual(r.status, 200, "\(status), attempt \(attempt): \(r.text.prefix(60))")
                XCTAssertTrue(r.body == whole, "\(status), attempt \(attempt): the representation, whole")
            }
        }
    }

    func testMalformedPartsNeverLeaveTheURLUnfetchable() throws {
        let (origin, larder) = try start(config: "range_fill = false\n")
        for bad in ["truncate", "boundary", "unit", "length"] {
            let target = "/badparts/\(bad)?size=100&etag=b\(bad)&ranges=1&multipart_bad=\(bad)"
            let whole = try HTTPClient(port: origin.port).get(target).body
            try storePiece(larder, target)
            // The first answer may be cut (its head went out before the
            // parts showed what they are); never a body spliced wrong.
            if let first = try? larder.client().get(target) {
                XCTAssertTrue(first.status != 200 || first.body == whole, "\(bad): \(first.status)")
            }
            // Nothing of it was stored as the whole.
            let stored = try larder.client().get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            XCTAssertTrue(stored.status != 200 || stored.body == whole, "\(bad): a stored whole of bad parts")
            // And the URL is not left broken: it is fetched plainly.
            for attempt in 0..<2 {
                let r = try larder.client().get(target)
                XCTAssertEqual(r.status, 200, "\(bad), attempt \(attempt)")
                XCTAssertTrue(r.body == whole, "\(bad), attempt \(attempt): whole")
            }
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
