import Foundation
import XCTest

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
        let plotted = dom.matches(of: #/data-points="(\d+)"/#).compactMap { Int($0.1) }
        XCTAssertEqual(plotted.count, 4, "requests, misses, errors and hit ratio lines")
        XCTAssertTrue(plotted.allSatisfy { $0 >= 3 }, "every line has points: \(plotted)")
        XCTAssertTrue(dom.contains("/sp/hot"), "top URLs")
        XCTAssertTrue(dom.contains("/sp/cold-1"), "top misses")
        XCTAssertTrue(dom.contains("GET /sp/broken?status=503&amp;cc=no-store"), "recent errors")

        let screenshot = temporaryPath("status") + ".png"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: screenshot) }
        _ = try browse("\(larder.adminURL)/?token=\(token)", "--screenshot=\(screenshot)")
        let image = try PNGImage(contentsOf: screenshot)
        XCTAssertEqual(image.width, 1280)
        // The lines' own colours (the legend's keys are paler): the charts drew.
        XCTAssertGreaterThan(image.count(0x2f6fdf), 40, "the requests line")
        XCTAssertGreaterThan(image.count(0x2a9d4b), 40, "the hit ratio line")
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
