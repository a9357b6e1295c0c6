import Foundation
import XCTest

/// `larder log --follow` against a running Larder: the requests its filters
/// admit, as they happen, one JSON object per line.
final class LogFollowTests: ProxyTestCase {
    private func follow(_ filters: [String]) throws -> ChildProcess {
        let child = try startChild(Paths.larder, ["log", "--follow", "--admin", larder.adminURL] + filters)
        XCTAssertNotNil(child.waitFor("\\{\"following\": true\\}"), child.stderr)
        return child
    }

    private func objects(_ child: ChildProcess) -> [[String: Any]] {
        child.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func testFollowersSeeTheRequestsTheirFiltersAdmit() throws {
        let misses = try follow(["--result", "miss"])
        let slow = try follow(["--prefix", "/lf/slow/", "--slower-than", "100ms"])
        let errors = try follow(["--status", "5xx"])
        let c = try larder.client()
        _ = try c.get("/lf/a")
        _ = try c.get("/lf/a")  // a hit
        _ = try c.get("/lf/slow/x?delay=0.2")
        _ = try c.get("/lf/slow/y")
        _ = try c.get("/lf/e?status=503&cc=no-store")
        XCTAssertNotNil(misses.waitFor("/lf/e"), misses.stdout)
        XCTAssertNotNil(slow.waitFor("/lf/slow/x"), slow.stdout)
        XCTAssertNotNil(errors.waitFor("/lf/e"), errors.stdout)

        let missLines = objects(misses).filter { $0["target"] != nil }
        XCTAssertEqual(missLines.compactMap { $0["target"] as? String }, ["/lf/a", "/lf/slow/x?delay=0.2", "/lf/slow/y", "/lf/e?status=503&cc=no-store"])
        XCTAssertTrue(missLines.allSatisfy { $0["result"] as? String == "miss" })
        XCTAssertEqual(missLines.first?["upstream_status"] as? Int, 200)
        XCTAssertEqual(objects(slow).compactMap { $0["target"] as? String }, ["/lf/slow/x?delay=0.2"], "under the prefix and slower")
        XCTAssertEqual(objects(errors).compactMap { $0["status"] as? Int }, [503])
    }

    func testBadFiltersAndAMissingFollowAreUsageErrors() throws {
        for (arguments, message) in [(["--follow", "--status", "7xx"], "status: expected a status such as 404 or a class such as 5xx"),
                                     (["--follow", "--result", "maybe"], "result: expected hit, miss, pass or other"),
                                     (["--follow", "--slower-than", "soon"], "slower-than: expected a duration"),
                                     ([], "larder log needs --follow")] {
            let child = try startChild(Paths.larder, ["log", "--admin", larder.adminURL] + arguments)
            XCTAssertEqual(child.waitForExit(timeout: 15), 64, "\(arguments)")
            XCTAssertNotNil(child.waitFor(NSRegularExpression.escapedPattern(for: message), timeout: 2), child.stderr)
        }
        XCTAssertEqual(try larder.adminClient().get("/log").status, 400, "the log is a stream: follow=1")
    }

    /// A follower that stops reading loses lines, told how many once it
    /// reads again; the proxy answers every request meanwhile.
    func testASlowReaderLosesLinesAndIsToldHowMany() throws {
        let follower = try HTTPClient(port: try XCTUnwrap(larder.adminPort), receiveBuffer: 4096)
        try follower.send("GET /log?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        XCTAssertNotNil(try follower.read(until: "{\"following\": true}"))
        // Lines of about 3 KiB: some 8 MiB of log while the follower reads
        // nothing, far past the 1 MiB it may leave unread and the socket buffers.
        let c = try larder.client()
        let target = "/lf/slow-reader?" + String(repeating: "p", count: 3000)
        for _ in 0..<2500 { XCTAssertEqual(try c.get(target).status, 200) }
        let stream = try XCTUnwrap(try follower.read(until: "{\"dropped\": "), "no dropped count")
        let dropped = try XCTUnwrap(stream.firstMatch(of: #/\{"dropped": (\d+)\}/#).flatMap { Int($0.1) })
        XCTAssertGreaterThan(dropped, 0)
        XCTAssertLessThan(dropped, 2500)
        XCTAssertTrue(stream.contains("\"target\":\"/lf/slow-reader?ppp"), "lines before the backlog filled were delivered")
    }
}
