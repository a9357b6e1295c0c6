import XCTest
@testable import larder
@testable import Configuration
import TestSupport

/// `serve`'s plain command lines are read without ArgumentParser: they must
/// mean exactly what ArgumentParser makes of them, and anything else must be
/// left to it (help, mistakes), so that its answers stay the same.
final class ServeFlagsTests: ConfiguredTestCase {
    private func parsedByArgumentParser(_ arguments: [String]) throws -> ServeFlags {
        try Serve.parse(arguments).options.flags
    }

    func testPlainCommandLinesMeanWhatArgumentParserMakesOfThem() throws {
        let lines: [[String]] = [
            [],
            ["--config", "/etc/larder/larder.toml"],
            ["--config=/tmp/a.toml", "--workers", "3"],
            ["--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:9", "--workers", "2", "--memory-limit", "64MiB",
             "--cache-dir", "/tmp/c", "--disk-limit", "1GiB", "--admin-listen", "none", "--log-level", "error",
             "--admin-token-file", "/run/t"],
            ["--upstream=http://a:1/x=y", "--cache-dir=none"],
        ]
        for line in lines {
            let plain = try XCTUnwrap(ServeFlags(plain: line[...]), "\(line)")
            XCTAssertEqual(plain, try parsedByArgumentParser(line), "\(line)")
        }
        let all = try XCTUnwrap(ServeFlags(plain: lines[3][...]))
        XCTAssertEqual(all.value(.disk_limit), "1GiB")
        XCTAssertEqual(all.adminTokenFile, "/run/t")
        XCTAssertEqual(all.upstream, "http://127.0.0.1:9")
        XCTAssertNil(all.config)
    }

    func testEveryFlagOfServeIsReadPlainly() throws {
        // A flag added to ServeOptions but not to ServeFlags.keyed would be
        // dropped by the plain reading: each must round-trip.
        for (flag, key) in ServeFlags.keyed {
            let value = key == .workers ? "4" : "v-\(key.rawValue)"
            let plain = try XCTUnwrap(ServeFlags(plain: [flag, value][...]), flag)
            XCTAssertEqual(plain.value(key), value, flag)
            XCTAssertEqual(plain, try parsedByArgumentParser([flag, value]), flag)
        }
        let help = Serve.helpMessage()
        let documented = Set(help.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "," })
            .filter { $0.hasPrefix("--") && $0 != "--help" && $0 != "--version" }.map(String.init))
        XCTAssertEqual(documented, Set(ServeFlags.keyed.map(\.flag) + ["--config"]))
    }

    func testAnythingElseIsLeftToArgumentParser() {
        let lines: [[String]] = [
            ["--help"], ["-h"], ["--version"], ["--bogus", "1"], ["--listen"], ["--listen", "--upstream", "x"],
            ["--workers", "three"], ["--workers", "-1"], ["--config", "a", "--config", "b"], ["--listen", "a", "--listen=b"],
            ["stray"], ["--listen="], ["--generate-completion-script", "bash"],
        ]
        for line in lines { XCTAssertNil(ServeFlags(plain: line[...]), "\(line)") }
    }

    func testTheBinaryAnswersMistakesAsBefore() throws {
        let bad = try startChild(Paths.larder, ["serve", "--workers", "three"])
        XCTAssertEqual(bad.waitForExit(timeout: 30), 64)
        bad.drainOutput()
        XCTAssertTrue(bad.stderr.contains("--workers"), bad.stderr)
        let help = try startChild(Paths.larder, ["serve", "--help"])
        XCTAssertEqual(help.waitForExit(timeout: 30), 0)
        help.drainOutput()
        XCTAssertTrue(help.stdout.contains("--cache-dir"), help.stdout)
        // A plain line's bad value is refused by the same check as before.
        let value = try startChild(Paths.larder, ["serve", "--upstream", "http://127.0.0.1:9", "--memory-limit", "lots"])
        XCTAssertEqual(value.waitForExit(timeout: 30), 64)
        value.drainOutput()
        XCTAssertTrue(value.stderr.contains("--memory-limit lots"), value.stderr)
    }
}
