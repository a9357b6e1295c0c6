import Foundation
import EdgeControls
import XCTest
@testable import Configuration
import Routing
import Telemetry

/// The config file read into `Settings` without the binary: values reach
/// their settings, mistakes are errors naming file, line and key, and the
/// effective configuration, read back, is the same configuration.
final class ConfigFileTests: XCTestCase {
    private var paths: [String] = []

    override func tearDown() {
        for path in paths { unlink(path) }
        paths = []
    }

    private func write(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "larder-config-\(UUID().uuidString).toml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        paths.append(path)
        return path
    }

    private func load(_ text: String) throws -> Settings {
        var settings = Settings()
        try ConfigFile.load(try write(text), into: &settings)
        return settings
    }

    private func error(_ text: String) throws -> ConfigError {
        var settings = Settings()
        let path = try write(text)
        do {
            try ConfigFile.load(path, into: &settings)
        } catch {
            XCTAssertEqual(error.file, path)
            return error
        }
        XCTFail("no error for: \(text)")
        return ConfigError(file: path, line: nil, key: nil, message: "")
    }

    func testValuesReachTheirSettings() throws {
        let settings = try load("""
            listen = "127.0.0.1:9090"
            upstream = "http://127.0.0.1:9000"
            memory_limit = "64MiB"
            workers = 3

            [[route]]
            prefix = "/api/"
            ignore_query = true
            default_ttl = "5m"
            """)
        XCTAssertEqual(settings.listenPort, 9090)
        XCTAssertEqual(settings.upstream, "http://127.0.0.1:9000")
        XCTAssertEqual(settings.memoryLimitBytes, 64 << 20)
        XCTAssertEqual(settings.workers, 3)
        XCTAssertEqual(settings.routes.count, 1)
        XCTAssertEqual(settings.routes.first?.prefix, "/api/")
        XCTAssertEqual(settings.routes.first?.ignoreQuery, true)
        XCTAssertEqual(settings.routes.first?.defaultTTL, 300)
    }

    func testAMistakeNamesItsLineAndKey() throws {
        let unknown = try error("workers = 2\nmemory_limt = \"1MiB\"\n")
        XCTAssertEqual(unknown.line, 2)
        XCTAssertTrue(unknown.description.contains("memory_limit"), "the nearest key is suggested: \(unknown)")
        let size = try error("\n\nmemory_limit = \"lots\"\n")
        XCTAssertEqual(size.line, 3)
        XCTAssertEqual(size.key, "memory_limit")
        let range = try error("workers = 100000\n")
        XCTAssertEqual(range.key, "workers")
        let toml = try error("workers = \n")
        XCTAssertNil(toml.key)
        XCTAssertTrue(toml.message.hasPrefix("invalid TOML"), toml.message)
        let route = try error("[[route]]\nprefix = \"/a\"\nignore_qurey = true\n")
        XCTAssertEqual(route.line, 3)
        XCTAssertTrue(route.description.contains("ignore_query"), "\(route)")
    }

    /// stale_timeout and grace, global and per route; what they refuse.
    func testHTTP3IsATLSListenersAndItsRetryThresholdIsBounded() throws {
        let set = try load("""
            http3_retry_threshold = 0
            [[listen]]
            address = "127.0.0.1:8443"
            tls = true
            http3 = true
            certificate = "/c.pem"
            key = "/c.key"
            """)
        XCTAssertEqual(set.listeners.first?.http3, true)
        XCTAssertEqual(set.proxy.quicRetryAbove, 0)
        XCTAssertEqual(try load("").proxy.quicRetryAbove, 64)
        XCTAssertFalse(try load("[[listen]]\naddress = \"127.0.0.1:1\"\n").listeners[0].http3, "off unless asked")
        let plain = try error("[[listen]]\naddress = \"127.0.0.1:1\"\nhttp3 = true\n")
        XCTAssertEqual(plain.key, "listen.http3")
        XCTAssertTrue(plain.message.contains("tls = true"), plain.message)
        XCTAssertEqual(try error("[[listen]]\naddress = \"127.0.0.1:1\"\nhttp3 = \"yes\"\n").key, "listen.http3")
        XCTAssertEqual(try error("http3_retry_threshold = -1\n").key, "http3_retry_threshold")
    }

