import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// End-to-end cases that need their own larder settings or upstream.
final class ConfiguredProxyTests: ConfiguredTestCase {

    /// `io_threads`: how many threads make the disk reads a worker must not
    /// wait for (4 unless set; /stats says how many there may be).
    func testIOThreadsAreApplied() throws {
        for (setting, expected) in [("", 4), ("io_threads = 9\n", 9)] {
            let l = try startLarder(upstream: "http://127.0.0.1:\(unusedPort())", ["--config", try writeConfig(setting)])
            XCTAssertEqual(try statsFigure(l, "io_threads"), expected, setting)
            l.stop()
        }
    }

    func testDeadUpstreamGives502() throws {
        let larder = try startLarder(upstream: "http://127.0.0.1:\(unusedPort())")
        let c = try larder.client()
        let r = try c.get("/anything")
        XCTAssertEqual(r.status, 502)
        XCTAssertFalse(r.body.isEmpty)
        // The connection survives an upstream failure.
        XCTAssertEqual(try c.get("/again").status, 502)
    }

    func testSlowUpstreamGives504() throws {
        let origin = try startOrigin()
        let config = try writeConfig("upstream_timeout = \"1s\"\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let started = Date()
        let r = try larder.client().get("/slow?delay=5")
        XCTAssertEqual(r.status, 504)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4.5, "504 should come at the timeout, not after the origin answers")
    }

    func testLRUEvictionUnderASmallMemoryLimit() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--memory-limit", "100KiB"])
        let c = try larder.client()
        for i in 1...4 { XCTAssertEqual(try c.get("/e\(i)?size=30000").status, 200) }
        // 4 x 30 KB do not fit in 100 KiB: the least recently used (/e1) went.
        XCTAssertTrue(try c.get("/e4?size=30000").header("cache-status")?.contains("hit") ?? false)
        let e1 = try c.get("/e1?size=30000")
        XCTAssertEqual(e1.header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertEqual(try origin.count("/e1?size=30000"), 2)
        XCTAssertEqual(try origin.count("/e4?size=30000"), 1)
    }

