import Foundation
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 16: defects found by trying Larder as an attacker would. Each test
/// failed on the code before the fix.
final class FieldBytesEndToEndTests: ProxyTestCase {
    /// obs-text (0x80-0xFF) in field values reaches the origin, the client
    /// and the stored copy byte for byte (it was replaced by U+FFFD).
    func testFieldValueBytesAboveASCIIPassUnchanged() throws {
        let target = "/bytes?extra=Content-Disposition:filename%3D%22caf%E9.txt%22"
        let request = Array("GET \(target) HTTP/1.1\r\nHost: a\r\nX-Name: caf".utf8) + [0xE9, 0x20, 0xFF] + Array("\r\n\r\n".utf8)
        for round in ["miss", "hit"] {
            let c = try larder.client()
            try c.send(request)
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200, round)
            // The harness reads one scalar per byte: U+00E9 is the byte 0xE9.
            XCTAssertEqual(r.header("content-disposition"), "filename=\"caf\u{E9}.txt\"", round)
            if round == "hit" { XCTAssertTrue(r.header("cache-status")?.contains("hit") ?? false) }
        }
        // The origin (python) reads field bytes as latin-1, one character per byte.
        XCTAssertEqual(try originHeaders(target)["x-name"], "caf\u{E9} \u{FF}")
    }
}

/// Dot segments are removed once, before routing and keying, and the
/// upstream receives exactly that path.
final class DotSegmentEndToEndTests: ConfiguredTestCase {
    func testDotSegmentsCannotClimbAboveTheUpstreamBasePath() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url + "/norm/api")
        for target in ["/../secret", "/%2e%2e/secret", "/a/../../secret"] {
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\nCache-Control: no-cache\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200, target)
        }
        XCTAssertEqual(try origin.count("/norm/secret"), 0, "nothing outside the base path")
        XCTAssertEqual(try origin.count("/norm/api/secret"), 3)
    }

    func testDotSegmentsCannotCarryAPrivateResponseIntoAnotherRoute() throws {
        let (origin, larder) = try start(config: """
            [[route]]
            prefix = "/static/"
            ignore_upstream_cache_control = true
            default_ttl = "1h"
            """)
        for target in ["/static/../private/r1?cc=private", "/static/%2E%2e/private/r1?cc=private"] {
            for user in ["alice", "bob"] {
                let c = try larder.client()
                try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer \(user)\r\n\r\n")
                let r = try c.readResponse()
                XCTAssertEqual(r.status, 200)
                XCTAssertFalse(r.header("cache-status")?.contains("hit") ?? true, "\(user) must not get another user's response")
            }
        }
        XCTAssertEqual(try origin.count("/private/r1?cc=private"), 4, "every request went to the origin under its real path")
        // A dot segment behind an encoded slash or a backslash: the origin
        // may decode it into one, so it is refused rather than guessed.
        for target in ["/static/..%2Fprivate/r1", "/static/..%5cprivate/r1", "/static/..\\private/r1"] {
            let c = try larder.client()
            try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 400, target)
        }
    }
}

