import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/2 to clients, against the real binary: h2c by prior knowledge on a
/// plain listener, h2 by ALPN on a TLS one, every kind of answer per
/// stream, and the known attacks (a raw client, h2client.py), each ending
/// the attacker's connection while the worker goes on serving others.
final class HTTP2ClientTests: ConfiguredTestCase {
    /// curl over h2c: status, HTTP version, Cache-Status, and the body.
    private func h2c(_ port: Int, _ target: String, _ more: [String] = []) throws -> (out: String, body: [UInt8], stderr: String) {
        let file = temporaryPath("larder-h2-body")
        let r = try runProgram(["curl", "-sS", "--http2-prior-knowledge", "-o", file, "-w", "%{http_code} %{http_version} %header{cache-status}"]
                        + more + ["http://127.0.0.1:\(port)\(target)"])
        let body = (try? Data(contentsOf: URL(fileURLWithPath: file))).map { [UInt8]($0) } ?? []
        return (r.stdout, body, r.stderr)
    }

    /// h2client.py's lines.
    private func h2client(_ port: Int, _ arguments: [String], timeout: TimeInterval = 60) throws -> [String] {
        let r = try runProgram(["/usr/bin/python3", Paths.h2client, String(port)] + arguments, timeout: timeout)
        XCTAssertEqual(r.status, 0, "\(arguments): \(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init)
    }

    func testH2cByPriorKnowledgeServesEveryKindOfAnswer() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--cache-dir", temporaryPath("larder-h2-cache"), "--memory-limit", "1MiB"])
        let miss = try h2c(larder.port, "/h2/a?size=5000")
        XCTAssertTrue(miss.out.hasPrefix("200 2 "), miss.out + miss.stderr)
        XCTAssertTrue(miss.out.contains("fwd=uri-miss"), miss.out)
        XCTAssertEqual(miss.body.count, 5000)
        let hit = try h2c(larder.port, "/h2/a?size=5000")
        XCTAssertTrue(hit.out.contains("hit"), hit.out)
        XCTAssertEqual(hit.body, miss.body)
        XCTAssertEqual(try origin.count("/h2/a?size=5000"), 1)
        // The same bytes as HTTP/1.1 gets.
        XCTAssertEqual(try larder.client().get("/h2/a?size=5000").body, miss.body)

        let head = try runProgram(["curl", "-sS", "--http2-prior-knowledge", "-I", "http://127.0.0.1:\(larder.port)/h2/a?size=5000"])
        XCTAssertTrue(head.stdout.contains("HTTP/2 200"), head.stdout)
        XCTAssertTrue(head.stdout.contains("content-length: 5000"), head.stdout)
        let range = try h2c(larder.port, "/h2/a?size=5000", ["-r", "100-199"])
        XCTAssertTrue(range.out.hasPrefix("206 2"), range.out)
        XCTAssertEqual(range.body, Array(miss.body[100..<200]))

        // A request body goes upstream (the origin echoes it).
        let upload = temporaryPath("larder-h2-upload")
        let sent = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Data(sent).write(to: URL(fileURLWithPath: upload))
        let echoed = try h2c(larder.port, "/echo", ["--data-binary", "@" + upload])
        XCTAssertTrue(echoed.out.hasPrefix("200 2"), echoed.out + echoed.stderr)
        XCTAssertEqual(echoed.body, sent)
        // A client that waits for 100 Continue gets it (and sends the body at once).
        let waiting = try runProgram(["curl", "-sS", "-v", "--http2-prior-knowledge", "-H", "Expect: 100-continue",
                                      "--expect100-timeout", "30", "--data-binary", "@" + upload, "-o", "/dev/null",
                                      "http://127.0.0.1:\(larder.port)/echo"])
        XCTAssertTrue(waiting.stderr.contains("< HTTP/2 100"), waiting.stderr)
        XCTAssertTrue(waiting.stderr.contains("< HTTP/2 200"), waiting.stderr)

        // A large body streamed on a miss, then sent from its disk file.
        let storedBefore = try statsFigure(larder, "stored")
        let big = try h2c(larder.port, "/h2/big?size=3000000")
        XCTAssertEqual(big.body.count, 3_000_000, big.out + big.stderr)
        // Its disk file is completed after the client has the last byte.
        XCTAssertGreaterThan(try waitForStats(larder, "stored", atLeast: storedBefore + 1), storedBefore)
        let bigHit = try h2c(larder.port, "/h2/big?size=3000000")
        XCTAssertTrue(bigHit.out.contains("hit"), bigHit.out)
        XCTAssertEqual(bigHit.body, big.body)

        // A purge reaches HTTP/2 clients as any other.
        let purged = try larder.adminClient().request("POST", "/purge?url=/h2/a%3Fsize%3D5000")
        XCTAssertEqual(purged.status, 200, purged.text)
        XCTAssertTrue(try h2c(larder.port, "/h2/a?size=5000").out.contains("fwd=uri-miss"))
        XCTAssertEqual(try origin.count("/h2/a?size=5000"), 2)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "http2_requests"), 8)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "http2_connections"), 8)
    }

    func testH2OverTLSByALPNAndOnlyHTTP1WhereHTTP2IsOff() throws {
        let origin = try startOrigin()
        let dir = temporaryPath("larder-h2-tls")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let made = try runProgram(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-keyout", dir + "/a.key", "-out", dir + "/a.pem", "-days", "2", "-subj", "/CN=a.test",
                            "-addext", "subjectAltName=DNS:a.test"])
        XCTAssertEqual(made.status, 0, made.stderr)
        chmod(dir + "/a.key", 0o600)
        let config = try writeConfig("""
            [[listen]]
            address = "127.0.0.1:0"
            http2 = false

            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            certificate = "\(dir)/a.pem"
            key = "\(dir)/a.key"

            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            http2 = false
            certificate = "\(dir)/a.pem"
            key = "\(dir)/a.key"
            """)
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let tlsPorts = larder.child.stderr.matches(of: #/127\.0\.0\.1:(\d+) \(TLS\)/#).compactMap { Int($0.1) }
        XCTAssertEqual(tlsPorts.count, 2, larder.child.stderr)
        func https(_ port: Int, _ target: String) throws -> String {
            try runProgram(["curl", "-sS", "--http2", "--cacert", dir + "/a.pem", "--resolve", "a.test:\(port):127.0.0.1", "-o", "/dev/null",
                     "-w", "%{http_code} %{http_version} %header{cache-status}", "https://a.test:\(port)\(target)"]).stdout
        }
        XCTAssertTrue(try https(tlsPorts[0], "/alpn?size=10").hasPrefix("200 2 "), "h2 chosen by ALPN")
        XCTAssertTrue(try https(tlsPorts[0], "/alpn?size=10").contains("hit"))
        XCTAssertTrue(try https(tlsPorts[1], "/alpn?size=10").hasPrefix("200 1.1 "), "http2 = false: HTTP/1.1 only")
        // h2c where HTTP/2 is off: the preface is no HTTP/1.1 request.
        XCTAssertFalse(try h2c(larder.port, "/alpn?size=10").out.hasPrefix("200"))
        XCTAssertTrue(try larder.client().get("/alpn?size=10").status == 200)
    }

    func testConcurrentStreamsCollapseAndLimitsApply() throws {
        let (origin, larder) = try start(config: """
            http2_max_concurrent_streams = 7
            max_header_size = "4KiB"
            """)
        let settings = try h2client(larder.port, ["settings"])
        XCTAssertTrue(settings.contains("SETTING MAX_CONCURRENT_STREAMS 7"), "\(settings)")
        XCTAssertTrue(settings.contains("SETTING MAX_HEADER_LIST_SIZE 4096"), "\(settings)")
        let streams = try h2client(larder.port, ["get", "/h2/slow?delay=0.5&size=100", "6"]).filter { $0.hasPrefix("STREAM") }
        XCTAssertEqual(streams.count, 6)
        XCTAssertTrue(streams.allSatisfy { $0.contains(" 200 100 ") }, "\(streams)")
        XCTAssertEqual(try origin.count("/h2/slow?delay=0.5&size=100"), 1, "one upstream request for six streams")
        XCTAssertEqual(try h2client(larder.port, ["bigheader", "/h2/x", "8000"]).first, "STATUS 431")
        // An HPACK bomb: 40 MB of fields from 40 KB of references; the
        // stream is reset, and the connection's table stays in step.
        let bomb = try h2client(larder.port, ["hpack-bomb", "/h2/bomb?size=5", "10000"])
        XCTAssertEqual(bomb.filter { $0.hasPrefix("STREAM") }, ["STREAM 1 200", "STREAM 3 RESET 2", "STREAM 5 200"], "\(bomb)")
    }

    func testABodyOverTheLimitIsAnswered413AndTheConnectionGoesOn() throws {
        let (_, larder) = try start(config: "max_body_size = \"64KiB\"")
        // Announced too large, then sent too large without a length, then a
        // small one that the origin echoes: one connection.
        let lines = try h2client(larder.port, ["uploads", "/echo", "300000"])
        XCTAssertEqual(lines.filter { $0.hasPrefix("STREAM") }, ["STREAM 1 413 23", "STREAM 3 413 23", "STREAM 5 200 10"], "\(lines)")
        XCTAssertEqual(lines.last, "RESULT goaway=none closed=0")
    }

    /// :authority names the target (RFC 9113 section 8.3.1): a Host that
    /// names another host is malformed, not a second host to key or route by.
    func testAHostThatDiffersFromTheAuthorityIsRefused() throws {
        let (origin, larder) = try start(config: "")
        let other = try h2client(larder.port, ["get", "/h2/host?size=10", "1", "host=other.example"])
        XCTAssertTrue(other.contains { $0.hasPrefix("STREAM 1 400 ") }, "\(other)")
        let same = try h2client(larder.port, ["get", "/h2/host?size=10", "1", "host=127.0.0.1"])
        XCTAssertTrue(same.contains { $0.hasPrefix("STREAM 1 200 10") }, "\(same)")
        XCTAssertEqual(try origin.count("/h2/host?size=10"), 1, "only the consistent one went upstream")
    }

    func testAnIdleHTTP2ConnectionIsClosedAfterKeepaliveTimeout() throws {
        let (_, larder) = try start(config: "keepalive_timeout = \"1s\"")
        let lines = try h2client(larder.port, ["idle", "/h2/idle?size=10"])
        XCTAssertTrue(lines.contains("IDLE CLOSED"), "closed by keepalive_timeout (the client waits 20 s): \(lines)")
    }

    /// One worker: the attacks and the request after each share it.
    func testAttacksEndTheAttackersConnectionWhileOthersAreServed() throws {
        let (_, larder) = try start(config: "workers = 1\nsend_timeout = \"2s\"")
        func servedMeanwhile(_ what: String) throws {
            let r = try h2c(larder.port, "/h2/after?size=10")
            XCTAssertTrue(r.out.hasPrefix("200 2"), "after \(what): \(r.out) \(r.stderr)")
        }
        let attacks: [(String, [String])] = [
            ("rapid reset", ["rapid-reset", "5000"]),
            ("MadeYouReset", ["made-you-reset", "1000"]),
            ("CONTINUATION flood", ["continuation", "10000"]),
            ("PING flood", ["ping-flood", "200000"]),
            ("SETTINGS flood", ["settings-flood", "200000"]),
            ("a window opened a byte at a time", ["window-trickle", "/h2/big?size=2000000"]),
        ]
        for (name, arguments) in attacks {
            let lines = try h2client(larder.port, arguments)
            XCTAssertTrue(lines.last?.hasSuffix("closed=1") ?? false, "\(name): \(lines)")
            if name.contains("window") {
                let body = lines.first { $0.hasPrefix("BODY") } ?? ""
                let frames = Int(body.split(separator: "=").last ?? "") ?? -1
                XCTAssertLessThan(frames, 20, "no DATA frame per byte of window: \(lines)")
            }
            try servedMeanwhile(name)
        }
        // A window held at zero: the stream is reset after send_timeout,
        // and the worker serves others while it waits.
        let stalled = try startChild("/usr/bin/python3", [Paths.h2client, String(larder.port), "zero-window", "/h2/big?size=2000000"])
        try servedMeanwhile("a zero window")
        XCTAssertNotNil(stalled.waitForExit(timeout: 20), "the stalled stream ended")
        stalled.drainOutput()
        XCTAssertTrue(stalled.stdout.contains("RESET 8"), stalled.stdout + stalled.stderr)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "http2_connections_refused"), 4)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "send_timeouts"), 1)
    }

    func testH2loadAndNghttpAgainstTheBinary() throws {
        let (_, larder) = try start(config: "")
        let load = try runProgram(["h2load", "-n", "2000", "-c", "4", "-m", "10", "http://127.0.0.1:\(larder.port)/h2/load?size=1024"])
        XCTAssertTrue(load.stdout.contains("2000 succeeded, 0 failed"), load.stdout + load.stderr)
        XCTAssertTrue(load.stdout.contains("2000 2xx"), load.stdout)
        let nghttp = try runProgram(["nghttp", "-v", "http://127.0.0.1:\(larder.port)/h2/load?size=1024"])
        XCTAssertEqual(nghttp.status, 0, nghttp.stderr)
        XCTAssertTrue(nghttp.stdout.contains(":status: 200"), nghttp.stdout)
    }
}
