import Foundation
import XCTest
@testable import larder
@testable import Configuration
import TestSupport

/// check-config runs serve's own checks; the config file is found without
/// --config; the admin tools read the admin address and token from it; a
/// typo gets the nearest key.
final class ConfigCheckTests: ConfiguredTestCase {
    private func larder(_ arguments: [String], environment: [String: String] = [:]) throws
        -> (status: Int32?, stdout: String, stderr: String) {
        let child = try startChild(Paths.larder, arguments, environment: environment)
        let status = child.waitForExit(timeout: 30)
        child.drainOutput()
        return (status, child.stdout, child.stderr)
    }

    func testATypoGetsTheNearestKnownName() throws {
        let cases: [(String, String)] = [
            ("memory_limt = \"1MiB\"\n", "memory_limt: unknown key (did you mean memory_limit? known:"),
            // A table's error names its header's line.
            ("listen = \"127.0.0.1:0\"\n[fleat]\nredis = \"redis://127.0.0.1\"\n", ":2: fleat: unknown table (did you mean fleet? known:"),
            // Nested spellings of top-level keys are named as they must be written.
            ("[admin]\nlisten = \"127.0.0.1:0\"\ntoken_file = \"/t\"\n",
             ":1: admin: unknown table (write these as top-level keys before any table: admin_listen, admin_token_file)"),
            ("[cache]\nsize = 1\n", "cache: unknown table (known: route, fleet, presets, upstreams, listen)"),
            ("[[route]]\nprefix = \"/a/\"\npolcy = \"reloadIgnoringCacheData\"\n", "route.polcy: unknown route key (did you mean policy?"),
            ("[[listen]]\naddress = \"127.0.0.1:0\"\ntsl = true\n", "listen.tsl: unknown listen key (did you mean tls?"),
        ]
        for (text, message) in cases {
            let r = try larder(["check-config", "--config", try writeConfig(text)])
            XCTAssertEqual(r.status, 78, text)
            XCTAssertTrue(r.stderr.contains(message), "\(text): \(r.stderr)")
        }
        let far = try larder(["check-config", "--config", try writeConfig("zebra = 1\n")])
        XCTAssertFalse(far.stderr.contains("did you mean"), far.stderr)
    }