    func testBodyLargerThanTheMemoryLimitIsStreamedIntact() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--memory-limit", "1MiB"])
        let target = "/huge?size=12000000"
        let direct = try HTTPClient(port: origin.port).get(target).body
        let through = try larder.client().get(target)
        XCTAssertEqual(through.status, 200)
        XCTAssertEqual(through.body.count, 12_000_000)
        XCTAssertTrue(through.body == direct)
        let chunked = try larder.client().get(target + "&chunked=1")
        XCTAssertEqual(chunked.body.count, 12_000_000)
        // Too large to store: the next request goes upstream again.
        XCTAssertFalse(try larder.client().get(target).header("cache-status")?.contains("hit") ?? true)
    }

    func testRequestBodyOverTheLimitGets413() throws {
        let origin = try startOrigin()
        let config = try writeConfig("max_body_size = \"1KiB\"\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let c = try larder.client()
        try c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n")
        XCTAssertEqual(try c.readResponse().status, 413)
        let d = try larder.client()
        try d.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" + String(repeating: "x", count: 2048) + "\r\n0\r\n\r\n")
        XCTAssertEqual(try d.readResponse().status, 413)
        XCTAssertEqual(try origin.count("/echo"), 0)
    }

    func testIncompleteRequestHeadTimesOutWith408() throws {
        let origin = try startOrigin()
        let config = try writeConfig("header_timeout = \"1s\"\nkeepalive_timeout = \"1h\"\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config], environment: LarderProcess.testClock)
        let c = try larder.client()
        try c.send("GET / HTTP/1.1\r\nHost: t\r\n")  // never finished
        XCTAssertEqual(try c.readResponse().status, 408)
        XCTAssertTrue(c.isClosedByPeer())
        // An idle keep-alive connection is closed without an answer, once
        // its hour has passed (on Larder's clock, moved on: the client's
        // reads would give up after 20 s).
        let idle = try larder.client()
        XCTAssertEqual(try idle.get("/x").status, 200)
        // A hit last: its exchange ends before its answer leaves (a miss's
        // ends once libcurl reports the transfer done, which may come after
        // the client has read it all).
        XCTAssertTrue(try idle.get("/x").header("cache-status")?.contains("hit") ?? false)
        try larder.advanceClock(3601)
        XCTAssertTrue(idle.isClosedByPeer())
    }

    func testSigtermLetsARequestInFlightFinish() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url)
        let c = try larder.client()
        try c.send("GET /drain?delay=1&size=64 HTTP/1.1\r\nHost: t\r\n\r\n")
        // Wait until the request reached the origin, then ask larder to stop.
        let deadline = Date().addingTimeInterval(10)
        while try origin.count("/drain?delay=1&size=64") == 0 && Date() < deadline { usleep(20_000) }
        kill(larder.child.process.processIdentifier, SIGTERM)
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body.count, 64)
        XCTAssertEqual(larder.child.waitForExit(timeout: 15), 0)
    }

    func testUpstreamWithAPathPrefix() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url + "/api/")
        XCTAssertEqual(try larder.client().get("/items?size=3").status, 200)
        XCTAssertEqual(try origin.count("/api/items?size=3"), 1)
    }

    func testSighupReloadsTheConfigAndKeepsTheCache() throws {
        let origin = try startOrigin()
        let config = try writeConfig("# v1: defaults\n")
        let larder = try startLarder(upstream: origin.url, ["--config", config])
        let c = try larder.client()
        _ = try c.get("/kept?size=10")
        try "policy = \"cacheOnly\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        // The new default applies to new requests: a miss is now a 504 (bounded wait).
        let deadline = Date().addingTimeInterval(10)
        var status = 0
        var attempt = 0
        while status != 504 && Date() < deadline {
            attempt += 1
            status = try c.get("/never/\(attempt)?size=1").status  // a new URL each time: a miss
        }
        XCTAssertEqual(status, 504)
        XCTAssertTrue(try c.get("/kept?size=10").header("cache-status")?.contains("hit") ?? false, "cached data survives")
        XCTAssertEqual(try origin.count("/kept?size=10"), 1)

        // An invalid file is refused and the running configuration stays.
        try "policy = \"whenever\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        XCTAssertNotNil(larder.child.waitFor("configuration not reloaded.*:1: policy", timeout: 10), larder.child.stderr)
        XCTAssertEqual(try c.get("/never2?size=1").status, 504)
        XCTAssertEqual(try origin.count("/never2?size=1"), 0)

        // max_object_size sizes the memory tier's shards: a restart applies it.
        try "policy = \"cacheOnly\"\nmax_object_size = \"1MiB\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        kill(larder.child.process.processIdentifier, SIGHUP)
        XCTAssertNotNil(larder.child.waitFor("max_object_size changed.*after a restart", timeout: 10), larder.child.stderr)
    }

    /// The default, as nginx's and Varnish's: a response that sets a cookie
    /// is neither stored nor shared.
    func testStoreSetCookieFalseNeitherStoresNorShares() throws {
        let (origin, larder) = try start(config: "")
        let c = try larder.client()
        _ = try c.get("/cookie?cookie=1")
        let second = try c.get("/cookie?cookie=1")
        XCTAssertEqual(second.header("set-cookie"), "session=2", "every client gets its own cookie from the origin")
        XCTAssertEqual(try origin.count("/cookie?cookie=1"), 2)
        // Responses without Set-Cookie are still cached.
        _ = try c.get("/nocookie")
        XCTAssertTrue(try c.get("/nocookie").header("cache-status")?.contains("hit") ?? false)
        // Concurrent requests are not handed one client's cookie either.
        let target = "/cookie-stampede?cookie=1&delay=0.3"
        let group = DispatchGroup()
        final class Box: @unchecked Sendable { let lock = NSLock(); var statuses: [String] = [] }
        let box = Box()
        for _ in 0..<4 {
            group.enter()
            Thread {
                let r = try? HTTPClient(port: larder.port).get(target)
                box.lock.lock(); box.statuses.append(r?.header("cache-status") ?? "none"); box.lock.unlock()
                group.leave()
            }.start()
        }
        XCTAssertEqual(group.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(box.statuses, Array(repeating: "larder; fwd=uri-miss", count: 4), "each fetched its own")
        XCTAssertEqual(try origin.count(target), 4)
    }

    func testSigtermStopsWithExitZero() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url)
        XCTAssertEqual(try larder.client().get("/x").status, 200)
        kill(larder.child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(larder.child.waitForExit(timeout: 15), 0)
    }
}