/// Upstream framing (RFC 9112 section 6.3): Transfer-Encoding wins over
/// Content-Length, which is removed; a bad Content-Length is a 502.
final class UpstreamFramingEndToEndTests: ProxyTestCase {
    private func rawTarget(_ path: String, _ response: String) -> String {
        path + "?raw=" + response.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    func testContentLengthWithTransferEncodingIsNotForwarded() throws {
        let target = rawTarget("/split", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
                                   + "Cache-Control: max-age=60\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        let c = try larder.client()
        // A request pipelined behind it must get its own answer.
        try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\nGET /after HTTP/1.1\r\nHost: a\r\n\r\n")
        let first = try c.readResponse()
        XCTAssertEqual(first.text, "hello")
        XCTAssertNotEqual(first.header("content-length"), "3", "the length the body does not have is gone")
        let second = try c.readResponse()
        XCTAssertEqual(second.status, 200)
        XCTAssertNotNil(second.header("x-origin-count"), "the pipelined request was answered by the origin, not by leftover bytes")
        // The stored copy is framed by the bytes received.
        let hit = try c.get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(hit.header("content-length"), "5")
        XCTAssertEqual(hit.text, "hello")
    }

    func testABareCRInAnUpstreamValueCannotSplitTheResponse() throws {
        let target = rawTarget("/bare-cr", "HTTP/1.1 200 OK\r\nX-Split: a\rInjected: 1\r\nContent-Length: 2\r\n\r\nok")
        let r = try larder.client().get(target)
        XCTAssertEqual(r.header("x-split"), "a Injected: 1", "the CR became a space")
        XCTAssertEqual(r.text, "ok")
    }

    func testAnInvalidOrConflictingContentLengthIsA502() throws {
        for (i, length) in ["Content-Length: 3, 5", "Content-Length: 3\r\nContent-Length: 5", "Content-Length: -1"].enumerated() {
            let target = rawTarget("/badlength\(i)", "HTTP/1.1 200 OK\r\n\(length)\r\nCache-Control: max-age=60\r\n\r\nhello")
            let r = try larder.client().get(target)
            XCTAssertEqual(r.status, 502, length)
        }
    }

    /// Larder asks for no upgrade, so an upstream's 101 is a broken answer
    /// (502 at once), not an interim one after which a final head is awaited
    /// until `upstream_timeout`.
    func testAnUnaskedSwitchingProtocolsIsA502() throws {
        let target = rawTarget("/switch", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\nxx")
        let r = try larder.client().get(target)
        XCTAssertEqual(r.status, 502)
        XCTAssertTrue(r.text.contains("101 Switching Protocols"), r.text)
        XCTAssertEqual(try larder.client().get("/after-switch").status, 200, "the worker serves on")
    }
}

/// A figure from the admin API's /stats.
func statsFigure(_ larder: LarderProcess, _ name: String) throws -> Int {
    let r = try larder.adminClient().get("/stats")
    let json = try JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any]
    return json?[name] as? Int ?? -1
}

/// Waits (bounded) until a /stats figure reaches `value`; returns the last reading.
func waitForStats(_ larder: LarderProcess, _ name: String, atLeast value: Int, timeout: TimeInterval = 10) throws -> Int {
    let deadline = Date().addingTimeInterval(timeout)
    var figure = try statsFigure(larder, name)
    while figure < value && Date() < deadline {
        usleep(20_000)
        figure = try statsFigure(larder, name)
    }
    return figure
}

/// A client that pipelines and never reads cannot make Larder queue
/// answers without bound; one that reads nothing for send_timeout is dropped.
final class UnreadOutputTests: ConfiguredTestCase {
    func testAnswersWaitWhileTheClientLeavesOutputUnread() throws {
        let (_, larder) = try start(config: "send_timeout = \"30s\"\n")
        let target = "/big-hit?size=131072"
        XCTAssertEqual(try larder.client().get(target).body.count, 131_072)
        let hitsBefore = try statsFigure(larder, "hits")
        let c = try larder.client()
        let count = 200  // 25 MiB of answers, about 10 KiB of requests
        try c.send(String(repeating: "GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n", count: count))
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "output_pauses", atLeast: 1), 1, "answers held back")
        let answered = try statsFigure(larder, "hits") - hitsBefore
        XCTAssertLessThan(answered, count / 2, "answers stop at the output bound (plus socket buffers), not at the end of the input")
        // Reading resumes the answers, in order and complete.
        for i in 0..<count {
            let r = try c.readResponse()
            XCTAssertEqual(r.body.count, 131_072, "answer \(i)")
        }
    }

    func testAClientThatReadsNothingIsDisconnectedAfterSendTimeout() throws {
        let (_, larder) = try start(config: "send_timeout = \"1s\"\n")
        let target = "/big-hit?size=131072"
        _ = try larder.client().get(target)
        let c = try larder.client()
        try c.send(String(repeating: "GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n", count: 100))
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "send_timeouts", atLeast: 1), 1)
        XCTAssertTrue(c.isClosedByPeer())
        XCTAssertEqual(try larder.client().get(target).status, 200, "others are still served")
    }
}

/// Idle admin connections cannot use up the process's descriptors.
final class AdminConnectionLimitTests: ConfiguredTestCase {
    func testAdminConnectionsAreBoundedAndUnauthenticatedIdleOnesClosed() throws {
        let (_, larder) = try start(config: "admin_max_connections = 4\n")
        let idle = try (0..<4).map { _ in try larder.adminClient() }
        // Past the limit: 503 and closed (the idle ones hold every slot).
        let refused = try larder.adminClient()
        try refused.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        XCTAssertEqual(try refused.readResponse().status, 503)
        XCTAssertEqual(try larder.client().get("/still-serving").status, 200, "the proxy keeps accepting")
        // Unauthenticated idle connections are closed after a few seconds.
        for c in idle { XCTAssertTrue(c.isClosedByPeer()) }
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "admin_refused_connections"), 1)
    }
}

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

/// max_connections is one count across workers; a disk file cut short
/// behind Larder's back is dropped, not served short.
final class SharedLimitsAndDiskFilesTests: ConfiguredTestCase {
    func testMaxConnectionsIsOneCountAcrossWorkers() throws {
        let (_, larder) = try start(config: "max_connections = 100\n")
        var clients: [HTTPClient] = []
        for i in 0..<100 {
            let c = try larder.client()
            XCTAssertEqual(try c.get("/conn?\(i)").status, 200, "connection \(i) of 100")
            clients.append(c)
        }
        XCTAssertEqual(try larder.client().get("/conn-over").status, 503, "the 101st is refused")
        clients.removeAll()
    }

    func testOneConnectionMeansOneAcrossWorkers() throws {
        // Split per worker, a limit of 1 let each of the 2 workers take one.
        let (_, larder) = try start(config: "max_connections = 1\n")
        let first = try larder.client()
        XCTAssertEqual(try first.get("/only").status, 200)
        for i in 0..<6 {
            XCTAssertEqual(try larder.client().get("/over-\(i)").status, 503, "connection \(i + 2) while one is open")
        }
        XCTAssertEqual(try first.get("/only-again").status, 200)
    }

