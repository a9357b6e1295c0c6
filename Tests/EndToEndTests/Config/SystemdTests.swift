import Foundation
import TestSupport
import XCTest
@testable import larder
@testable import Configuration
#if canImport(Glibc)
import Glibc
#endif

/// A unix datagram socket standing in for systemd's NOTIFY_SOCKET: collects
/// every notification Larder sends, on a background thread.
final class NotifySocket {
    let path: String
    private let fd: Int32
    private let condition = NSCondition()
    private var messages: [(time: Date, text: String)] = []
    private var closed = false
    /// Until the receiving thread has returned (`close` waits for it).
    private var receiving = true

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("larder-notify-\(UUID().uuidString.prefix(8))").path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw HarnessError("bind \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let thread = Thread { [self] in receive() }
        thread.start()
    }

    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            condition.lock()
            let stop = closed
            condition.unlock()
            if stop {
                // Joined by close(): the descriptor goes only after this.
                condition.lock()
                receiving = false
                condition.broadcast()
                condition.unlock()
                return
            }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { continue }
            condition.lock()
            messages.append((Date(), String(decoding: buffer[0..<n], as: UTF8.self)))
            condition.broadcast()
            condition.unlock()
        }
    }

    /// Waits (bounded) for a message after the first `skip` ones that
    /// contains `line` as one of its lines; returns its index.
    func waitFor(_ line: String, after skip: Int = 0, timeout: TimeInterval = 15) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if skip < messages.count, let i = messages[skip...].firstIndex(where: { $0.text.split(separator: "\n").contains { $0.hasPrefix(line) } }) {
                return i
            }
            if !condition.wait(until: deadline) { return nil }
        }
    }

    var all: [(time: Date, text: String)] {
        condition.lock()
        defer { condition.unlock() }
        return messages
    }

    func close() {
        condition.lock()
        closed = true
        // The receiver sees `closed` within its receive timeout (200 ms).
        let deadline = Date().addingTimeInterval(10)
        while receiving && condition.wait(until: deadline) {}
        condition.unlock()
        Glibc.close(fd)
        unlink(path)
    }
}

final class SystemdTests: ConfiguredTestCase {
    var origin: Origin!

    override func setUpWithError() throws {
        origin = try startOrigin()
    }

    // MARK: units

    func testUnitsPassSystemdAnalyzeVerify() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            throw HarnessError("systemd-analyze is missing: run .ci/install-deps --test (the README's test command does)")
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("larder-units-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let units = ["larder.service", "larder.socket", "larder-admin.socket"]
        for unit in units {
            // The unit as installed, pointing at the binary under test.
            let text = try String(contentsOfFile: Paths.packageRoot.appendingPathComponent("systemd/\(unit)").path, encoding: .utf8)
            try text.replacingOccurrences(of: "/usr/local/bin/larder", with: Paths.larder)
                .write(toFile: dir + "/" + unit, atomically: true, encoding: .utf8)
        }
        let verify = try ChildProcess("/usr/bin/systemd-analyze", ["verify"] + units.map { dir + "/" + $0 })
        XCTAssertEqual(verify.waitForExit(timeout: 60), 0, verify.stderr)
        verify.drainOutput()
        XCTAssertEqual(verify.stderr, "", "no warnings")
        let service = try String(contentsOfFile: dir + "/larder.service", encoding: .utf8)
        for line in ["Type=notify", "WatchdogSec=", "DynamicUser=yes", "CacheDirectory=larder", "ProtectSystem=strict",
                     "ProtectHome=yes", "PrivateTmp=yes", "NoNewPrivileges=yes", "RestrictAddressFamilies=",
                     "SystemCallFilter=@system-service", "CapabilityBoundingSet=\n", "LimitNOFILE=", "Restart=on-failure",
                     "ExecReload=/bin/kill -HUP $MAINPID", "RestartPreventExitStatus=78\n",
                     "ExecStartPre=\(Paths.larder) check-config --config /etc/larder/larder.toml\n",
                     "ExecStart=\(Paths.larder) serve --config /etc/larder/larder.toml\n"] {
            XCTAssertTrue(service.contains(line), line)
        }
        XCTAssertFalse(service.contains("--cache-dir"), "the config file says where the disk tier is")
    }

    // MARK: sd_notify

