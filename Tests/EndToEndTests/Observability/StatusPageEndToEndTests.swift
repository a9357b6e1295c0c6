import Foundation
import XCTest
@testable import larder
@testable import Configuration

/// The status page in a real browser: headless Chromium signs in with
/// `/?token=`, the page's script polls the admin API, and the charts,
/// top URLs and errors appear, with nothing on the console.
final class StatusPageEndToEndTests: ConfiguredTestCase {
    private static let chromium = "/usr/bin/chromium"
    private var profile = ""

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.chromium) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" { throw HarnessError("chromium is missing: .ci/install-deps --test") }
            throw XCTSkip("chromium is not installed (.ci/install-deps --test installs it)")
        }
        profile = temporaryPath("chromium-profile")
    }

    /// Chromium headless on `url`: the page runs 6 s of its own time
    /// (its timers fire, its fetches are real); `output` is --dump-dom or
    /// --screenshot=PATH.
    private func browse(_ url: String, _ output: String) throws -> ChildProcess {
        let browser = try startChild(Self.chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                                     "--user-data-dir=\(profile)", "--window-size=1280,1100",
                                                     "--virtual-time-budget=6000", "--enable-logging=stderr", "--v=0",
                                                     output, url])
        XCTAssertEqual(browser.waitForExit(timeout: 90), 0, browser.stderr)
        return browser
    }

    func testThePageDrawsItsChartsAndListsTopURLsAndErrors() throws {
        let origin = try startOrigin()
        let token = "page-\(UUID().uuidString)"
        let larder = try startLarder(upstream: origin.url, environment: ["LARDER_ADMIN_TOKEN": token])
        let client = try larder.client()
        // Traffic across a few of the admin thread's one-second ticks, so
        // the charts have points: rounds of requests until the history holds
        // three seconds with requests in them (bounded).
        let deadline = Date().addingTimeInterval(30)
        var round = 0, seconds = 0
        repeat {
            round += 1
            for _ in 0..<20 { XCTAssertEqual(try client.get("/sp/hot").status, 200) }
            _ = try client.get("/sp/cold-\(round)")
            XCTAssertEqual(try client.get("/sp/broken?status=503&cc=no-store").status, 503)
            let history = try larder.adminClient().get("/history", headers: ["Authorization: Bearer \(token)"])
            let object = try JSONSerialization.jsonObject(with: Data(history.body)) as? [String: Any]
            seconds = (object?["points"] as? [[String: Any]])?.filter { ($0["requests"] as? Int ?? 0) > 0 }.count ?? 0
            usleep(200_000)  // pacing the load, not waiting for a result
        } while seconds < 3 && Date() < deadline
        XCTAssertGreaterThanOrEqual(seconds, 3, "the history did not fill")

        let page = try browse("\(larder.adminURL)/?token=\(token)", "--dump-dom")
        let dom = page.stdout
        let consoleLines = page.stderr.split(separator: "\n").filter { $0.contains(":CONSOLE") }
        XCTAssertEqual(consoleLines, [], "the console stays quiet (script errors, refused by the page's policy, failed loads)")
        XCTAssertNotNil(dom.firstMatch(of: #/data-updates="[1-9]/#), "the script updated the page: \(dom.prefix(2000))")
        XCTAssertTrue(dom.contains("data-errors=\"0\""))
        XCTAssertFalse(dom.contains("not signed in"), "the token became a cookie the page's requests carry")
        let plotted = Self.plotted(dom)
        XCTAssertEqual(Set(plotted.keys), ["requests", "misses", "errors", "hit ratio"], "the four series")
        XCTAssertTrue(plotted.values.allSatisfy { $0.reduce(0, +) >= 3 }, "every series has points: \(plotted)")
        XCTAssertTrue(dom.contains("/sp/hot"), "top URLs")
        XCTAssertTrue(dom.contains("/sp/cold-1"), "top misses")
        // Repeated errors once, with how many times and when last, in UTC.
        let broken = dom.matches(of: #/>GET /sp/broken\?status=503&amp;cc=no-store</td><td class="n">(\d+)</td><td class="n">(\d\d:\d\d:\d\d)</td>/#)
        XCTAssertEqual(broken.count, 1, "the same error grouped: \(dom.suffix(3000))")
        XCTAssertEqual(broken.first.flatMap { Int($0.1) }, round, "one error a round, counted")
        XCTAssertNotNil(dom.firstMatch(of: #/\d\d:\d\d:\d\d UTC/#), "the page's clock in UTC")
        // Each upstream server with its state.
        XCTAssertTrue(dom.contains(">default \(origin.url)</td><td class=\"n\">up</td>"), "the upstream servers' table")
        // The header names the node, the version and the upstream.
        XCTAssertTrue(dom.contains("Larder \(Larder.version) · upstream \(origin.url)"), String(dom.prefix(3000)))

        let screenshot = temporaryPath("status") + ".png"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: screenshot) }
        _ = try browse("\(larder.adminURL)/?token=\(token)", "--screenshot=\(screenshot)")
        let image = try PNGImage(contentsOf: screenshot)
        XCTAssertEqual(image.width, 1280)
        // The lines' own colours (the legend's keys are paler): the charts drew.
        XCTAssertGreaterThan(image.count(0x2f6fdf), 40, "the requests line")
        XCTAssertGreaterThan(image.count(0x2a9d4b), 40, "the hit ratio line")
    }

    /// Each series' points by its name, a polyline each (a gap starts another).
    private static func plotted(_ dom: String) -> [String: [Int]] {
        var lines: [String: [Int]] = [:]
        for match in dom.matches(of: #/data-series="([^"]+)" data-points="(\d+)"/#) {
            lines[String(match.1), default: []].append(Int(match.2) ?? 0)
        }
        return lines
    }

    /// Idle seconds leave a gap in the hit ratio, not a line drawn across them.
    func testIdleTimeIsAGapInTheHitRatio() throws {
        let origin = try startOrigin()
        let token = "gap-\(UUID().uuidString)"
        let larder = try startLarder(upstream: origin.url, environment: ["LARDER_ADMIN_TOKEN": token])
        let client = try larder.client()
        func points() throws -> [[String: Any]] {
            let history = try larder.adminClient().get("/history", headers: ["Authorization: Bearer \(token)"])
            return (try JSONSerialization.jsonObject(with: Data(history.body)) as? [String: Any])?["points"] as? [[String: Any]] ?? []
        }
        func lookups(_ point: [String: Any]) -> Int { (point["hits"] as? Int ?? 0) + (point["misses"] as? Int ?? 0) }
        // Traffic, then at least four seconds without any (the admin thread's
        // own ticks say when), then traffic again: all bounded.
        func traffic(until done: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(20)
            repeat {
                for _ in 0..<10 { XCTAssertEqual(try client.get("/gap/a").status, 200) }
                usleep(100_000)  // pacing the load
            } while try !done() && Date() < deadline
        }
        try traffic { try points().filter { lookups($0) > 0 }.count >= 2 }
        let idleDeadline = Date().addingTimeInterval(20)
        while try points().reversed().prefix(while: { lookups($0) == 0 }).count < 4 && Date() < idleDeadline { usleep(200_000) }
        let before = try points().count
        try traffic { try points().dropFirst(before).filter { lookups($0) > 0 }.count >= 2 }
        let dom = try browse("\(larder.adminURL)/?token=\(token)", "--dump-dom").stdout
        let ratio = Self.plotted(dom)["hit ratio"] ?? []
        XCTAssertGreaterThanOrEqual(ratio.count, 2, "a line before the idle seconds and one after: \(Self.plotted(dom))")
        XCTAssertEqual(Self.plotted(dom)["requests"]?.count, 1, "requests are counted every second, idle ones too")
    }

    func testWithoutTheTokenTheBrowserIsAskedToSignIn() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, environment: ["LARDER_ADMIN_TOKEN": "t0ken"])
        let dom = try browse("\(larder.adminURL)/", "--dump-dom").stdout
        XCTAssertTrue(dom.contains("Open this page as /?token=YOUR_ADMIN_TOKEN"), dom)
        XCTAssertFalse(dom.contains("status.js"))
        let wrong = try browse("\(larder.adminURL)/?token=nope", "--dump-dom").stdout
        XCTAssertTrue(wrong.contains("Wrong admin token"), wrong)
    }
}