    func testStaleTimeoutAndGrace() throws {
        let defaults = try load("")
        XCTAssertEqual(defaults.proxy.staleTimeoutMilliseconds, 3000)
        XCTAssertEqual(defaults.proxy.graceSeconds, 0)
        let set = try load("stale_timeout = \"500ms\"\ngrace = \"2m\"\n[[route]]\nprefix = \"/a\"\nstale_timeout = \"off\"\ngrace = \"30s\"\n")
        XCTAssertEqual(set.proxy.staleTimeoutMilliseconds, 500)
        XCTAssertEqual(set.proxy.graceSeconds, 120)
        XCTAssertEqual(set.routes.first?.staleTimeoutMilliseconds, 0)
        XCTAssertEqual(set.routes.first?.grace, 30)
        XCTAssertEqual(try load("stale_timeout = \"off\"\n").proxy.staleTimeoutMilliseconds, 0)
        for (text, key) in [("stale_timeout = \"soon\"\n", "stale_timeout"), ("grace = \"500ms\"\n", "grace"),
                            ("grace = true\n", "grace"), ("[[route]]\nprefix = \"/a\"\nstale_timeout = \"-1s\"\n", "route.stale_timeout"),
                            ("[[route]]\nprefix = \"/a\"\ngrace = \"forever\"\n", "route.grace")] {
            let problem = try error(text)
            XCTAssertEqual(problem.key, key, text)
            XCTAssertFalse(problem.message.isEmpty, text)
        }
    }

    func testACustomAccessLogFormatNeedsAValidTemplate() throws {
        let custom = try load("access_log_format = \"custom\"\naccess_log_template = \"$time $host $status\"\n")
        XCTAssertEqual(custom.accessLogFormat, .custom(try AccessTemplate("$time $host $status")))
        for (text, key, message) in [("access_log_format = \"custom\"\n", "access_log_format", "needs access_log_template"),
                                     ("access_log_format = \"custom\"\naccess_log_template = \"$nope\"\n", "access_log_template", "unknown field $nope"),
                                     ("access_log_template = \"$time\"\n", "access_log_template", "only with access_log_format = \"custom\"")] {
            let problem = try error(text)
            XCTAssertEqual(problem.key, key, text)
            XCTAssertTrue(problem.message.contains(message), "\(text): \(problem.message)")
        }
    }

    func testAFileThatCannotBeReadIsAnErrorNamingIt() {
        var settings = Settings()
        XCTAssertThrowsError(try ConfigFile.load("/nonexistent/larder.toml", into: &settings)) { error in
            XCTAssertTrue("\(error)".hasPrefix("/nonexistent/larder.toml: cannot read the file"), "\(error)")
        }
    }

    /// What `check-config --print` writes is a config file that says the
    /// same configuration: read back, it prints the same again.
    func testTheEffectiveConfigurationReadsBackAsItself() throws {
        for text in ["", "memory_limit = \"32MiB\"\nkeepalive_timeout = \"7s\"\n",
                     "[presets]\nshort = \"30s\"\n\n[[route]]\nprefix = \"/p\"\ndefault_ttl = \"short\"\nhosts = [\"a.test\"]\n",
                     "[upstreams.api]\nservers = [\"http://127.0.0.1:9001\", \"http://127.0.0.1:9002\"]\n",
                     "stale_timeout = \"off\"\ngrace = \"90s\"\nwebsocket = false\n[[route]]\nprefix = \"/g\"\nstale_timeout = \"250ms\"\ngrace = \"0s\"\nwebsocket = true\n",
                     "access_log_format = \"custom\"\naccess_log_template = \"$time \\\"$method $target\\\" $status\"\n",
                     Self.edgeText] {
            let first = EffectiveConfig.render(try load(text))
            let second = EffectiveConfig.render(try load(first))
            XCTAssertEqual(first, second, "from:\n\(text)")
        }
    }