    func testNotificationsAndWatchdogPings() throws {
        let notify = try NotifySocket()
        defer { notify.close() }
        let larder = try LarderProcess(upstream: origin.url, environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "200000"])
        defer { larder.stop() }
        let pid = larder.child.process.processIdentifier

        let ready = try XCTUnwrap(notify.waitFor("READY=1"), "READY=1 once serving")
        XCTAssertTrue(notify.all[ready].text.contains("STATUS="), notify.all[ready].text)
        XCTAssertEqual(try larder.client().get("/n").status, 200)

        // Pings every 100 ms (half of WATCHDOG_USEC): about 10 a second.
        let first = try XCTUnwrap(notify.waitFor("WATCHDOG=1"))
        let start = notify.all[first].time
        var pings = 1
        var index = first
        while let next = notify.waitFor("WATCHDOG=1", after: index + 1, timeout: 2), notify.all[next].time.timeIntervalSince(start) < 1 {
            pings += 1
            index = next
        }
        XCTAssertGreaterThanOrEqual(pings, 5, "pings in the first second")
        XCTAssertLessThanOrEqual(pings, 15, "pings in the first second")

        // SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1.
        let before = notify.all.count
        kill(pid, SIGHUP)
        let reloading = try XCTUnwrap(notify.waitFor("RELOADING=1", after: before))
        XCTAssertTrue(notify.all[reloading].text.contains("MONOTONIC_USEC="), notify.all[reloading].text)
        XCTAssertNotNil(notify.waitFor("READY=1", after: reloading + 1))