    func testABodyFileTruncatedWhileRunningIsDroppedAndFetchedAgain() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-trunc-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let (origin, larder) = try start(config: "cache_dir = \"\(directory)\"\nmax_object_size = \"64KiB\"\n")
        let target = "/truncated?size=3000000"
        let original = try larder.client().get(target)
        XCTAssertEqual(original.body.count, 3_000_000)
        func files() -> [String] {
            (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix(".lrd") }.map { directory + "/" + $0 }
        }
        let deadline = Date().addingTimeInterval(10)
        while files().isEmpty && Date() < deadline { usleep(20_000) }
        let hit = try larder.client().get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "served from the file")
        let path = try XCTUnwrap(files().first)
        XCTAssertEqual(truncate(path, 1_000_000), 0)
        let again = try larder.client().get(target)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.body, original.body, "a whole body, fetched again")
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertNotNil(larder.child.waitFor("shorter than recorded"), "logged")
    }
}

/// Request fields that rewrite the origin's answer do not reach it unkeyed.
final class UnkeyedFieldTests: ConfiguredTestCase {
    private let overrides = ["Forwarded: host=evil.example", "X-Original-URL: /admin", "X-Rewrite-URL: /admin",
                             "X-HTTP-Method-Override: DELETE", "X-Host: evil.example", "X-Forwarded-Scheme: nothttps"]

    func testURLAndMethodOverridesAreDroppedByDefault() throws {
        let (origin, larder) = try start(config: "")
        XCTAssertEqual(try larder.client().get("/poison", headers: overrides).status, 200)
        let seen = Set((try origin.lastRequest("/poison")["headers"] as? [[String]] ?? []).map { $0[0] })
        for field in ["forwarded", "x-original-url", "x-rewrite-url", "x-http-method-override", "x-host", "x-forwarded-scheme"] {
            XCTAssertFalse(seen.contains(field), "\(field) reached the origin")
        }
    }

    func testAPassedFieldGoesUpstreamAndKeysTheResponse() throws {
        let (origin, larder) = try start(config: "pass_request_headers = [\"X-Original-URL\"]\n")
        let c = try larder.client()
        XCTAssertEqual(try c.get("/passed", headers: ["X-Original-URL: /a"]).status, 200)
        let fields = try origin.lastRequest("/passed")["headers"] as? [[String]] ?? []
        XCTAssertTrue(fields.contains { $0 == ["x-original-url", "/a"] })
        XCTAssertFalse(fields.contains { $0[0] == "forwarded" })
        XCTAssertTrue(try c.get("/passed", headers: ["X-Original-URL: /a"]).header("cache-status")?.contains("hit") ?? false)
        let other = try c.get("/passed", headers: ["X-Original-URL: /b"])
        XCTAssertFalse(other.header("cache-status")?.contains("hit") ?? true, "another value is another response")
        XCTAssertEqual(try origin.count("/passed"), 2)
    }

    func testPassRequestHeadersMustBeFieldNames() throws {
        let path = try writeConfig("pass_request_headers = [\"X Bad\"]\n")
        let check = try ChildProcess(Paths.larder, ["check-config", "--config", path])
        XCTAssertEqual(check.waitForExit(), 78)
        XCTAssertNotNil(check.waitFor("pass_request_headers: expected a list of request header names"))
        check.stop()
    }
}

/// A purge whose files cannot be deleted says so instead of `{"purged": 1}`.
final class PurgeFailureTests: ConfiguredTestCase {
    private func chattr(_ flag: String, _ path: String) throws -> Int32? {
        let child = try ChildProcess("/usr/bin/env", ["chattr", flag, path])
        defer { child.stop() }
        return child.waitForExit()
    }

    func testAPurgeThatCannotDeleteItsFileReportsTheFailure() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-ro-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let (_, larder) = try start(config: "cache_dir = \"\(directory)\"\n")
        let target = "/undeletable?size=100"
        XCTAssertEqual(try larder.client().get(target).status, 200)
        func files() -> [String] {
            (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix(".lrd") }.map { directory + "/" + $0 }
        }
        let deadline = Date().addingTimeInterval(10)
        while files().isEmpty && Date() < deadline { usleep(20_000) }
        let path = try XCTUnwrap(files().first)
        // Root ignores permissions: an immutable file is one root cannot delete.
        guard try chattr("+i", path) == 0 else { throw XCTSkip("chattr +i is not available on this file system") }
        addTeardownBlock { _ = try? self.chattr("-i", path) }
        // Through the admin API, as the command line tool sends it: it fails with the message.
        let cli = try ChildProcess(Paths.larder, ["purge", target, "--admin", larder.adminURL])
        XCTAssertEqual(cli.waitForExit(), 1)
        XCTAssertNotNil(cli.waitFor("purge failed \\(500\\): .*\"failed\": 1.*cannot delete"), cli.stderr)
        cli.stop()
        // Once the file can go, the next purge (of anything) deletes it.
        XCTAssertEqual(try chattr("-i", path), 0)
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?url=%2Fsomething-else").status, 200)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "the purge holds across a restart now")
    }
}