    func testCheckConfigRefusesWhatServeRefusesBeforeSayingOk() throws {
        let cases: [(String, String)] = [
            ("admin_listen = \"0.0.0.0:0\"\n", "is not a loopback address and no admin token is set"),
            ("[fleet]\nredis = \"redis://10.9.8.7:6379\"\n", "password"),
            // Issue 59: check-config said ok, serve exited 1 (or served 502s for the CA file).
            ("admin_token_file = \"/nonexistent/token\"\n", "admin_token_file: cannot read /nonexistent/token"),
            ("admin_token = \"an-admin-token-1\"\nadmin_read_token_file = \"/nonexistent/read\"\n",
             "admin_read_token_file: cannot read /nonexistent/read"),
            ("access_log = \"/nonexistent-dir/access.log\"\n", "access_log: cannot write /nonexistent-dir/access.log"),
            ("upstream_ca_file = \"/nonexistent/ca.pem\"\n", "upstream_ca_file: cannot read /nonexistent/ca.pem"),
            ("admin_token = \"one-token-for-both\"\nadmin_read_token = \"one-token-for-both\"\n",
             "admin_read_token: equal to the admin token"),
        ]
        for (text, message) in cases {
            let path = try writeConfig("upstream = \"http://127.0.0.1:9\"\nlisten = \"127.0.0.1:0\"\n" + text)
            let check = try larder(["check-config", "--config", path])
            XCTAssertEqual(check.status, 78, text)
            XCTAssertTrue(check.stderr.contains(message), check.stderr)
            XCTAssertFalse(check.stdout.contains("ok"), "no ok before the refusal: \(check.stdout)")
            let serve = try larder(["serve", "--config", path])
            XCTAssertEqual(serve.status, 78, "serve refuses it too: \(serve.stderr)")
            XCTAssertTrue(serve.stderr.contains(message), serve.stderr)
        }
        // Two [[listen]] tables with one address.
        let port = unusedPort()
        let twice = try writeConfig("upstream = \"http://127.0.0.1:9\"\n"
                                    + String(repeating: "[[listen]]\naddress = \"127.0.0.1:\(port)\"\n", count: 2))
        for command in ["check-config", "serve"] {
            let r = try larder([command, "--config", twice])
            XCTAssertEqual(r.status, 78, "\(command): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("listen: 127.0.0.1:\(port) is named by two [[listen]] tables"), r.stderr)
        }
        // Addresses that are not this machine's (192.0.2.0/24 is for documentation, never assigned).
        for (text, message) in [("[[listen]]\naddress = \"192.0.2.1:8080\"\n", "listen: cannot listen on 192.0.2.1:8080: not an address of this machine"),
                                ("listen = \"127.0.0.1:0\"\nadmin_listen = \"192.0.2.1:8081\"\nadmin_token = \"a-long-enough-token\"\n",
                                 "admin_listen: cannot listen on 192.0.2.1:8081: not an address of this machine")] {
            let path = try writeConfig("upstream = \"http://127.0.0.1:9\"\n" + text)
            for command in ["check-config", "serve"] {
                let r = try larder([command, "--config", path])
                XCTAssertEqual(r.status, 78, "\(command): \(r.stderr)")
                XCTAssertTrue(r.stderr.contains(message), "\(command): \(r.stderr)")
            }
        }
        // A port in use is no mistake of the file: check-config passes (a running Larder holds its port), serve exits 1.
        let holder = try SilentServer()
        let taken = try writeConfig("upstream = \"http://127.0.0.1:9\"\nlisten = \"127.0.0.1:\(holder.port)\"\n")
        XCTAssertEqual(try larder(["check-config", "--config", taken]).status, 0)
        XCTAssertEqual(try larder(["serve", "--config", taken]).status, 1)
        holder.stop()
        let withToken = try writeConfig("admin_listen = \"0.0.0.0:0\"\nadmin_token = \"a-long-enough-token\"\n")
        XCTAssertEqual(try larder(["check-config", "--config", withToken]).status, 0)
    }

    /// A cache_dir serve cannot use does not stop it (it serves from memory
    /// and logs "disk tier disabled"): check-config says so beforehand.
    func testACacheDirectoryServeCannotUseIsWarnedAbout() throws {
        let file = temporaryPath("larder-not-a-dir")
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        let cases = [(file, "cache_dir \(file) is not a directory: serve would run without a disk tier"),
                     (file + "/sub", "cache_dir \(file)/sub cannot be created: \(file) is not a directory")]
        for (directory, warning) in cases {
            let r = try larder(["check-config", "--config", try writeConfig("cache_dir = \"\(directory)\"\n")])
            XCTAssertEqual(r.status, 0, "serve would start: \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("warning: " + warning), r.stderr)
        }
        let usable = try larder(["check-config", "--config", try writeConfig("cache_dir = \"\(temporaryPath("larder-new-cache"))\"\n")])
        XCTAssertEqual(usable.status, 0)
        XCTAssertFalse(usable.stderr.contains("warning"), usable.stderr)
    }

    func testTheConfigFileIsFoundWithoutAFlagAndTheToolsUseItsAdminAddressAndToken() throws {
        let origin = try startOrigin()
        let adminPort = unusedPort()
        let token = temporaryPath("larder-token")
        try "tool-token-1234\n".write(toFile: token, atomically: true, encoding: .utf8)
        let path = try writeConfig("""
            upstream = "\(origin.url)"
            listen = "127.0.0.1:0"
            admin_listen = "127.0.0.1:\(adminPort)"
            admin_token_file = "\(token)"
            workers = 1
            """)
        let environment = ["LARDER_CONFIG": path]
        let check = try larder(["check-config"], environment: environment)
        XCTAssertEqual(check.status, 0, check.stderr)
        XCTAssertTrue(check.stdout.hasPrefix("\(path): ok"), check.stdout)
        if !FileManager.default.fileExists(atPath: "/etc/larder/larder.toml") {
            let none = try larder(["check-config"])
            XCTAssertEqual(none.status, 64)
            XCTAssertTrue(none.stderr.contains("no config file"), none.stderr)
        }
        let serve = try startChild(Paths.larder, ["serve"], environment: environment)
        let port = try XCTUnwrap(serve.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), serve.stderr)
        XCTAssertEqual(try HTTPClient(port: port).get("/tools/a").status, 200)
        // No --admin, no --admin-token-file: both from the file.
        let stats = try larder(["stats"], environment: environment)
        XCTAssertEqual(stats.status, 0, stats.stderr)
        XCTAssertTrue(stats.stdout.contains("\"misses\": 1"), stats.stdout)
        let purge = try larder(["purge", "/tools/a"], environment: environment)
        XCTAssertEqual(purge.status, 0, purge.stderr)
        XCTAssertTrue(purge.stdout.contains("purged 1 stored response"), purge.stdout)
        // A flag still wins over the file.
        let elsewhere = try larder(["stats", "--admin", "http://127.0.0.1:1"], environment: environment)
        XCTAssertEqual(elsewhere.status, 69, elsewhere.stderr)
    }

    func testPrintShowsTheWholeEffectiveConfigurationAndReadsBackTheSame() throws {
        let path = try writeConfig("""
            upstream = "http://127.0.0.1:9"
            memory_limit = "300MB"
            workers = 3
            compress = ["application/json", "text/*"]
            admin_token = "secret-token-abc"
            stale_on_disconnect = "off"

            [presets]
            short = "2m"

            [[listen]]
            address = "127.0.0.1:0"
            http2 = false

            [[listen]]
            address = "127.0.0.1:0"

            [[route]]
            prefix = "/api/"
            policy = "cacheElseFetch"
            default_ttl = "short"
            ignore_upstream_cache_control = true
            tags = ["api"]
            methods = ["GET"]
            memory_ttl = "never"
            disk_ttl = "mirror"
            ignore_query_params = ["utm_source"]
            key_headers = ["X-Tenant"]

            [[route]]
            prefix = "/static/"
            hosts = ["Img.example.com", "*.cdn.example.com"]
            glob = "*.jpg"
            disk = false
            negative_ttl = "30s"
            compress = []

            [[route]]
            prefix = "/graphql"
            cache_post = true
            max_post_body = "32KiB"
            normalize_json = true
            uncached_rpc_methods = ["send"]

            [fleet]
            redis = "redis://127.0.0.1:6390"
            name = "f1"
            node = "n1"
            timeout = "3s"
            """)
        let printed = try larder(["check-config", "--print", "--config", path])
        XCTAssertEqual(printed.status, 0, printed.stderr)
        let lines = printed.stdout.split(separator: "\n").map(String.init)
        for key in ["listen", "upstream", "memory_limit", "disk_ttl", "admin_token", "io_threads", "http2_max_concurrent_streams",
                    "admin_healthz_public", "compress", "upstream_ca_file", "disk_open_files"] {
            XCTAssertTrue(lines.contains { $0.hasPrefix("\(key) = ") || $0.hasPrefix("# \(key):") }, "\(key) in \(printed.stdout)")
        }
        XCTAssertTrue(lines.contains("memory_limit = \"300000000B\""), "300MB is decimal: \(printed.stdout)")
        XCTAssertTrue(lines.contains("workers = 3"))
        XCTAssertTrue(lines.contains("# admin_token: set in the file (not shown)"))
        XCTAssertFalse(printed.stdout.contains("secret-token-abc"), "tokens are never printed")
        XCTAssertTrue(printed.stdout.contains("[[route]]\nprefix = \"/api/\"\nmethods = [\"GET\"]\npolicy = \"returnCacheDataElseLoad\""),
                      printed.stdout)
        XCTAssertTrue(lines.contains("default_ttl = \"2m\""), "the preset as the file changed it")
        XCTAssertTrue(lines.contains("compress = []"), "a route's compress off")
        XCTAssertTrue(lines.contains("hosts = [\"img.example.com\", \"*.cdn.example.com\"]"), printed.stdout)
        XCTAssertTrue(printed.stdout.contains("cache_post = true\nmax_post_body = \"32768B\"\nnormalize_json = true\n"
                                              + "uncached_rpc_methods = [\"send\"]"), printed.stdout)
        XCTAssertTrue(printed.stdout.contains("[fleet]\nredis = \"redis://127.0.0.1:6390\"\nname = \"f1\"\nnode = \"n1\""))
        XCTAssertTrue(printed.stdout.contains("[[listen]]\naddress = \"127.0.0.1:0\"\nhttp2 = false"))
        // What it prints is a config file that means the same.
        let again = try larder(["check-config", "--print", "--config", try writeConfig(printed.stdout)])
        XCTAssertEqual(again.status, 0, again.stderr)
        func withoutTokens(_ text: String) -> [Substring] { text.split(separator: "\n").filter { !$0.hasPrefix("# admin_token:") } }
        XCTAssertEqual(withoutTokens(again.stdout), withoutTokens(printed.stdout))
    }
}