        // SIGTERM: STOPPING=1, exit 0.
        let beforeStop = notify.all.count
        kill(pid, SIGTERM)
        XCTAssertNotNil(notify.waitFor("STOPPING=1", after: beforeStop))
        XCTAssertEqual(larder.child.waitForExit(timeout: 15), 0)
    }

    func testNoNotificationsOutsideSystemd() throws {
        // Without NOTIFY_SOCKET nothing is sent and nothing breaks.
        let larder = try LarderProcess(upstream: origin.url, environment: ["WATCHDOG_USEC": "100000"])
        defer { larder.stop() }
        XCTAssertEqual(try larder.client().get("/plain").status, 200)
    }

    // MARK: socket activation

    private func socketActivated(_ listen: [(port: Int, name: String?)], extra: [String] = []) throws -> ChildProcess {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            throw HarnessError("systemd-socket-activate is missing: run .ci/install-deps --test")
        }
        var arguments: [String] = []
        // systemd-socket-activate passes on only the variables it is told to.
        for name in ["ASAN_OPTIONS", "TSAN_OPTIONS"] where ProcessInfo.processInfo.environment[name] != nil {
            arguments += ["-E", name]
        }
        for socket in listen { arguments += ["-l", "127.0.0.1:\(socket.port)"] }
        let names = listen.compactMap(\.name)
        if !names.isEmpty { arguments.append("--fdname=" + names.joined(separator: ":")) }
        arguments += [Paths.larder, "serve", "--upstream", origin.url, "--workers", "2", "--log-level", "warning"] + extra
        return try ChildProcess("/usr/bin/systemd-socket-activate", arguments)
    }

    /// Connects, retrying (bounded) until the activator listens.
    private func connect(_ port: Int) throws -> HTTPClient {
        let deadline = Date().addingTimeInterval(15)
        while true {
            do { return try HTTPClient(port: port) } catch {
                if Date() > deadline { throw error }
                usleep(20_000)
            }
        }
    }

    func testOnePassedSocketIsTheProxyListener() throws {
        let port = unusedPort()
        let child = try socketActivated([(port, nil)], extra: ["--admin-listen", "none"])
        defer { child.stop() }
        // systemd-socket-activate starts Larder on the first connection.
        let c = try connect(port)
        XCTAssertEqual(try c.get("/activated").status, 200)
        XCTAssertEqual(try c.get("/activated").header("cache-status")?.contains("hit"), true)
        XCTAssertNotNil(child.waitFor("listening on 127\\.0\\.0\\.1:\(port) ", timeout: 5), child.stderr)
        XCTAssertEqual(try connect(port).get("/second-connection").status, 200)
    }

    func testProxyAndAdminSocketsByName() throws {
        let proxyPort = unusedPort(), adminPort = unusedPort()
        // Listed admin first: names, not positions, decide.
        let child = try socketActivated([(adminPort, "admin"), (proxyPort, "proxy")])
        defer { child.stop() }
        XCTAssertEqual(try connect(proxyPort).get("/by-name").status, 200)
        let health = try connect(adminPort).get("/healthz")
        XCTAssertEqual(health.text, "ok\n")
        XCTAssertNotNil(child.waitFor("admin API on 127\\.0\\.0\\.1:\(adminPort)", timeout: 5), child.stderr)
        kill(child.process.processIdentifier, SIGTERM)
        XCTAssertEqual(child.waitForExit(timeout: 15), 0)
    }

    func testEachListenTableTakesThePassedSocketOnItsAddress() throws {
        let plainPort = unusedPort(), otherPort = unusedPort()
        let config = try writeConfig("""
            [[listen]]
            address = "127.0.0.1:\(plainPort)"

            [[listen]]
            address = "127.0.0.1:\(otherPort)"
            http2 = false
            """)
        // Listed in the other order, unnamed: their addresses decide.
        let child = try socketActivated([(otherPort, nil), (plainPort, nil)], extra: ["--config", config, "--admin-listen", "none"])
        defer { child.stop() }
        XCTAssertEqual(try connect(plainPort).get("/first?size=3").status, 200)
        XCTAssertEqual(try connect(otherPort).get("/second?size=3").status, 200)
        XCTAssertNotNil(child.waitFor("127\\.0\\.0\\.1:\(otherPort)", timeout: 5), child.stderr)
        // The second listener is the one with HTTP/2 off: h2c by prior knowledge is not spoken there.
        XCTAssertTrue(answersPrefaceWithSettings(plainPort), "h2c on the first")
        XCTAssertFalse(answersPrefaceWithSettings(otherPort), "passed to the listener with http2 = false")
    }

    /// Whether the listener answers the HTTP/2 preface with a SETTINGS frame (h2c).
    private func answersPrefaceWithSettings(_ port: Int) -> Bool {
        guard let c = try? connect(port), (try? c.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) != nil else { return false }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = [UInt8](repeating: 0, count: 9)
        let n = head.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, Int32(MSG_WAITALL)) }
        return n == 9 && head[3] == 0x04
    }

    func testAPassedSocketThatMatchesNoListenerIsRefused() throws {
        let configured = unusedPort(), stray = unusedPort(), second = unusedPort()
        let config = try writeConfig("[[listen]]\naddress = \"127.0.0.1:\(configured)\"\n")
        let child = try socketActivated([(configured, nil), (stray, nil), (second, nil)], extra: ["--config", config])
        defer { child.stop() }
        _ = try? connect(configured)  // starts it
        XCTAssertNotNil(child.waitFor("matches no \\[\\[listen\\]\\] address", timeout: 10), child.stderr)
        XCTAssertNotEqual(child.waitForExit(timeout: 15), 0)
    }

    // MARK: draining

    func testSigtermLetsALongResponseFinishAndExitsZero() throws {
        let larder = try LarderProcess(upstream: origin.url)
        let target = "/long?size=40000&trickle=0.15"  // about 1.5 s of body
        let c = try larder.client()
        try c.send("GET \(target) HTTP/1.1\r\nHost: test\r\n\r\n")
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while received.firstRange(of: [13, 10, 13, 10]) == nil {
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            XCTAssertGreaterThan(n, 0)
            if n <= 0 { return }
            received += chunk[0..<n]
        }
        kill(larder.child.process.processIdentifier, SIGTERM)
        // New connections are soon no longer accepted ...
        let deadline = Date().addingTimeInterval(5)
        var refused = false
        while !refused && Date() < deadline {
            refused = (try? HTTPClient(port: larder.port)) == nil
            if !refused { usleep(20_000) }
        }
        XCTAssertTrue(refused, "the listener closed on SIGTERM")
        // ... and the response in flight completes.
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        let bodyStart = received.firstRange(of: [13, 10, 13, 10])!.upperBound
        XCTAssertEqual(received.count - bodyStart, 40000, "the whole body arrived")
        XCTAssertEqual(larder.child.waitForExit(timeout: 12), 0, "exited 0 within the drain timeout")
    }

    // MARK: journald

    func testJournalFormatWhenStderrIsTheJournal() throws {
        let larder = try LarderProcess(upstream: "http://127.0.0.1:\(unusedPort())", extra: ["--log-level", "info"],
                                       environment: ["JOURNAL_STREAM": "8:12345"])
        defer { larder.stop() }
        XCTAssertEqual(try larder.client().get("/down").status, 502)
        XCTAssertNotNil(larder.child.waitFor("<4>larder: upstream error", timeout: 5), larder.child.stderr)
        let lines = larder.child.stderr.split(separator: "\n")
        XCTAssertTrue(lines.allSatisfy { $0.first == "<" }, "every line has a priority and no timestamp: \(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("<5>larder: listening on") }, "\(lines)")
    }

    // MARK: install

    func testInstallIntoADestdir() throws {
        let stage = FileManager.default.temporaryDirectory.appendingPathComponent("larder-stage-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: stage) }
        func make(_ target: String) throws -> (Int32?, String) {
            let child = try ChildProcess("/usr/bin/env", ["make", "-C", Paths.packageRoot.path, target, "DESTDIR=\(stage)",
                                                          "BIN=\(Paths.larder)"])
            let status = child.waitForExit(timeout: 60)
            child.drainOutput()
            return (status, child.stdout + child.stderr)
        }
        var (status, output) = try make("install")
        XCTAssertEqual(status, 0, output)
        let expected = ["usr/local/bin/larder", "etc/larder/larder.toml", "etc/systemd/system/larder.service",
                        "etc/systemd/system/larder.socket", "etc/systemd/system/larder-admin.socket",
                        "usr/local/share/doc/larder/README.md", "usr/local/share/doc/larder/docs/running.md",
                        "usr/local/share/doc/larder/docs/configuration.md", "usr/local/share/man/man1/larder.1",
                        "usr/local/share/bash-completion/completions/larder", "usr/local/share/zsh/site-functions/_larder",
                        "usr/local/share/fish/vendor_completions.d/larder.fish"]
        for path in expected { XCTAssertTrue(FileManager.default.fileExists(atPath: stage + "/" + path), path) }
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: stage + "/usr/local/bin/larder"))
        let unit = try String(contentsOfFile: stage + "/etc/systemd/system/larder.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("ExecStart=/usr/local/bin/larder serve --config /etc/larder/larder.toml"), unit)
        // The installed configuration keeps its disk tier in the unit's CacheDirectory=, and passes the unit's check.
        let installed = try String(contentsOfFile: stage + "/etc/larder/larder.toml", encoding: .utf8)
        XCTAssertTrue(installed.contains("\ncache_dir = \"/var/cache/larder\"\n"), installed)
        let check = try ChildProcess(Paths.larder, ["check-config", "--config", stage + "/etc/larder/larder.toml"])
        XCTAssertEqual(check.waitForExit(timeout: 20), 0)
        check.drainOutput()
        XCTAssertTrue(check.stdout.contains(": ok"), check.stdout + check.stderr)
        // The manual page and the completions say what the binary takes: every
        // command, and every option its help lists (docs/man/larder.1 is regenerated
        // by `make man` when the command line changes).
        let manual = try String(contentsOfFile: stage + "/usr/local/share/man/man1/larder.1", encoding: .utf8)
        XCTAssertTrue(manual.contains(".Dt LARDER 1"))
        for command in ["serve", "purge", "stats", "top", "log", "fleet", "check-config"] {
            XCTAssertTrue(manual.contains(".It Em \(command)"), "\(command) in the manual page")
            let help = try ChildProcess(Paths.larder, command == "fleet" ? [command, "status", "--help"] : [command, "--help"])
            XCTAssertEqual(help.waitForExit(timeout: 20), 0)
            help.drainOutput()
            for option in Set(help.stdout.matches(of: #/--([a-z][a-z0-9-]+)/#).map { String($0.1) }) where option != "help" {
                XCTAssertTrue(manual.contains("Fl -\(option)"), "larder \(command) --\(option) in the manual page (make man)")
            }
        }
        let bash = try String(contentsOfFile: stage + "/usr/local/share/bash-completion/completions/larder", encoding: .utf8)
        XCTAssertTrue(bash.contains("check-config") && bash.contains("--memory-limit"), "bash completion")

        // A changed configuration survives a reinstall and an uninstall.
        let config = stage + "/etc/larder/larder.toml"
        try "upstream = \"http://10.0.0.1:9000\"\n".write(toFile: config, atomically: true, encoding: .utf8)
        (status, output) = try make("install")
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(try String(contentsOfFile: config, encoding: .utf8), "upstream = \"http://10.0.0.1:9000\"\n")
        (status, output) = try make("uninstall")
        XCTAssertEqual(status, 0, output)
        for path in expected where path != "etc/larder/larder.toml" {
            XCTAssertFalse(FileManager.default.fileExists(atPath: stage + "/" + path), path)
        }
        XCTAssertTrue(FileManager.default.fileExists(atPath: config))
        XCTAssertTrue(output.contains("kept"), output)
    }

    /// `make deb`: the release binary (built by the README's run command,
    /// which CI runs first) as a Debian package lintian accepts.
    func testMakeDebBuildsAPackageLintianAccepts() throws {
        let release = Paths.packageRoot.appendingPathComponent(".build/release/larder").path
        let lintian = "/usr/bin/lintian"
        let inCI = ProcessInfo.processInfo.environment["CI"] == "true"
        guard FileManager.default.isExecutableFile(atPath: lintian) else {
            if inCI { return XCTFail("lintian is missing: .ci/install-deps --test") }
            throw XCTSkip("lintian is not installed (.ci/install-deps --test installs it)")
        }
        // The package holds the release build the README makes (static Swift
        // runtime, no search path into a toolchain); a debug build is no package.
        let elf = try ChildProcess("/usr/bin/readelf", ["-d", release])
        let built = FileManager.default.isExecutableFile(atPath: release) && elf.waitForExit(timeout: 20) == 0
        elf.drainOutput()
        guard built, !elf.stdout.contains("/swift/"), !elf.stdout.contains("libswiftCore") else {
            if inCI { return XCTFail("no release build at \(release): .ci/run runs the README's run command first") }
            throw XCTSkip("build the release binary first: swift build -c release --static-swift-stdlib --product larder")
        }
        let make = try ChildProcess("/usr/bin/env", ["make", "-C", Paths.packageRoot.path, "deb", "BIN=\(release)"])
        XCTAssertEqual(make.waitForExit(timeout: 120), 0, make.stderr)
        make.drainOutput()
        let version = Larder.version
        let arch = make.stdout.firstMatch(of: #/larder_[^_]+_([a-z0-9]+)\.deb/#).map { String($0.1) } ?? "amd64"
        let deb = Paths.packageRoot.appendingPathComponent(".build/larder_\(version)_\(arch).deb").path
        XCTAssertTrue(FileManager.default.fileExists(atPath: deb), make.stdout)
        let contents = try ChildProcess("/usr/bin/dpkg-deb", ["-c", deb])
        XCTAssertEqual(contents.waitForExit(timeout: 30), 0)
        contents.drainOutput()
        for path in ["./usr/bin/larder", "./etc/larder/larder.toml", "./lib/systemd/system/larder.service",
                     "./lib/systemd/system/larder.socket", "./usr/share/man/man1/larder.1.gz", "./usr/share/doc/larder/copyright",
                     "./usr/share/doc/larder/changelog.gz", "./usr/share/doc/larder/docs/configuration.md",
                     "./usr/share/bash-completion/completions/larder", "./usr/share/doc/larder/examples/prometheus-alerts.yml"] {
            XCTAssertTrue(contents.stdout.contains(" \(path)\n") || contents.stdout.hasSuffix(" \(path)"), "\(path) in the package")
        }
        let fields = try ChildProcess("/usr/bin/dpkg-deb", ["-f", deb, "Package", "Version", "Depends"])
        XCTAssertEqual(fields.waitForExit(timeout: 30), 0)
        fields.drainOutput()
        XCTAssertTrue(fields.stdout.contains("Package: larder") && fields.stdout.contains("Version: \(version)"), fields.stdout)
        let check = try ChildProcess(lintian, ["--tag-display-limit", "0", deb])
        XCTAssertNotEqual(check.waitForExit(timeout: 300), nil, "lintian finished")
        check.drainOutput()
        let errors = (check.stdout + check.stderr).split(separator: "\n").filter { $0.hasPrefix("E:") }
        XCTAssertEqual(errors, [], "lintian's errors")
    }
}
