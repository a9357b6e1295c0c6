import Foundation
import XCTest
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// TLS towards clients: `[[listen]]` tables with `tls = true`, certificates
/// chosen by SNI and re-read on SIGHUP, and the mistakes clients and
/// operators make. Clients are curl and `openssl s_client`.
final class TLSListenerTests: ConfiguredTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = temporaryPath("larder-tls")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    /// A self-signed certificate for `names` (the first is its CN), in
    /// dir/FILE.pem and dir/FILE.key (mode 0600).
    @discardableResult
    private func certificate(_ file: String, names: [String], organization: String? = nil) throws -> (pem: String, key: String) {
        let (pem, key) = ("\(dir)/\(file).pem", "\(dir)/\(file).key")
        let subject = "/CN=\(names[0])" + (organization.map { "/O=\($0)" } ?? "")
        let made = try runProgram(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-keyout", key, "-out", pem, "-days", "2", "-subj", subject,
                            "-addext", "subjectAltName=" + names.map { "DNS:\($0)" }.joined(separator: ",")])
        XCTAssertEqual(made.status, 0, made.stderr)
        chmod(key, 0o600)
        return (pem, key)
    }

    /// A larder with a plain listener and a TLS one whose table holds
    /// `tls` (and `top` above the tables): the larder and the TLS port.
    private func startTLSLarder(upstream: String, tls: String, top: String = "",
                                extra: [String] = []) throws -> (larder: LarderProcess, port: Int) {
        let config = try writeConfig("""
            \(top)
            [[listen]]
            address = "127.0.0.1:0"

            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            \(tls)
            """)
        let larder = try startLarder(upstream: upstream, ["--config", config] + extra)
        let port = try XCTUnwrap(larder.child.stderr.firstMatch(of: #/127\.0\.0\.1:(\d+) \(TLS\)/#).flatMap { Int($0.1) },
                                 larder.child.stderr)
        return (larder, port)
    }

    /// curl against the TLS port as `name` (resolved to 127.0.0.1),
    /// trusting `ca`: exit status, the body (in a file) and what -w printed.
    private func curl(_ port: Int, _ target: String, name: String = "a.test", ca: String,
                      _ more: [String] = []) throws -> (status: Int32?, body: [UInt8], out: String, stderr: String) {
        let body = "\(dir)/body-\(UUID().uuidString)"
        let r = try runProgram(["curl", "-sS", "--cacert", ca, "--resolve", "\(name):\(port):127.0.0.1", "-o", body,
                         "-w", "%{http_code} %{http_version} %header{cache-status}"] + more + ["https://\(name):\(port)\(target)"])
        let bytes = (try? Data(contentsOf: URL(fileURLWithPath: body))).map { [UInt8]($0) } ?? []
        return (r.status, bytes, r.stdout, r.stderr)
    }

    /// What `openssl s_client` saw of a handshake with the TLS port and one
    /// request (Connection: close) after it: it ends when Larder closes,
    /// having read the session tickets that come after a TLS 1.3 handshake.
    private func handshake(_ port: Int, name: String?, _ more: [String] = []) throws -> (status: Int32?, text: String) {
        var arguments = ["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-ign_eof", "-crlf"] + more
        if let name { arguments += ["-servername", name] } else { arguments.append("-noservername") }
        let child = try startChild("/usr/bin/env", arguments, withInput: true)
        child.send("GET /handshake HTTP/1.1\nHost: a.test\nConnection: close\n\n")
        let status = child.waitForExit(timeout: 20)
        child.drainOutput()
        return (status, child.stdout + child.stderr)
    }

    func testMissesAndHitsOverTLSIncludingLargeDiskBodies() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"])
        // A small memory tier: the 3 MB body is kept on disk and sent from its file.
        let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"",
                                                extra: ["--cache-dir", dir + "/cache", "--memory-limit", "1MiB"])
        // HTTP/1.1 over TLS here (HTTP2ClientTests has h2, which ALPN prefers).
        let first = try curl(port, "/tls/small?size=5000", ca: a.pem, ["-v", "--http1.1"])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.out.hasPrefix("200 1.1"), first.out)
        XCTAssertTrue(first.stderr.contains("ALPN: server accepted http/1.1"), first.stderr)
        XCTAssertEqual(first.body.count, 5000)
        let second = try curl(port, "/tls/small?size=5000", ca: a.pem, ["--http1.1"])
        XCTAssertTrue(second.out.contains("hit"), second.out)
        XCTAssertEqual(second.body, first.body)
        XCTAssertEqual(try origin.count("/tls/small?size=5000"), 1)

        let plain = try larder.client().get("/tls/big?size=3000000")
        XCTAssertEqual(plain.body.count, 3_000_000)
        for _ in 0..<2 {
            let big = try curl(port, "/tls/big?size=3000000", ca: a.pem, ["--http1.1"])
            XCTAssertEqual(big.status, 0, big.stderr)
            XCTAssertTrue(big.out.contains("hit"), big.out)
            XCTAssertEqual(big.body, plain.body, "the same bytes as over plain HTTP")
        }
        XCTAssertEqual(try origin.count("/tls/big?size=3000000"), 1)
        // Keep-alive: several requests over one TLS connection.
        let both = try runProgram(["curl", "-sS", "--http1.1", "--cacert", a.pem, "--resolve", "a.test:\(port):127.0.0.1", "-o", "/dev/null",
                            "-o", "/dev/null", "-w", "%{num_connects} ", "https://a.test:\(port)/tls/small?size=5000",
                            "https://a.test:\(port)/tls/k?size=10"])
        XCTAssertEqual(both.stdout, "1 0 ", "the second request reused the connection")
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "tls_handshakes"), 5)
    }

    func testSNIChoosesTheCertificateAndStrictSNIRefusesOtherNames() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test", "*.a.test"])
        let b = try certificate("b", names: ["b.test"])
        let tls = """
            certificate = "\(a.pem)"
            key = "\(a.key)"
            %@
            [[listen.certificates]]
            certificate = "\(b.pem)"
            key = "\(b.key)"
            """
        let (_, port) = try startTLSLarder(upstream: origin.url, tls: tls.replacingOccurrences(of: "%@", with: ""))
        XCTAssertTrue(try handshake(port, name: "b.test").text.contains("CN = b.test"))
        XCTAssertTrue(try handshake(port, name: "x.a.test").text.contains("CN = a.test"), "a wildcard name")
        XCTAssertTrue(try handshake(port, name: "other.test").text.contains("CN = a.test"), "an unknown name gets the default")
        XCTAssertTrue(try handshake(port, name: nil).text.contains("CN = a.test"), "no name gets the default")
        let viaB = try curl(port, "/sni?size=10", name: "b.test", ca: b.pem)
        XCTAssertTrue(viaB.out.hasPrefix("200"), viaB.out + viaB.stderr)

        let (strict, strictPort) = try startTLSLarder(upstream: origin.url, tls: tls.replacingOccurrences(of: "%@", with: "strict_sni = true"))
        let refused = try handshake(strictPort, name: "other.test")
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.text.contains("unrecognized name"), refused.text)
        XCTAssertNotEqual(try handshake(strictPort, name: nil).status, 0, "no name is refused too")
        XCTAssertTrue(try handshake(strictPort, name: "b.test").text.contains("CN = b.test"), "known names still work")
        XCTAssertGreaterThanOrEqual(try waitForStats(strict, "tls_handshake_failures", atLeast: 2), 2)
    }

    func testClientsThatSpeakTheWrongProtocolGetClearAnswersAndOthersAreServed() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"])
        let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"")
        // Plain HTTP to the TLS port: a plain 400 that says what to do.
        let plain = try HTTPClient(port: port).get("/wrong")
        XCTAssertEqual(plain.status, 400)
        XCTAssertTrue(String(decoding: plain.body, as: UTF8.self).contains("https://"), plain.text)
        // TLS to the plain port: the handshake fails, the plain port goes on.
        let tlsToPlain = try runProgram(["curl", "-sS", "-k", "https://127.0.0.1:\(larder.port)/wrong"])
        XCTAssertEqual(tlsToPlain.status, 35, tlsToPlain.stderr)
        XCTAssertEqual(try larder.client().get("/right?size=7").status, 200)
        // A client that does not trust the certificate gives up; others are served.
        let untrusted = try runProgram(["curl", "-sS", "--resolve", "a.test:\(port):127.0.0.1", "https://a.test:\(port)/x"])
        XCTAssertEqual(untrusted.status, 60, untrusted.stderr)
        XCTAssertTrue(try curl(port, "/right?size=7", ca: a.pem).out.hasPrefix("200"))
        XCTAssertEqual(try statsFigure(larder, "plain_http_on_tls"), 1)
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "tls_handshake_failures", atLeast: 1), 1)
    }

    func testAStalledHandshakeIsClosedAfterHandshakeTimeout() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"])
        let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"",
                                                top: "handshake_timeout = \"1s\"\nheader_timeout = \"60s\"")
        // The start of a client hello, then nothing (slowloris on the handshake).
        let stalled = try HTTPClient(port: port)
        try stalled.send([0x16, 0x03, 0x01, 0x02, 0x00])
        let idle = try HTTPClient(port: port)  // sends nothing at all
        XCTAssertTrue(try curl(port, "/meanwhile?size=9", ca: a.pem).out.hasPrefix("200"), "others are served meanwhile")
        XCTAssertTrue(stalled.isClosedByPeer(), "closed by handshake_timeout (the client's read timeout is 20 s)")
        XCTAssertTrue(idle.isClosedByPeer())
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "tls_handshake_failures", atLeast: 2), 2)
    }

    func testSessionsAreResumed() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"])
        let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"")
        let session = dir + "/session"
        for version in ["-tls1_2", "-tls1_3"] {
            let first = try handshake(port, name: "a.test", [version, "-sess_out", session])
            XCTAssertTrue(first.text.contains("New, TLSv1."), first.text)
            let again = try handshake(port, name: "a.test", [version, "-sess_in", session])
            XCTAssertTrue(again.text.contains("Reused, TLSv1."), again.text)
        }
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "tls_resumed"), 2)
    }

    func testAnOCSPResponseIsStapledForClientsThatAsk() throws {
        // A CA, a certificate it signed and the CA's OCSP answer for it (openssl ocsp as responder).
        func openssl(_ arguments: [String]) throws {
            let r = try runProgram(["openssl"] + arguments)
            XCTAssertEqual(r.status, 0, "\(arguments): \(r.stderr)")
        }
        let p256 = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        try openssl(["req", "-x509"] + p256 + ["-keyout", "\(dir)/ca.key", "-out", "\(dir)/ca.pem", "-days", "2", "-subj", "/CN=test ca"])
        try openssl(["req"] + p256 + ["-keyout", "\(dir)/leaf.key", "-out", "\(dir)/leaf.csr", "-subj", "/CN=a.test"])
        try "subjectAltName=DNS:a.test\n".write(toFile: "\(dir)/ext", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "\(dir)/leaf.csr", "-CA", "\(dir)/ca.pem", "-CAkey", "\(dir)/ca.key", "-set_serial",
                     "0x1234", "-days", "2", "-extfile", "\(dir)/ext", "-out", "\(dir)/leaf.pem"])
        try "V\t301231235959Z\t\t1234\tunknown\t/CN=a.test\n".write(toFile: "\(dir)/index.txt", atomically: true, encoding: .utf8)
        try openssl(["ocsp", "-issuer", "\(dir)/ca.pem", "-cert", "\(dir)/leaf.pem", "-reqout", "\(dir)/req.der", "-no_nonce"])
        try openssl(["ocsp", "-index", "\(dir)/index.txt", "-rsigner", "\(dir)/ca.pem", "-rkey", "\(dir)/ca.key", "-CA", "\(dir)/ca.pem",
                     "-reqin", "\(dir)/req.der", "-respout", "\(dir)/resp.der", "-ndays", "1"])
        chmod("\(dir)/leaf.key", 0o600)
        let origin = try startOrigin()
        let (_, port) = try startTLSLarder(upstream: origin.url, tls: """
            certificate = "\(dir)/leaf.pem"
            key = "\(dir)/leaf.key"
            ocsp = "\(dir)/resp.der"
            """)
        let stapled = try handshake(port, name: "a.test", ["-status"])
        XCTAssertTrue(stapled.text.contains("OCSP Response Status: successful"), stapled.text)
        XCTAssertTrue(stapled.text.contains("Cert Status: good"), stapled.text)
        let unasked = try handshake(port, name: "a.test")
        XCTAssertFalse(unasked.text.contains("OCSP Response Status"), "stapled only when asked")
    }

    func testCertificatesThatCannotBeUsedStopTheStartWithTheFileNamed() throws {
        let a = try certificate("a", names: ["a.test"])
        let b = try certificate("b", names: ["b.test"])
        try "not a key".write(toFile: dir + "/broken.key", atomically: true, encoding: .utf8)
        let cases: [(String, String)] = [
            ("certificate = \"\(dir)/missing.pem\"\nkey = \"\(a.key)\"", "missing.pem"),
            ("certificate = \"\(a.pem)\"\nkey = \"\(dir)/broken.key\"", "broken.key"),
            ("certificate = \"\(a.pem)\"\nkey = \"\(b.key)\"", "does not belong"),
            ("certificate = \"\(a.pem)\"", "key"),
            ("certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"\nocsp = \"\(dir)/missing.ocsp\"", "missing.ocsp"),
        ]
        for (table, named) in cases {
            let config = try writeConfig("upstream = \"http://127.0.0.1:9\"\n[[listen]]\naddress = \"127.0.0.1:0\"\ntls = true\n" + table)
            for command in [["check-config", "--config", config], ["serve", "--config", config, "--admin-listen", "none"]] {
                let child = try startChild(Paths.larder, command)
                XCTAssertEqual(child.waitForExit(timeout: 20), 78, "\(command): \(child.stderr)")
                child.drainOutput()
                XCTAssertTrue(child.stderr.contains(named), "\(command) names \(named): \(child.stderr)")
                XCTAssertFalse(child.stderr.contains("listening on"), child.stderr)
            }
        }
    }

    func testReloadReadsCertificatesAgainKeepsConnectionsAndRefusesBrokenOnes() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"], organization: "first")
        let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"")
        // A client that keeps its connection across the reload.
        let client = try startChild("/usr/bin/env", ["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername",
                                                     "a.test", "-quiet", "-crlf"], withInput: true)
        client.send("GET /reload/1?size=5 HTTP/1.1\nHost: a.test\n\n")
        XCTAssertNotNil(client.waitFor("HTTP/1.1 200"), client.stderr)

        try certificate("a", names: ["a.test"], organization: "renewed")  // renewed in place
        kill(larder.child.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        var renewed = false
        while !renewed && Date() < deadline {
            renewed = try handshake(port, name: "a.test").text.contains("O = renewed")
            if !renewed { usleep(50_000) }
        }
        XCTAssertTrue(renewed, "new handshakes present the renewed certificate")
        client.send("GET /reload/2?size=5 HTTP/1.1\nHost: a.test\n\n")
        XCTAssertNotNil(client.waitFor("(?s)HTTP/1.1 200.*HTTP/1.1 200"), "the open connection was kept: \(client.stdout)")

        try "garbage".write(toFile: a.pem, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        XCTAssertNotNil(larder.child.waitFor("SIGHUP: configuration not reloaded.*a.pem"), larder.child.stderr)
        XCTAssertTrue(try handshake(port, name: "a.test").text.contains("O = renewed"), "the running certificate stays")
    }

    /// The access log names the TLS server name the client sent, the host
    /// and the upstream server, in a custom template and in JSON.
    func testTheAccessLogSaysWhoAndWhereOverTLS() throws {
        let origin = try startOrigin()
        let a = try certificate("a", names: ["a.test"])
        let server = String(origin.url.dropFirst("http://".count))
        for format in ["custom", "json"] {
            let log = temporaryPath("larder-tls-log") + ".log"
            addTeardownBlock { try? FileManager.default.removeItem(atPath: log) }
            let top = "access_log = \"\(log)\"\naccess_log_format = \"\(format)\"\n"
                + (format == "custom" ? "access_log_template = \"$protocol $host $tls_sni $upstream_addr $status\"\n" : "")
            let (larder, port) = try startTLSLarder(upstream: origin.url, tls: "certificate = \"\(a.pem)\"\nkey = \"\(a.key)\"", top: top)
            let target = "/tls/log-\(format)?size=10"
            XCTAssertEqual(try curl(port, target, ca: a.pem, ["--http1.1"]).status, 0)
            XCTAssertEqual(try curl(port, target, ca: a.pem, ["--http2"]).status, 0)
            XCTAssertEqual(try larder.client().get(target).status, 200)
            let written = lines(atLeast: 3, in: log)
            if format == "custom" {
                XCTAssertEqual(written, ["HTTP/1.1 a.test:\(port) a.test \(server) 200", "HTTP/2 a.test:\(port) a.test - 200",
                                         "HTTP/1.1 127.0.0.1 - - 200"], "a miss, then hits over h2 and plain (the Host as sent)")
                continue
            }
            let objects = written.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            XCTAssertEqual(objects.map { $0["tls_sni"] as? String }, ["a.test", "a.test", nil], written.joined(separator: "\n"))
            XCTAssertEqual(objects.map { $0["upstream_addr"] as? String }, [server, "", ""])
        }
    }
}
