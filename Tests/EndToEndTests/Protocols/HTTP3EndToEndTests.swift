import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/3 to clients against the real binary: a TLS `[[listen]]` with
/// `http3 = true`, a real HTTP/3 client (aioquic, h3client.py) and raw
/// hostile datagrams (h3attacks.py). The cache and the exchange are the
/// other transports' own: what one stores, the others hit.
final class HTTP3EndToEndTests: ConfiguredTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Paths.aioquicPython) else {
            throw HarnessError("no \(Paths.aioquicPython): run .ci/install-deps --test (it puts aioquic in .venv)")
        }
        dir = temporaryPath("larder-h3")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    /// A self-signed certificate for localhost (a new serial each time) in dir/FILE.pem and .key.
    @discardableResult
    private func certificate(_ file: String = "a") throws -> (pem: String, key: String) {
        let (pem, key) = ("\(dir)/\(file).pem", "\(dir)/\(file).key")
        let made = try runProgram(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                   "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=localhost",
                                   "-addext", "subjectAltName=DNS:localhost"])
        XCTAssertEqual(made.status, 0, made.stderr)
        chmod(key, 0o600)
        return (pem, key)
    }

    /// A larder with a plain listener and a TLS one serving HTTP/3 too;
    /// `top`: keys above the tables. The larder and the TLS (and UDP) port.
    private func startH3Larder(upstream: String, top: String = "", extra: [String] = []) throws -> (larder: LarderProcess, port: Int) {
        let cert = try certificate()
        let config = try writeConfig("""
            \(top)
            [[listen]]
            address = "127.0.0.1:0"

            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            http3 = true
            certificate = "\(cert.pem)"
            key = "\(cert.key)"
            """)
        let larder = try startLarder(upstream: upstream, ["--config", config] + extra)
        let port = try XCTUnwrap(larder.child.stderr.firstMatch(of: #/127\.0\.0\.1:(\d+) \(TLS, HTTP\/3\)/#).flatMap { Int($0.1) },
                                 larder.child.stderr)
        return (larder, port)
    }

    /// h3client.py's lines (its last says RESULT ok).
    private func h3(_ port: Int, _ arguments: [String], timeout: TimeInterval = 60) throws -> [String] {
        let r = try runProgram([Paths.aioquicPython, Paths.h3client, String(port)] + arguments, timeout: timeout)
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.last, "RESULT ok", "\(arguments): \(r.stdout) \(r.stderr)")
        return lines
    }

    /// One STREAM line's parts: status, body bytes, SHA-256, Cache-Status.
    private func stream(_ line: String) -> (status: Int, bytes: Int, sha: String, cacheStatus: String) {
        let p = line.split(separator: " ").map(String.init)
        guard p.count >= 6, p[0] == "STREAM" else { return (0, -1, "", line) }
        return (Int(p[2]) ?? 0, Int(p[3]) ?? -1, p[4], p[5])
    }

    private func streams(_ lines: [String]) -> [(status: Int, bytes: Int, sha: String, cacheStatus: String)] {
        lines.filter { $0.hasPrefix("STREAM ") }.map(stream)
    }

    /// curl over TLS (HTTP/1.1 or, with "--http2", HTTP/2): the body's SHA-256 and what -w printed.
    private func curl(_ port: Int, _ target: String, _ more: [String] = []) throws -> (sha: String, out: String) {
        let body = "\(dir)/body-\(UUID().uuidString)"
        let r = try runProgram(["curl", "-sSk", "-o", body, "-w", "%{http_code} %{http_version} %header{cache-status}|%header{alt-svc}"]
                               + more + ["https://127.0.0.1:\(port)\(target)"])
        let sha = try runProgram(["sha256sum", body]).stdout.split(separator: " ").first.map(String.init) ?? ""
        return (sha, r.stdout + r.stderr)
    }

    private func sha256(_ bytes: [UInt8]) throws -> String {
        let file = "\(dir)/sha-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return try runProgram(["sha256sum", file]).stdout.split(separator: " ").first.map(String.init) ?? ""
    }

    /// Waits (bounded) until `target` is stored: a cache-only ask on the plain listener is a hit.
    private func waitUntilStored(_ larder: LarderProcess, _ target: String) throws {
        let deadline = Date().addingTimeInterval(10)
        while try larder.client().get(target, headers: ["Cache-Control: only-if-cached"]).status != 200 && Date() < deadline {
            usleep(20_000)
        }
    }

    func testHitsAndMissesOverHTTP3ShareOneCacheWithTheTCPListeners() throws {
        let origin = try startOrigin()
        let log = temporaryPath("larder-h3-access")
        let (larder, port) = try startH3Larder(upstream: origin.url, top: "access_log = \"\(log)\"\naccess_log_format = \"json\"",
                                               extra: ["--cache-dir", temporaryPath("larder-h3-cache")])
        // A miss, then a hit, over HTTP/3.
        let miss = try XCTUnwrap(streams(try h3(port, ["get", "/h3/a?size=5000", "1"])).first)
        XCTAssertEqual(miss.status, 200)
        XCTAssertEqual(miss.bytes, 5000)
        XCTAssertTrue(miss.cacheStatus.contains("fwd=uri-miss"), miss.cacheStatus)
        let hit = try XCTUnwrap(streams(try h3(port, ["get", "/h3/a?size=5000", "1"])).first)
        XCTAssertTrue(hit.cacheStatus.contains("hit"), hit.cacheStatus)
        XCTAssertEqual(hit.sha, miss.sha)
        XCTAssertEqual(try origin.count("/h3/a?size=5000"), 1)

        // Stored through HTTP/1.1 over TLS, a hit over HTTP/3; stored over HTTP/3, a hit over HTTP/2.
        // (A store is done once libcurl has finished the transfer, which can be after the client read the
        // whole answer: each waits for it, bounded.)
        let viaTCP = try curl(port, "/h3/b?size=700", ["--http1.1"])
        XCTAssertTrue(viaTCP.out.hasPrefix("200 1.1 "), viaTCP.out)
        try waitUntilStored(larder, "/h3/b?size=700")
        let hitOverH3 = try XCTUnwrap(streams(try h3(port, ["get", "/h3/b?size=700", "1"])).first)
        XCTAssertTrue(hitOverH3.cacheStatus.contains("hit"), hitOverH3.cacheStatus)
        XCTAssertEqual(hitOverH3.sha, viaTCP.sha)
        _ = try h3(port, ["get", "/h3/c?size=900", "1"])
        try waitUntilStored(larder, "/h3/c?size=900")
        let hitOverH2 = try curl(port, "/h3/c?size=900", ["--http2"])
        XCTAssertTrue(hitOverH2.out.hasPrefix("200 2 "), hitOverH2.out)
        XCTAssertTrue(hitOverH2.out.contains("hit"), hitOverH2.out)
        XCTAssertEqual(try origin.count("/h3/b?size=700") + (try origin.count("/h3/c?size=900")), 2)

        // TLS answers advertise HTTP/3 on the same port; the plain listener's do not.
        XCTAssertTrue(viaTCP.out.hasSuffix("|h3=\":\(port)\"; ma=86400"), viaTCP.out)
        XCTAssertTrue(hitOverH2.out.hasSuffix("|h3=\":\(port)\"; ma=86400"), hitOverH2.out)
        XCTAssertNil(try larder.client().get("/h3/b?size=700").header("alt-svc"))

        // 5 MiB byte for byte, streamed on the miss, then from the disk tier.
        let big = try XCTUnwrap(streams(try h3(port, ["get", "/h3/big?size=5242880", "1"])).first)
        XCTAssertEqual(big.bytes, 5_242_880)
        try waitUntilStored(larder, "/h3/big?size=5242880")
        XCTAssertEqual(big.sha, try curl(port, "/h3/big?size=5242880").sha)
        XCTAssertTrue(try XCTUnwrap(streams(try h3(port, ["get", "/h3/big?size=5242880", "1"])).first).cacheStatus.contains("hit"))

        // 50 concurrent streams on one connection: one fetch, every stream the same bytes.
        let many = streams(try h3(port, ["get", "/h3/many?size=3000", "50"]))
        XCTAssertEqual(many.count, 50)
        XCTAssertEqual(Set(many.map(\.status)), [200])
        XCTAssertEqual(Set(many.map(\.sha)).count, 1)
        XCTAssertEqual(try origin.count("/h3/many?size=3000"), 1)

        // More requests on one connection than it may have open at once (100): closed streams make room.
        let sequence = streams(try h3(port, ["sequence", "/h3/a?size=5000", "150"]))
        XCTAssertEqual(sequence.count, 150)
        XCTAssertEqual(Set(sequence.map(\.status)), [200])

        // A range of a stored response, as on the other transports.
        let range = try XCTUnwrap(streams(try h3(port, ["get", "/h3/a?size=5000", "1", "range=bytes=100-199"])).first)
        XCTAssertEqual(range.status, 206)
        XCTAssertEqual(range.bytes, 100)

        // A request's own cache directives, as on the other transports: only-if-cached never fetches.
        let notCached = try XCTUnwrap(streams(try h3(port, ["get", "/h3/never", "1", "cache-control=only-if-cached"])).first)
        XCTAssertEqual(notCached.status, 504)
        XCTAssertEqual(try origin.count("/h3/never"), 0)

        // HEAD, a POST body (echoed by the origin), a purge.
        let head = try h3(port, ["head", "/h3/a?size=5000"])
        XCTAssertEqual(stream(head[0]).bytes, 0)
        XCTAssertTrue(head.contains("FIELD content-length 5000"), "\(head)")
        let posted = try XCTUnwrap(streams(try h3(port, ["post", "/echo", "300000"])).first)
        XCTAssertEqual(posted.status, 200)
        XCTAssertEqual(posted.sha, try sha256([UInt8](repeating: 0x61, count: 300_000)))
        // A QUERY (RFC 10008) is cached by its body here too.
        let queried = streams(try h3(port, ["query", "/echo?h3=1", "2000", "2"]))
        XCTAssertEqual(queried.map(\.status), [200, 200])
        XCTAssertEqual(queried.last?.sha, try sha256([UInt8](repeating: 0x71, count: 2000)))
        XCTAssertTrue(queried.last?.cacheStatus.contains("hit") == true, "\(queried.map(\.cacheStatus))")
        XCTAssertEqual(try origin.count("/echo?h3=1"), 1)
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?url=/h3/a%3Fsize%3D5000").status, 200)
        XCTAssertTrue(try XCTUnwrap(streams(try h3(port, ["get", "/h3/a?size=5000", "1"])).first).cacheStatus.contains("fwd=uri-miss"))
        XCTAssertEqual(try origin.count("/h3/a?size=5000"), 2)

        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "http3_connections"), 10)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "http3_requests"), 211)
        let metrics = try larder.adminClient().get("/metrics").text
        XCTAssertTrue(metrics.contains("larder_http3_requests_total "), metrics)
        // The access log says which protocol carried each request.
        let lines = self.lines(atLeast: 210, in: log)
        XCTAssertTrue(lines.contains { $0.contains("\"protocol\":\"HTTP/3\"") && $0.contains("/h3/many") }, "\(lines.suffix(3))")
        XCTAssertTrue(lines.contains { $0.contains("\"protocol\":\"HTTP/1.1\"") && $0.contains("/h3/b") }, "\(lines.prefix(3))")
    }

    func testQUICsAttackBudgets() throws {
        let origin = try startOrigin()
        let (larder, port) = try startH3Larder(upstream: origin.url, top: """
            http3_retry_threshold = 8
            handshake_timeout = "1s"
            """, extra: ["--workers", "1"])
        // Never more than three times what a client sent before its address is proved.
        let amplification = try runProgram([Paths.aioquicPython, Paths.h3attacks, String(port), "amplification"])
        let figures = try XCTUnwrap(amplification.stdout.firstMatch(of: #/SENT (\d+) RECEIVED (\d+)/#), amplification.stdout)
        XCTAssertGreaterThan(Int(figures.2)!, 0, "the server answered the Initial")
        XCTAssertLessThanOrEqual(Int(figures.2)!, 3 * Int(figures.1)!)

        // Garbage: random bytes, cut Initials and packets of unknown connections cost no connection;
        // a Stateless Reset is smaller than what it answers, and cut Initials get nothing.
        let garbage = try runProgram([Paths.aioquicPython, Paths.h3attacks, String(port), "garbage", "30"])
        let replies = try XCTUnwrap(garbage.stdout.firstMatch(of: #/REPLIES (\d+) (\d+) (\d+)/#), garbage.stdout)
        XCTAssertEqual(Int(replies.2), 0, garbage.stdout)
        XCTAssertGreaterThan(Int(replies.3)!, 0, "unknown connections are told (Stateless Reset)")
        let biggest = try XCTUnwrap(garbage.stdout.firstMatch(of: #/BIGGEST (\d+)/#).flatMap { Int($0.1) })
        XCTAssertLessThan(biggest, 61, "a reset is shorter than the 61-byte packet it answers")
        XCTAssertGreaterThan(try statsFigure(larder, "quic_stateless_resets"), 0)
        XCTAssertGreaterThan(try statsFigure(larder, "quic_datagrams_dropped"), 0)

        // A flood of Initials from many ports: past 8 pending handshakes, Retry (no state kept).
        let flood = try runProgram([Paths.aioquicPython, Paths.h3attacks, String(port), "flood", "60"])
        let retries = try XCTUnwrap(flood.stdout.firstMatch(of: #/RETRIES (\d+)/#).flatMap { Int($0.1) }, flood.stdout)
        XCTAssertGreaterThanOrEqual(retries, 40, flood.stdout)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "quic_retries"), 40)
        // Half-open handshakes end after handshake_timeout; a real client is served meanwhile (through a Retry).
        let served = try XCTUnwrap(streams(try h3(port, ["retry", "/h3/after-flood"])).first)
        XCTAssertEqual(served.status, 200)
        XCTAssertEqual(try waitForStats(larder, "open_connections", atMost: 0, timeout: 20), 0)
        XCTAssertLessThanOrEqual(try statsFigure(larder, "http3_connections"), 8 + 3, "only pending handshakes under the bound began")

        // Streams reset as soon as opened (rapid reset): past 200 in 10 s the connection ends, H3_EXCESSIVE_LOAD.
        let reset = try h3(port, ["rapid-reset", "/h3/reset", "2000"], timeout: 60)
        XCTAssertTrue(reset.contains("CLOSED 263"), "\(reset.suffix(2))")
        XCTAssertGreaterThan(try statsFigure(larder, "http3_stream_resets"), 200)

        // The limits the client is told: streams at once, QPACK's dynamic table.
        let limits = try h3(port, ["limits", "/h3/limits"])
        XCTAssertTrue(limits.contains("MAXSTREAMS 100"), "\(limits)")
        XCTAssertTrue(limits.contains("QPACK 4096"), "\(limits)")
    }

    func testALossyPathStillDeliversEveryByte() throws {
        let origin = try startOrigin()
        let (_, port) = try startH3Larder(upstream: origin.url)
        let relay = try startChild(Paths.aioquicPython, [Paths.h3attacks, String(port), "relay", "0.05"])
        let front = try XCTUnwrap(relay.waitFor("PORT (\\d+)").flatMap { Int($0) }, relay.stderr)
        // 5 % of datagrams lost each way: retransmissions (of the pieces kept until acknowledged) fill the gaps.
        let got = streams(try h3(front, ["get", "/h3/lossy?size=3000000", "3"], timeout: 120))
        XCTAssertEqual(got.count, 3)
        XCTAssertEqual(Set(got.map(\.bytes)), [3_000_000])
        XCTAssertEqual(Set(got.map(\.sha)).count, 1)
        XCTAssertEqual(got.first?.sha, try curl(port, "/h3/lossy?size=3000000").sha)
    }

    func testRetryEveryClientAndMaxConnectionsCountsQUIC() throws {
        let origin = try startOrigin()
        let (larder, port) = try startH3Larder(upstream: origin.url, top: "http3_retry_threshold = 0\nmax_connections = 3",
                                               extra: ["--workers", "1"])
        let lines = try h3(port, ["retry", "/h3/retried"])
        XCTAssertEqual(stream(lines[0]).status, 200)
        XCTAssertTrue(lines.contains("RETRIED 1"), "\(lines)")
        // Three connections held open: a fourth (TCP or QUIC) is refused.
        let held = try (0..<3).map { _ in try HTTPClient(port: larder.port) }
        for c in held { XCTAssertEqual(try c.get("/h3/tcp").status, 200) }
        let refused = try runProgram([Paths.aioquicPython, Paths.h3client, String(port), "get", "/h3/refused", "1"], timeout: 60)
        XCTAssertFalse(refused.stdout.contains("RESULT ok"), refused.stdout)
        XCTAssertGreaterThan(try statsFigure(larder, "refused_connections"), 0)
    }

    func testReloadTakesRenewedCertificatesAndDrainFinishesStreams() throws {
        let origin = try startOrigin()
        let (larder, port) = try startH3Larder(upstream: origin.url, top: "drain_timeout = \"20s\"")
        let first = try XCTUnwrap(try h3(port, ["cert", "/h3/cert"]).first { $0.hasPrefix("CERT ") })
        // A connection open across the reload goes on with the certificate it began with.
        let kept = try startChild(Paths.aioquicPython, [Paths.h3client, String(port), "pause", "/h3/cert"], withInput: true)
        XCTAssertNotNil(kept.waitFor("(CERT [0-9a-f]+)", timeout: 20), kept.stdout + kept.stderr)
        try certificate()  // renewed in place
        kill(larder.child.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(15)
        var now = first
        while now == first && Date() < deadline {
            now = try XCTUnwrap(try h3(port, ["cert", "/h3/cert"]).first { $0.hasPrefix("CERT ") })
        }
        XCTAssertNotEqual(now, first, "new connections get the renewed certificate")
        kept.send("again\n")
        XCTAssertEqual(kept.waitForExit(timeout: 20), 0, kept.stdout + kept.stderr)
        kept.drainOutput()
        XCTAssertEqual(kept.stdout.split(separator: "\n").filter { $0.hasPrefix("STREAM ") && $0.contains(" 200 ") }.count, 2,
                       kept.stdout)
        XCTAssertTrue(kept.stdout.contains(first), "the old connection kept its certificate: \(kept.stdout)")

        // SIGTERM while a stream waits for its upstream: it is answered, then the connection ends.
        let child = try startChild(Paths.aioquicPython, [Paths.h3client, String(port), "get", "/h3/slow?delay=1.5&size=64", "1"])
        XCTAssertGreaterThanOrEqual(try origin.waitForCount("/h3/slow?delay=1.5&size=64", atLeast: 1), 1)
        kill(larder.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(child.waitForExit(timeout: 20), 0, child.stdout + child.stderr)
        XCTAssertTrue(child.stdout.contains(" 200 64 "), child.stdout)
        XCTAssertEqual(larder.child.waitForExit(timeout: 20), 0, larder.child.stderr)
    }

    func testADrainSendsGoAwayToIdleConnections() throws {
        let origin = try startOrigin()
        let (larder, port) = try startH3Larder(upstream: origin.url)
        let child = try startChild(Paths.aioquicPython, [Paths.h3client, String(port), "hold", "/h3/held"])
        XCTAssertNotNil(child.waitFor("(STREAM \\d+ 200)", timeout: 20), child.stdout + child.stderr)
        kill(larder.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(child.waitForExit(timeout: 20), 0, child.stdout + child.stderr)
        child.drainOutput()
        XCTAssertTrue(child.stdout.contains("CLOSED 256"), "closed with H3_NO_ERROR: \(child.stdout)")
        XCTAssertFalse(child.stdout.contains("GOAWAY None"), "a GOAWAY came first: \(child.stdout)")
        XCTAssertEqual(larder.child.waitForExit(timeout: 20), 0, larder.child.stderr)
    }

    func testAnIdleConnectionEndsAfterKeepaliveTimeoutAndAStalledStreamAfterSendTimeout() throws {
        let origin = try startOrigin()
        let (larder, port) = try startH3Larder(upstream: origin.url, top: "keepalive_timeout = \"1s\"\nsend_timeout = \"1s\"")
        let lines = try h3(port, ["hold", "/h3/idle"], timeout: 30)
        XCTAssertEqual(stream(lines[0]).status, 200)
        XCTAssertTrue(lines.contains { $0.hasPrefix("CLOSED ") }, "\(lines)")
        // A client that keeps its connection alive but never makes room for the answer: the stream is
        // cancelled (H3_REQUEST_CANCELLED), not held.
        let stalled = try h3(port, ["stall", "/h3/stall?size=4000000"], timeout: 60)
        XCTAssertTrue(stalled.contains("RESET 268"), "\(stalled)")
        XCTAssertGreaterThan(try statsFigure(larder, "send_timeouts"), 0)
    }

    func testHTTP3ConfigurationMistakesAreRefused() throws {
        let plain = try writeConfig("""
            upstream = "http://127.0.0.1:9"
            [[listen]]
            address = "127.0.0.1:0"
            http3 = true
            """)
        let refused = try runProgram([Paths.larder, "check-config", "--config", plain])
        XCTAssertEqual(refused.status, 78, refused.stdout + refused.stderr)
        XCTAssertTrue((refused.stdout + refused.stderr).contains("http3"), refused.stderr)
        // A key GnuTLS cannot read stops serve and check-config alike (78, naming the file).
        let cert = try certificate()
        try "not a key".write(toFile: "\(dir)/bad.key", atomically: true, encoding: .utf8)
        let bad = try writeConfig("""
            upstream = "http://127.0.0.1:9"
            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            http3 = true
            certificate = "\(cert.pem)"
            key = "\(dir)/bad.key"
            """)
        let checked = try runProgram([Paths.larder, "check-config", "--config", bad])
        XCTAssertEqual(checked.status, 78, checked.stdout + checked.stderr)
        XCTAssertTrue((checked.stdout + checked.stderr).contains("bad.key"), checked.stderr)
        let served = try runProgram([Paths.larder, "serve", "--config", bad, "--admin-listen", "none"], timeout: 30)
        XCTAssertEqual(served.status, 78, served.stderr)
    }

    /// An event stream over HTTP/3: its first piece reaches the client
    /// while the origin waits to send the rest (IncrementalStreamTests for
    /// HTTP/1.1 and HTTP/2).
    func testAnEventStreamReachesAnHTTP3ClientPieceByPiece() throws {
        let origin = try startOrigin()
        let (_, port) = try startH3Larder(upstream: origin.url)
        let target = "/stream/h3?chunked=1&gate=1&size=7000&type=text/event-stream"
        let release = "\(origin.url)/__release?key=" + target.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let lines = try h3(port, ["first", target, release])
        XCTAssertTrue(lines.contains { $0.hasPrefix("FIRST ") }, "\(lines)")
        XCTAssertEqual(streams(lines).first?.status, 200)
        XCTAssertEqual(try origin.lastRequest(target)["gate"] as? String, "released")
    }
}
