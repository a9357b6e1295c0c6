import Foundation
import XCTest
@testable import larder
@testable import Configuration

/// `larder top` against a running Larder: on a pseudo-terminal (util-linux
/// `script` gives it one) a screen whose figures follow the traffic and
/// that q closes, putting the terminal back; piped, one line per refresh.
final class TopTests: ProxyTestCase {
    func testTheScreenFollowsTheTrafficAndQQuits() throws {
        let command = "\(Paths.larder) top --admin \(larder.adminURL) --interval 0.2"
        let top = try startChild("/usr/bin/script", ["-qfec", command, "/dev/null"], withInput: true)
        XCTAssertNotNil(top.waitFor("totals +hits 0 +misses 0"), top.stdout)
        let c = try larder.client()
        for _ in 0..<3 { XCTAssertEqual(try c.get("/top/a").status, 200) }
        XCTAssertNotNil(top.waitFor("totals +hits 2 +misses 1"), top.stdout)
        XCTAssertNotNil(top.waitFor("66\\.7% since start"), top.stdout)
        XCTAssertNotNil(top.waitFor("memory +[0-9.]+ [KMG]?i?B of 256\\.0 MiB"), top.stdout)
        XCTAssertNotNil(top.waitFor("top misses, last minute\\s+requests +misses +URL\\s+[0-9]+ +1  /top/a"), top.stdout)
        top.send("q")
        XCTAssertEqual(top.waitForExit(timeout: 10), 0, top.stdout)
        top.drainOutput()
        XCTAssertTrue(top.stdout.hasSuffix("\u{1B}[?25h\u{1B}[?1049l"), "cursor and screen put back")
    }

    func testPipedItPrintsOneLinePerRefresh() throws {
        let c = try larder.client()
        _ = try c.get("/top/b")
        let top = try startChild(Paths.larder, ["top", "--admin", larder.adminURL, "--interval", "0.1", "--count", "3"])
        XCTAssertEqual(top.waitForExit(timeout: 15), 0, top.stderr)
        top.drainOutput()
        let lines = top.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, top.stdout)
        XCTAssertTrue(lines.allSatisfy { $0.contains(" requests=1 ") && $0.contains(" misses=1 ") }, top.stdout)
        XCTAssertTrue(lines.allSatisfy { $0.hasSuffix(" top_url=/top/b top_miss=/top/b") }, top.stdout)
        let hidden = try startChild(Paths.larder, ["top", "--admin", larder.adminURL, "--count", "1", "--urls", "0"])
        XCTAssertEqual(hidden.waitForExit(timeout: 15), 0, hidden.stderr)
        hidden.drainOutput()
        XCTAssertFalse(hidden.stdout.contains("top_url="), hidden.stdout)
        XCTAssertFalse(top.stdout.contains("\u{1B}"), "no terminal codes in a pipe")
    }

    func testAnUnreachableAdminAPIIsAClearError() throws {
        let top = try startChild(Paths.larder, ["top", "--admin", "http://127.0.0.1:1", "--count", "1"])
        XCTAssertEqual(top.waitForExit(timeout: 15), 69)
        XCTAssertNotNil(top.waitFor("cannot reach the admin API at http://127.0.0.1:1"), top.stderr)
        for arguments in [["--interval", "0"], ["--urls", "51"], ["--depth", "0"]] {
            let bad = try startChild(Paths.larder, ["top"] + arguments)
            XCTAssertEqual(bad.waitForExit(timeout: 15), 64, "\(arguments)")
        }
    }
}
