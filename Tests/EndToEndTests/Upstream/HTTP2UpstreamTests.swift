import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// HTTP/2 towards an upstream that offers it: nginx from Debian with
/// `listen ... ssl http2` and a certificate made here. nginx answers with
/// the protocol it saw, and logs which connection carried each request.
final class HTTP2UpstreamTests: ConfiguredTestCase {
    var dir = ""

    private static var nginxBinary: String? {
        ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private func startNginx() throws -> Int {
        guard let binary = Self.nginxBinary else {
            throw HarnessError("nginx is not installed: run .ci/install-deps --test (the README's test command does)")
        }
        dir = temporaryPath("larder-h2")
        try FileManager.default.createDirectory(atPath: dir + "/tmp", withIntermediateDirectories: true)
        let openssl = try startChild("/usr/bin/env", ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                                      "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2",
                                                      "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        XCTAssertEqual(openssl.waitForExit(timeout: 30), 0, openssl.stderr)
        let port = unusedPort()
        try """
            worker_processes 1;
            daemon off;
            pid \(dir)/nginx.pid;
            error_log \(dir)/error.log warn;
            events { worker_connections 256; }
            http {
                log_format h2 '$connection $server_protocol $request_uri';
                access_log \(dir)/access.log h2;
                client_body_temp_path \(dir)/tmp; proxy_temp_path \(dir)/tmp; fastcgi_temp_path \(dir)/tmp;
                uwsgi_temp_path \(dir)/tmp; scgi_temp_path \(dir)/tmp;
                server {
                    listen 127.0.0.1:\(port) ssl http2;
                    ssl_certificate \(dir)/cert.pem;
                    ssl_certificate_key \(dir)/key.pem;
                    location / {
                        add_header Cache-Control "max-age=60";
                        return 200 "protocol=$server_protocol uri=$request_uri\\n";
                    }
                }
            }
            """.write(toFile: dir + "/nginx.conf", atomically: true, encoding: .utf8)
        let child = try startChild(binary, ["-p", dir, "-c", dir + "/nginx.conf", "-e", dir + "/error.log"])
        // Ready when it accepts connections (bounded).
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline {
            if (try? HTTPClient(port: port)) != nil { return port }
            if !child.process.isRunning { break }
            usleep(20_000)
        }
        throw HarnessError("nginx did not start: \(child.stderr) \((try? String(contentsOfFile: dir + "/error.log", encoding: .utf8)) ?? "")")
    }

    func testRequestsGoUpstreamOverHTTP2AndShareConnections() throws {
        let port = try startNginx()
        let l = try startLarder(upstream: "https://127.0.0.1:\(port)",
                                ["--config", try writeConfig("upstream_ca_file = \"\(dir)/cert.pem\"\n")])
        let c = try l.client()
        let first = try c.get("/h2")
        XCTAssertEqual(first.status, 200)
        XCTAssertEqual(first.text, "protocol=HTTP/2.0 uri=/h2\n")
        XCTAssertTrue(isHit(try c.get("/h2")))

        // Many requests at once travel as streams of a few connections.
        let count = 24
        let group = DispatchGroup()
        final class Results: @unchecked Sendable { let lock = NSLock(); var texts: [String] = [] }
        let results = Results()
        for i in 0..<count {
            group.enter()
            Thread {
                let text = (try? HTTPClient(port: l.port).get("/many/\(i)"))?.text ?? "failed"
                results.lock.lock(); results.texts.append(text); results.lock.unlock()
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(results.texts.filter { $0.hasPrefix("protocol=HTTP/2.0 uri=/many/") }.count, count, "\(results.texts)")
        let log = try String(contentsOfFile: dir + "/access.log", encoding: .utf8)
        let lines = log.split(separator: "\n").filter { $0.contains(" /many/") }
        XCTAssertEqual(lines.count, count)
        let connections = Set(lines.map { $0.split(separator: " ")[0] })
        XCTAssertLessThanOrEqual(connections.count, 4, "\(count) requests over \(connections.count) connections (2 workers)")
    }

    private func isHit(_ r: HTTPResponse) -> Bool { r.header("cache-status")?.contains("; hit") ?? false }
}