    func testSentinelsAndTheirMasterInsteadOfOneRedis() throws {
        let text = "[fleet]\nsentinels = [\"10.0.0.5\", \"10.0.0.6:26380\", \"[::1]:26381\"]\nmaster = \"cache\"\n"
            + "password_file = \"/etc/p\"\nsentinel_password_file = \"/etc/s\"\n"
        let fleet = try XCTUnwrap(try load(text).fleet)
        XCTAssertTrue(fleet.followsSentinel)
        XCTAssertEqual(fleet.sentinels.map(FleetConfig.sentinelText), ["10.0.0.5:26379", "10.0.0.6:26380", "[::1]:26381"])
        XCTAssertEqual(fleet.masterName, "cache")
        XCTAssertEqual(fleet.sentinelPasswordFile, "/etc/s")
        XCTAssertEqual(fleet.shown, "master cache via sentinels 10.0.0.5:26379, 10.0.0.6:26380, [::1]:26381")
        XCTAssertNotNil(fleet.refusal(password: nil), "sentinels on other machines need a password")
        XCTAssertNil(fleet.refusal(password: "secret"))
        let printed = EffectiveConfig.render(try load(text))
        XCTAssertEqual(EffectiveConfig.render(try load(printed)), printed)
        XCTAssertFalse(printed.contains("redis = "), printed)
        for (bad, key) in [("sentinels = \"10.0.0.5\"\nmaster = \"m\"", "fleet.sentinels"),
                           ("sentinels = [\"10.0.0.5:0\"]\nmaster = \"m\"", "fleet.sentinels"),
                           ("sentinels = [\"10.0.0.5/1\"]\nmaster = \"m\"", "fleet.sentinels"),
                           ("sentinels = [1]\nmaster = \"m\"", "fleet.sentinels"),
                           ("sentinels = [\"10.0.0.5\"]\nmaster = \"two words\"", "fleet.master"),
                           ("sentinels = [\"10.0.0.5\"]\nmaster = \"m\"\nredis = \"redis://10.0.0.5\"", "fleet.sentinels")] {
            XCTAssertEqual(try error("[fleet]\n" + bad + "\n").key, key, bad)
        }
    }

    static let edgeText = """
        request_headers = { set = { "X-Env" = "prod", "X-Cost" = "$$5 for $client_addr" }, remove = ["X-Debug"] }
        response_headers = { add = { "X-Request-Id" = "$request_id" }, remove = ["Server"] }
        allow = ["127.0.0.0/8", "::1"]
        deny = ["127.0.0.2"]
        rate_limit = { requests = 20, per = "1s", burst = 10 }
        trusted_proxies = ["10.0.0.0/8"]
        admin_allow = ["127.0.0.1"]
        [[route]]
        prefix = "/api/"
        rate_limit = { requests = 5, per = "1m", key = "header:X-Api-Key" }
        key_cookies = ["lang"]
        [[route]]
        prefix = "/s/"
        strip_cookies = true
        deny = ["2001:db8::/32"]

        """

    /// The edge keys read into their settings, each scope's own, and the
    /// rules a route's requests are under.
    func testEdgeKeysAndWhatARouteInherits() throws {
        let settings = try load(Self.edgeText)
        XCTAssertEqual(settings.edge.requestHeaders?.sets.map(\.name), ["X-Cost", "X-Env"])
        XCTAssertEqual(settings.edge.requestHeaders?.sets.first?.value.spelled, "$$5 for $client_addr")
        XCTAssertEqual(settings.edge.rateLimit, RateLimit(requests: 20, periodMilliseconds: 1000, burst: 10))
        XCTAssertEqual(settings.proxy.trustedProxies?.prefixes.map(\.description), ["10.0.0.0/8"])
        XCTAssertEqual(settings.adminAllow?.prefixes.map(\.description), ["127.0.0.1/32"])
        let (global, routes) = settings.routesWithRules()
        XCTAssertEqual(routes[0].rules?.rateLimit?.limit.key, .header("x-api-key"))
        XCTAssertTrue(routes[1].rules?.rateLimit === global?.rateLimit, "the global limiter, shared")
        XCTAssertFalse(routes[1].rules!.access.admits(IPAddress("2001:db8::1")!))
        XCTAssertTrue(routes[1].rules!.access.admits(IPAddress("127.0.0.2")!), "the route's deny replaced the global lists")
        XCTAssertFalse(routes[0].rules!.access.admits(IPAddress("127.0.0.2")!))
        XCTAssertEqual(routes[0].rules?.keyCookies, ["lang"])
        XCTAssertEqual(routes[0].rules?.responseHeaders.removes, ["server"])
    }
}