/// The command line and config file, run as a user would.
final class CommandLineTests: XCTestCase {
    private func run(_ arguments: [String]) throws -> (status: Int32?, stdout: String, stderr: String) {
        let child = try ChildProcess(Paths.larder, arguments)
        let status = child.waitForExit(timeout: 20)
        if status == nil { child.stop() }
        child.drainOutput()
        return (status, child.stdout, child.stderr)
    }

    /// check-config's exit status for a config file holding `text`.
    private func checkConfigStatus(_ text: String) throws -> Int32? { try run(["check-config", "--config", try config(text)]).status }

    /// check-config refuses a file holding `text` (exit 78), naming the file and then `at` (":LINE: KEY: ...").
    private func assertRefused(_ text: String, _ at: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let path = try config(text)
        let r = try run(["check-config", "--config", path])
        XCTAssertEqual(r.status, 78, text, file: file, line: line)
        XCTAssertTrue(r.stderr.contains(path + at), r.stderr, file: file, line: line)
    }

    private func config(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("larder-cli-\(UUID().uuidString).toml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    /// fuzz/corpus/config: every file is accepted (names starting with
    /// "valid" or "example") or refused with exit 78 and one line naming the
    /// file, never a crash. Found inputs that broke the loader are added here.
    func testConfigCorpusNeverCrashesTheLoader() throws {
        let dir = Paths.packageRoot.appendingPathComponent("fuzz/corpus/config").path
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).sorted()
        XCTAssertGreaterThan(names.count, 10)
        for name in names {
            let r = try run(["check-config", "--config", dir + "/" + name])
            if name.hasPrefix("valid") || name.hasPrefix("example") {
                XCTAssertEqual(r.status, 0, "\(name): \(r.stderr)")
            } else {
                XCTAssertEqual(r.status, 78, "\(name): \(r.stderr)")
                let lines = r.stderr.split(separator: "\n")
                XCTAssertEqual(lines.count, 1, "\(name): \(r.stderr)")
                XCTAssertTrue(lines.first?.hasPrefix("larder: ") ?? false, name)
                XCTAssertTrue(r.stderr.contains(name), "\(name): the message names the file")
            }
        }
    }

    func testVersionAndHelp() throws {
        let v = try run(["--version"])
        XCTAssertEqual(v.status, 0)
        XCTAssertTrue(v.stdout.contains("0."))
        let h = try run(["--help"])
        XCTAssertEqual(h.status, 0)
        XCTAssertTrue(h.stdout.contains("serve"))
    }

    func testShippedConfigIsValid() throws {
        let r = try run(["check-config", "--config", Paths.packageRoot.appendingPathComponent("config/larder.toml").path])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    func testUnknownKeyNamesFileLineAndKey() throws {
        try assertRefused("listen = \"127.0.0.1:8080\"\n# comment\nmemory_limt = \"1MiB\"\n", ":3: memory_limt: unknown key")
    }

    func testDiskOpenFilesOutOfRangeIsRefused() throws {
        try assertRefused("disk_open_files = -1\n", ":1: disk_open_files: must be between 0 and 1000000")
        XCTAssertEqual(try checkConfigStatus("disk_open_files = 0\n"), 0)
    }

    func testIOThreadsOutOfRangeAreRefused() throws {
        try assertRefused("io_threads = 0\n", ":1: io_threads: must be between 1 and 256")
        XCTAssertEqual(try checkConfigStatus("io_threads = 256\n"), 0)
    }

    func testWrongTypeNamesFileLineAndKey() throws {
        let path = try config("upstream = \"http://127.0.0.1:1\"\nworkers = \"many\"\n")
        let r = try run(["serve", "--config", path])
        XCTAssertEqual(r.status, 78)
        XCTAssertTrue(r.stderr.contains("\(path):2: workers:"), r.stderr)
        let bad = try config("memory_limit = true\n")
        let b = try run(["check-config", "--config", bad])
        XCTAssertEqual(b.status, 78)
        XCTAssertTrue(b.stderr.contains(":1: memory_limit: wrong type"), b.stderr)
        let broken = try config("listen = \n")
        let s = try run(["check-config", "--config", broken])
        XCTAssertEqual(s.status, 78)
        XCTAssertTrue(s.stderr.contains("\(broken):1"), s.stderr)
    }

    func testTierLifetimesTakeDurationsAndPresets() throws {
        for good in ["memory_ttl = \"short\"\ndisk_ttl = \"mirror\"\n", "memory_ttl = \"90s\"\ndisk_ttl = \"max\"\n",
                     "memory_ttl = \"never\"\n"] {
            XCTAssertEqual(try checkConfigStatus(good), 0, good)
        }
        try assertRefused("disk_ttl = \"soon\"\n", ":1: disk_ttl:")
        XCTAssertEqual(try checkConfigStatus("memory_ttl = \"mirror\"\n"), 78)
    }

    func testStaleOnDisconnectTakesADurationOrZero() throws {
        for good in ["stale_on_disconnect = \"30m\"\n", "stale_on_disconnect = 0\n", "stale_on_disconnect = \"off\"\n",
                     "[[route]]\nprefix = \"/a/\"\nstale_on_disconnect = 0\n"] {
            XCTAssertEqual(try checkConfigStatus(good), 0, good)
        }
        for (bad, at) in [("stale_on_disconnect = \"forever\"\n", ":1: stale_on_disconnect: expected a duration"),
                          ("stale_on_disconnect = -5\n", ":1: stale_on_disconnect: expected a duration"),
                          ("stale_on_disconnect = \"500ms\"\n", ":1: stale_on_disconnect: expected a duration of at least 1s"),
                          ("[[route]]\nprefix = \"/a/\"\nstale_on_disconnect = \"soon\"\n", ":3: route.stale_on_disconnect: expected a duration")] {
            try assertRefused(bad, at)
        }
    }

    func testCompressTakesAListOfMediaTypes() throws {
        for good in ["compress = [\"application/json\", \"text/*\"]\n", "compress = []\n",
                     "[[route]]\nprefix = \"/a/\"\ncompress = [\"Image/SVG+XML\"]\n"] {
            XCTAssertEqual(try checkConfigStatus(good), 0, good)
        }
        for (bad, at) in [("compress = \"application/json\"\n", ":1: compress: expected a list of media types"),
                          ("compress = [\"json\"]\n", ":1: compress: \"json\" is not a media type"),
                          ("compress = [\"*/*\"]\n", ":1: compress: \"*/*\" is not a media type"),
                          ("compress = [\"text/\"]\n", ":1: compress: \"text/\" is not a media type"),
                          ("compress = [1]\n", ":1: compress: expected a list of media types"),
                          ("[[route]]\nprefix = \"/a/\"\ncompress = [\"text/html; charset=utf-8\"]\n",
                           ":3: route.compress: \"text/html; charset=utf-8\" is not a media type")] {
            try assertRefused(bad, at)
        }
    }

    func testAnUnknownConfiguredPolicyIsAConfigError() throws {
        try assertRefused("# policies\npolicy = \"whenever\"\n", ":2: policy: unknown policy")
        XCTAssertEqual(try checkConfigStatus("allow_client_policy = \"yes\"\n"), 78)
    }

    func testBadFlagsAreUsageErrors() throws {
        XCTAssertEqual(try run(["serve", "--upstream", "ftp://x", "--listen", "127.0.0.1:0"]).status, 64)
        XCTAssertEqual(try run(["serve", "--upstream", "http://127.0.0.1:1", "--memory-limit", "lots"]).status, 64)
        XCTAssertEqual(try run(["serve", "--listen", "127.0.0.1:0"]).status, 64)  // no upstream
        XCTAssertEqual(try run(["serve", "--bogus"]).status, 64)
        XCTAssertEqual(try run(["check-config", "--config", "/nonexistent/larder.toml"]).status, 78)
    }

    /// `larder serve` is parsed on a shorter path (start-up); what it says
    /// about help, the version and mistakes is still that of `larder`.
    func testServeAnswersHelpVersionAndMistakesAsEveryCommandDoes() throws {
        let bogus = try run(["serve", "--bogus"])
        XCTAssertTrue(bogus.stderr.contains("Error: Unknown option '--bogus'"), bogus.stderr)
        XCTAssertTrue(bogus.stderr.contains("Usage: larder serve [--config <config>]"), bogus.stderr)
        XCTAssertTrue(bogus.stderr.contains("See 'larder serve --help' for more information."), bogus.stderr)
        let help = try run(["serve", "--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.contains("USAGE: larder serve [--config <config>]"), help.stdout)
        XCTAssertTrue(help.stdout.contains("--version"), help.stdout)
        let version = try run(["serve", "--version"])
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.stdout, try run(["--version"]).stdout)
        XCTAssertFalse(version.stdout.isEmpty)
        let completion = try run(["serve", "--generate-completion-script", "bash"])
        XCTAssertEqual(completion.status, 0)
        XCTAssertTrue(completion.stdout.contains("complete -o filenames -F _larder larder"), completion.stdout)
        let failed = try run(["serve", "--upstream", "ftp://x", "--listen", "127.0.0.1:0"])
        XCTAssertTrue(failed.stderr.contains("See 'larder --help' for more information."), failed.stderr)
    }
}

/// An https upstream with a private CA, as Larder users of internal APIs have.
final class TLSUpstreamTests: ConfiguredTestCase {
    var origin: Origin!
    var dir = ""

    override func setUpWithError() throws {
        dir = temporaryPath("larder-tls")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let openssl = try startChild("/usr/bin/env", ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                                                      "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2",
                                                      "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"])
        XCTAssertEqual(openssl.waitForExit(timeout: 30), 0, openssl.stderr)
        origin = try Origin(tls: (dir + "/cert.pem", dir + "/key.pem"))
        addTeardownBlock { [origin] in origin?.stop() }
    }

    func testHttpsUpstreamWithPrivateCAIsProxiedAndCached() throws {
        XCTAssertTrue(origin.url.hasPrefix("https://"))
        let larder = try startLarder(upstream: origin.url, ["--config", try writeConfig("upstream_ca_file = \"\(dir)/cert.pem\"\n")])
        let c = try larder.client()
        let miss = try c.get("/tls?size=2000")
        XCTAssertEqual(miss.status, 200)
        XCTAssertEqual(miss.body.count, 2000)
        let hit = try c.get("/tls?size=2000")
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false)
        XCTAssertEqual(hit.body, miss.body)
    }

    func testUntrustedCertificateIs502() throws {
        let r = try startLarder(upstream: origin.url).client().get("/tls")
        XCTAssertEqual(r.status, 502)
        XCTAssertTrue(r.text.contains("SSL") || r.text.contains("certificate"), r.text)
    }
}
