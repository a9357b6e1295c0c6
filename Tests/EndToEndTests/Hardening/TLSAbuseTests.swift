import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 59's TLS weaknesses: a client offering only protocols Larder does
/// not speak got a handshake without ALPN (RFC 7301 section 3.2 says
/// no_application_protocol); the client's cipher order won over the
/// server's; certificates out of their validity were used without a word.
final class TLSAbuseTests: ConfiguredTestCase {
    private var dir = ""

    override func setUpWithError() throws {
        dir = temporaryPath("larder-tls4")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    /// A self-signed certificate for `name`, valid from `start` to `end`
    /// (`openssl ca`'s YYYYMMDDHHMMSSZ; nil: now for two days).
    private func certificate(_ file: String, name: String, start: String? = nil, end: String? = nil) throws -> (pem: String, key: String) {
        let (pem, key, csr) = ("\(dir)/\(file).pem", "\(dir)/\(file).key", "\(dir)/\(file).csr")
        guard let start, let end else {
            let made = try runProgram(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                       "-keyout", key, "-out", pem, "-days", "2", "-subj", "/CN=\(name)",
                                       "-addext", "subjectAltName=DNS:\(name)"])
            XCTAssertEqual(made.status, 0, made.stderr)
            return (pem, key)
        }
        // Dates of our choosing: a one-certificate CA that signs itself.
        let ca = "\(dir)/ca-\(file)"
        try FileManager.default.createDirectory(atPath: ca, withIntermediateDirectories: true)
        try "".write(toFile: ca + "/index.txt", atomically: true, encoding: .utf8)
        try "01\n".write(toFile: ca + "/serial", atomically: true, encoding: .utf8)
        try """
            [ca]
            default_ca = d
            [d]
            database = \(ca)/index.txt
            serial = \(ca)/serial
            new_certs_dir = \(ca)
            default_md = sha256
            policy = p
            [p]
            commonName = supplied
            """.write(toFile: ca + "/ca.cnf", atomically: true, encoding: .utf8)
        let request = try runProgram(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                                      "-keyout", key, "-out", csr, "-subj", "/CN=\(name)"])
        XCTAssertEqual(request.status, 0, request.stderr)
        let signed = try runProgram(["openssl", "ca", "-batch", "-selfsign", "-keyfile", key, "-in", csr, "-out", pem,
                                     "-startdate", start, "-enddate", end, "-config", ca + "/ca.cnf"])
        XCTAssertEqual(signed.status, 0, signed.stderr)
        return (pem, key)
    }

    private func config(_ cert: (pem: String, key: String), origin: String) throws -> String {
        try writeConfig("""
            upstream = "\(origin)"
            [[listen]]
            address = "127.0.0.1:0"
            tls = true
            certificate = "\(cert.pem)"
            key = "\(cert.key)"
            """)
    }

    private func tlsPort(_ larder: LarderProcess) throws -> Int {
        try XCTUnwrap(larder.child.stderr.firstMatch(of: #/127\.0\.0\.1:(\d+) \(TLS\)/#).flatMap { Int($0.1) }, larder.child.stderr)
    }

    /// `openssl s_client` with these arguments, its input closed: what it printed.
    private func handshake(_ port: Int, _ more: [String]) throws -> String {
        let child = try startChild("/usr/bin/env", ["openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-servername", "a.test"] + more,
                                   withInput: true)
        child.send("Q\n")
        _ = child.waitForExit(timeout: 20)
        child.drainOutput()
        return child.stdout + child.stderr
    }

    func testAClientOfferingOnlyUnknownProtocolsIsRefusedAndTheServersCipherOrderWins() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--config", try config(try certificate("a", name: "a.test"), origin: origin.url)])
        let port = try tlsPort(larder)
        let unknown = try handshake(port, ["-alpn", "spdy/3,h3"])
        XCTAssertTrue(unknown.contains("no application protocol"), "the alert RFC 7301 names: \(unknown.suffix(600))")
        XCTAssertTrue(try handshake(port, ["-alpn", "spdy/3,http/1.1"]).contains("ALPN protocol: http/1.1"), "one it speaks is chosen")
        XCTAssertFalse(try handshake(port, []).contains("no application protocol"), "a client that offers none is served")
        // TLS 1.2, the client listing AES-256 first: the server's order (AES-128 first) wins.
        let chosen = try handshake(port, ["-tls1_2", "-cipher", "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-AES128-GCM-SHA256"])
        XCTAssertTrue(chosen.contains("Cipher is ECDHE-ECDSA-AES128-GCM-SHA256"), chosen.suffix(800).description)
    }

    func testCertificatesOutOfTheirValidityAreWarnedAbout() throws {
        let origin = try startOrigin()
        let cases: [(String, String, String, String)] = [
            ("expired", "20200101000000Z", "20200201000000Z", "expired on 2020-02-01T00:00:00Z (notAfter)"),
            ("future", "20990101000000Z", "20990201000000Z", "is not valid before 2099-01-01T00:00:00Z (notBefore)"),
        ]
        for (file, start, end, message) in cases {
            let cert = try certificate(file, name: "a.test", start: start, end: end)
            let path = try config(cert, origin: origin.url)
            let check = try runProgram([Paths.larder, "check-config", "--config", path])
            XCTAssertEqual(check.status, 0, "a warning, not a refusal: \(check.stderr)")
            XCTAssertTrue(check.stderr.contains("warning: TLS certificate \(cert.pem) \(message)"), check.stderr)
            let larder = try startLarder(upstream: origin.url, ["--config", path])
            XCTAssertNotNil(larder.child.waitFor(NSRegularExpression.escapedPattern(for: message)), larder.child.stderr)
        }
        let valid = try runProgram([Paths.larder, "check-config", "--config", try config(try certificate("now", name: "a.test"),
                                                                                           origin: origin.url)])
        XCTAssertFalse(valid.stderr.contains("TLS certificate"), valid.stderr)
    }
}
