import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Request smuggling and strict parsing, through the real binary: each
/// ambiguous framing is refused (and the connection closed) or normalized
/// before it reaches the upstream, which never sees the client's framing.
final class SmugglingTests: ProxyTestCase {
    /// Sends raw bytes; returns the status line's code and whether the
    /// connection was closed after the answer.
    private func send(_ raw: String) throws -> (status: Int, closed: Bool) {
        let c = try larder.client()
        try c.send(raw)
        let r = try c.readResponse(method: raw.hasPrefix("HEAD") ? "HEAD" : "GET")
        return (r.status, c.isClosedByPeer())
    }

    func testAmbiguousFramingIsRefusedAndTheConnectionClosed() throws {
        let refused: [(String, String, Int)] = [
            ("CL and TE", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("conflicting CL", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
            ("signed CL", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\nabc", 400),
            ("TE chunked, identity", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400),
            ("TE identity, chunked", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n", 501),
            ("TE gzip", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            ("TE twice", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("space before colon", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding :chunked\r\n\r\n0\r\n\r\n", 400),
            ("TE in HTTP/1.0", "POST /echo HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
            ("signed chunk size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n+3\r\nabc\r\n0\r\n\r\n", 400),
            ("chunk size overflow", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\nabc\r\n0\r\n\r\n", 400),
            ("chunk extension flood", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;" + String(repeating: "a", count: 10_000) + "\r\nabc\r\n0\r\n\r\n", 400),
            ("obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400),
            ("NUL in a field", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\u{0}c\r\n\r\n", 400),
            ("control byte in a field", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\u{1}c\r\n\r\n", 400),
            ("invalid method", "G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("target without slash", "GET abc HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            ("no Host in HTTP/1.1", "GET / HTTP/1.1\r\n\r\n", 400),
            ("two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("HTTP/2.0 in text", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            ("CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 400),
        ]
        for (name, raw, status) in refused {
            let r = try send(raw)
            XCTAssertEqual(r.status, status, name)
            XCTAssertTrue(r.closed, "\(name): connection closed")
        }
        XCTAssertEqual(try origin.count("/echo"), 0, "none of them reached the upstream")
    }

    func testTolerableVariantsAreNormalizedBeforeTheUpstream() throws {
        // RFC 9112 section 6.3: identical lengths may be taken as one.
        let c = try larder.client()
        try c.send("POST /echo?same HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc")
        XCTAssertEqual(try c.readResponse().text, "abc")
        let fields = try origin.lastRequest("/echo?same")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0] == "content-length" }.map { $0[1] }, ["3"], "one Content-Length upstream")
        XCTAssertFalse(fields.contains { $0[0] == "transfer-encoding" })

        // Chunked in any case, with an extension: decoded, re-framed upstream.
        try c.send("POST /echo?chunked HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n")
        XCTAssertEqual(try c.readResponse().text, "abc")
        XCTAssertEqual(try origin.lastRequest("/echo?chunked")["body_length"] as? Int, 3)

        // An absolute-form target is served as its path (one upstream).
        try c.send("GET http://elsewhere.example/abs?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        XCTAssertEqual(try origin.count("/abs?x=1"), 1)

        // HTTP/1.0 without Host, and keep-alive on request.
        try c.send("GET /ten HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        try c.send("GET /ten-again HTTP/1.1\r\nHost: a\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200, "HTTP/1.0 keep-alive honoured: the connection stayed open")
    }
}

/// Connection, header and body limits.
final class LimitTests: ConfiguredTestCase {
    func testConnectionsOverTheLimitGet503AndOthersKeepWorking() throws {
        let (_, larder) = try start(config: "max_connections = 2\n")  // 2 workers: 1 each
        let clients = try (0..<6).map { _ in try larder.client() }
        var statuses: [Int] = []
        for c in clients {
            try? c.send("GET /limited HTTP/1.1\r\nHost: a\r\n\r\n")
            statuses.append((try? c.readResponse().status) ?? 0)
        }
        XCTAssertLessThanOrEqual(statuses.filter { $0 == 200 }.count, 2, "\(statuses)")
        XCTAssertGreaterThanOrEqual(statuses.filter { $0 == 503 }.count, 4, "\(statuses)")
        // The accepted connections still work.
        for (c, status) in zip(clients, statuses) where status == 200 {
            try c.send("GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200)
        }
    }

    func testAStalledRequestBodyGets408() throws {
        let (origin, larder) = try start(config: "body_timeout = \"1s\"\n")
        let c = try larder.client()
        try c.send("POST /echo?stalled HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 408)
        XCTAssertTrue(c.isClosedByPeer())
        _ = origin
    }

    func testPipelinedRequestsBeyondTheBufferWaitAndAreAnsweredInOrder() throws {
        let (_, larder) = try start(config: "max_pipeline_buffer = \"4KiB\"\n")
        let c = try larder.client()
        // About 6 KiB of requests at once: more than the buffer.
        let count = 150
        try c.send((1...count).map { "GET /pipe/\($0)?size=\($0) HTTP/1.1\r\nHost: a\r\n\r\n" }.joined())
        for i in 1...count {
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body.count, i, "answers leave in request order")
        }
    }

    func testTooManyHeaderFieldsGet431() throws {
        let (origin, larder) = try start(config: "max_header_count = 10\n")
        let c = try larder.client()
        let fields = (0..<20).map { "X-F\($0): v\r\n" }.joined()
        try c.send("GET /many-fields HTTP/1.1\r\nHost: a\r\n\(fields)\r\n")
        XCTAssertEqual(try c.readResponse().status, 431)
        XCTAssertEqual(try origin.count("/many-fields"), 0)
    }
}

/// Faults around Larder: a broken upstream, too few file descriptors.
final class FaultTests: ProxyTestCase {
    func testAnUpstreamResetMidBodyCutsTheClientAndStoresNothing() throws {
        let target = "/cut?size=100000&cut=30000"
        let c = try larder.client()
        try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n")
        let received = c.readUntilClosed()  // Larder closes the connection
        let head = String(decoding: received.prefix(200), as: UTF8.self)
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 200"), head)
        let bodyStart = received.firstRange(of: [13, 10, 13, 10])?.upperBound ?? received.count
        XCTAssertLessThan(received.count - bodyStart, 100_000, "the client sees a cut response (Content-Length unmet)")
        let again = try larder.client().get(target, headers: ["Larder-Cache-Policy: cacheOnly"])
        XCTAssertEqual(again.status, 504, "nothing partial was stored")
    }

    func testAnUpstreamThatDoesNotSpeakHTTPIs502() throws {
        let r = try larder.client().get("/garbage?garbage=1")
        XCTAssertEqual(r.status, 502)
        XCTAssertEqual(try larder.client().get("/fine").status, 200, "and Larder goes on")
    }
}

/// Out of file descriptors: accepting pauses, and Larder recovers.
final class DescriptorExhaustionTests: XCTestCase {
    func testRunningOutOfDescriptorsPausesAcceptsAndRecovers() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try Origin()
        defer { origin.stop() }
        // 64 descriptors in all: a few dozen connections exhaust them.
        let child = try ChildProcess("/usr/bin/prlimit", ["--nofile=64:64", Paths.larder, "serve", "--listen", "127.0.0.1:0",
                                                          "--upstream", origin.url, "--workers", "1", "--admin-listen", "none"])
        defer { child.stop() }
        let port = try XCTUnwrap(child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), child.stderr)
        var idle: [HTTPClient] = []
        for _ in 0..<80 { if let c = try? HTTPClient(port: port) { idle.append(c) } }
        XCTAssertNotNil(child.waitFor("accept failed", timeout: 10), "the limit was reached: \(child.stderr)")
        idle.removeAll()  // the clients go away, descriptors come back
        // Bounded: accepting resumes within a few of its 100 ms pauses.
        var served: HTTPResponse?
        let deadline = Date().addingTimeInterval(15)
        while served == nil && Date() < deadline {
            served = try? HTTPClient(port: port).get("/after-exhaustion")
            if served == nil { usleep(100_000) }
        }
        XCTAssertEqual(served?.status, 200, child.stderr)
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }

    /// Out of descriptors when libcurl is to be loaded, Larder does not
    /// end (it did: "cannot load libcurl: Too many open files", exit 1): it
    /// says so and tries again, and goes on accepting (and pausing) as a
    /// daemon out of descriptors does. The limit that leaves the loader no
    /// descriptor is found by trying the few just under what a started
    /// Larder holds (measured, not assumed).
    func testOutOfDescriptorsWhenLibcurlLoadsIsNotTheEnd() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try Origin()
        defer { origin.stop() }
        let arguments = [Paths.larder, "serve", "--listen", "127.0.0.1:0", "--upstream", origin.url, "--workers", "1",
                         "--admin-listen", "none"]
        let probe = try ChildProcess(Paths.larder, Array(arguments.dropFirst()))
        XCTAssertNotNil(probe.waitFor("listening on"), probe.stderr)
        // The lowest descriptor number it leaves free (descriptors inherited
        // from the test runner may sit above it).
        let used = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(probe.process.processIdentifier)/fd")
            .compactMap { Int($0) })
        let held = (0...).first { !used.contains($0) }!
        probe.stop()
        for limit in stride(from: held + 1, through: max(held - 3, 4), by: -1) {
            let child = try ChildProcess("/usr/bin/prlimit", ["--nofile=\(limit):\(limit)"] + arguments)
            defer { child.stop() }
            guard let port = child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init),
                  child.waitFor("libcurl cannot be loaded yet", timeout: 3) != nil else { continue }
            XCTAssertTrue(child.stderr.contains("Too many open files"), child.stderr)
            // A client now: Larder, alive, cannot accept it either, and says so.
            let socket = try? HTTPClient(port: port)
            XCTAssertNotNil(child.waitFor("accept failed"), child.stderr)
            XCTAssertTrue(child.process.isRunning, child.stderr)
            _ = socket
            kill(child.process.processIdentifier, SIGTERM)
            XCTAssertEqual(child.waitForExit(timeout: 20), 0, "stops cleanly when told: \(child.stderr)")
            return
        }
        XCTFail("no limit from \(held) down left the loader without a descriptor")
    }
}

/// Cache poisoning: what a client sends but the key does not hold never
/// reaches the upstream, and one host's response is not served for another.
final class PoisoningTests: ConfiguredTestCase {
    func testForwardingFieldsFromTheClientAreDroppedByDefault() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url)
        let c = try larder.client()
        try c.send("GET /poison HTTP/1.1\r\nHost: shop.example\r\nX-Forwarded-Host: evil.example\r\nX-Forwarded-Proto: https\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 200)
        let fields = try origin.lastRequest("/poison")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-host" }.count, 0, "\(fields)")
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-proto" }.map { $0[1] }, ["http"])
        // Any Host gets the one stored response (the upstream never saw it).
        try c.send("GET /poison HTTP/1.1\r\nHost: other.example\r\n\r\n")
        XCTAssertTrue(try c.readResponse().header("cache-status")?.contains("hit") ?? false)
    }

    func testWithForwardHostEachHostHasItsOwnStoredResponse() throws {
        let (origin, larder) = try start(config: "forward_host = true\n")
        let c = try larder.client()
        func get(_ host: String, _ extra: String = "") throws -> HTTPResponse {
            try c.send("GET /per-host HTTP/1.1\r\nHost: \(host)\r\n\(extra)\r\n")
            return try c.readResponse()
        }
        XCTAssertEqual(try get("a.example", "X-Forwarded-Host: evil.example\r\n").header("cache-status"), "larder; fwd=uri-miss; stored")
        let fields = try origin.lastRequest("/per-host")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0] == "x-forwarded-host" }.map { $0[1] }, ["a.example"], "the client's own is replaced")
        XCTAssertEqual(try get("b.example").header("cache-status"), "larder; fwd=vary-miss; stored", "not a.example's")
        XCTAssertTrue(try get("A.Example").header("cache-status")?.contains("hit") ?? false, "host names are case-insensitive")
        XCTAssertEqual(try origin.count("/per-host"), 2)
        // A purge of the URL removes every host's copy.
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?url=%2Fper-host").text, "{\"purged\": 2}\n")
    }

    func testWithPreserveHostTheUpstreamGetsTheClientsHostAndEachHostIsKeyed() throws {
        let (origin, larder) = try start(config: "preserve_host = true\n")
        let c = try larder.client()
        func get(_ host: String) throws -> HTTPResponse {
            try c.send("GET /vhost HTTP/1.1\r\nHost: \(host)\r\n\r\n")
            return try c.readResponse()
        }
        XCTAssertEqual(try get("a.example").header("cache-status"), "larder; fwd=uri-miss; stored")
        let fields = try origin.lastRequest("/vhost")["headers"] as? [[String]] ?? []
        XCTAssertEqual(fields.filter { $0[0].lowercased() == "host" }.map { $0[1] }, ["a.example"], "the client's Host, not 127.0.0.1:PORT")
        XCTAssertEqual(try get("b.example").header("cache-status"), "larder; fwd=vary-miss; stored", "not a.example's")
        XCTAssertTrue(try get("a.example").header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(try origin.count("/vhost"), 2)
    }
}

/// Files disk hits keep open give way to connections when the process
/// runs out of descriptors, and what is stored stays stored.
final class KeptFilesUnderDescriptorPressureTests: ConfiguredTestCase {
    /// Larder with 128 descriptors in all, disk only (nothing fits in
    /// memory) and 20 files kept, each of `targets` stored and hit until
    /// its file is kept (the first hit keeps it).
    private func startWithKeptFiles(_ targets: [String], admin: String = "none", config extra: String = "") throws
        -> (origin: Origin, child: ChildProcess, port: Int, client: HTTPClient) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try startOrigin()
        let config = try writeConfig("max_object_size = \"1KiB\"\ndisk_open_files = 20\n" + extra)
        let child = try startChild("/usr/bin/prlimit", ["--nofile=128:128", Paths.larder, "serve", "--listen", "127.0.0.1:0",
                                                        "--upstream", origin.url, "--workers", "1", "--admin-listen", admin,
                                                        "--cache-dir", temporaryPath("larder-kept"), "--config", config])
        let port = try XCTUnwrap(child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), child.stderr)
        let c = try HTTPClient(port: port)
        for target in targets { XCTAssertEqual(try c.get(target).status, 200) }
        let deadline = Date().addingTimeInterval(15)
        var hits = 0
        while hits < targets.count && Date() < deadline {
            hits = try targets.filter { try c.get($0).header("cache-status")?.contains("hit") ?? false }.count
        }
        XCTAssertEqual(hits, targets.count, "every file stored and hit")
        return (origin, child, port, c)
    }

    func testKeptFilesAreClosedForConnectionsAndTheEntriesStay() throws {
        // 80 connections more do not fit beside the kept files (some
        // descriptors are the files' directories).
        let targets = (0..<20).map { "/kept-\($0)?size=4000" }
        let (origin, child, port, c) = try startWithKeptFiles(targets)
        var idle: [HTTPClient] = []
        for _ in 0..<80 { idle.append(try HTTPClient(port: port)) }
        for client in idle { try client.send("GET /kept-0?size=4000 HTTP/1.1\r\nHost: a\r\n\r\n") }
        // Each connection is answered (one not accepted would time out).
        for (n, client) in idle.enumerated() {
            guard let r = try? client.readResponse() else { return XCTFail("connection \(n) got no answer: \(child.stderr)") }
            XCTAssertEqual(r.status, 200)
        }
        XCTAssertNotNil(child.waitFor("out of descriptors: closed \\d+ files disk hits kept open", timeout: 5), child.stderr)
        idle.removeAll()
        for target in targets { XCTAssertTrue(try c.get(target).header("cache-status")?.contains("hit") ?? false, target) }
        for target in targets { XCTAssertEqual(try origin.count(target), 1, "\(target) stayed stored") }
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }

    func testTheAdminListenerTooGetsKeptFilesBackWhenDescriptorsRunOut() throws {
        let targets = (0..<20).map { "/kept-admin-\($0)?size=4000" }
        let (_, child, _, c) = try startWithKeptFiles(targets, admin: "127.0.0.1:0", config: "admin_max_connections = 1000\n")
        let adminPort = try XCTUnwrap(child.stderr.firstMatch(of: #/admin API on [^ ]+:(\d+)/#).flatMap { Int($0.1) }, child.stderr)
        // Admin connections (each answered, then held open) until the
        // descriptors left are used up, and six more: those six are
        // accepted only once kept files are given back.
        let used = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.process.processIdentifier)/fd").count
        var held: [HTTPClient] = []
        for n in 0..<(128 - used + 6) {
            let admin = try HTTPClient(port: adminPort)
            guard let r = try? admin.get("/healthz") else { return XCTFail("admin connection \(n) got no answer: \(child.stderr)") }
            XCTAssertEqual(r.status, 200)
            held.append(admin)
        }
        XCTAssertNotNil(child.waitFor("out of descriptors: closed \\d+ files disk hits kept open", timeout: 5), child.stderr)
        held.removeAll()
        for target in targets { XCTAssertTrue(try c.get(target).header("cache-status")?.contains("hit") ?? false, target) }
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }
}
