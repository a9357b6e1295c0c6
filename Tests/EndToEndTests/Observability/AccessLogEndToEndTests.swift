import Foundation
import TestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The access log: one line per request, to a file (reopened on SIGHUP).
final class AccessLogTests: ConfiguredTestCase {
    func testOneLinePerRequestWithTheCacheResult() throws {
        let log = temporaryPath("larder-access") + ".log"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: log + ".1") }
        addTeardownBlock { try? FileManager.default.removeItem(atPath: log) }
        let l = try start(config: "access_log = \"\(log)\"\n").larder
        let c = try l.client()
        _ = try c.get("/logged?size=100")
        _ = try c.get("/logged?size=100")
        _ = try c.request("HEAD", "/logged?size=100")

        let written = lines(atLeast: 3, in: log)
        XCTAssertEqual(written.count, 3, written.joined(separator: "\n"))
        // TIME CLIENT METHOD TARGET STATUS BYTES MILLISECONDS "CACHE" HOST PROTOCOL UPSTREAM SNI
        let pattern = #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z 127\.0\.0\.1 (GET|HEAD) /logged\?size=100 200 (\d+) \d+ "(.*)" \S+ HTTP/1\.1 \S+ -/#
        let parsed = written.compactMap { try? pattern.wholeMatch(in: $0) }
        XCTAssertEqual(parsed.count, 3, written.joined(separator: "\n"))
        guard parsed.count == 3 else { return }
        XCTAssertEqual(parsed[0].output.2, "100")
        XCTAssertEqual(parsed[0].output.3, "fwd=uri-miss; stored")
        XCTAssertTrue(parsed[1].output.3.hasPrefix("hit; ttl="), String(parsed[1].output.3))
        XCTAssertEqual(parsed[2].output.1, "HEAD")
        XCTAssertEqual(parsed[2].output.2, "0")

        // logrotate: move the file away, SIGHUP, and new lines go to a new file.
        try FileManager.default.moveItem(atPath: log, toPath: log + ".1")
        kill(l.child.process.processIdentifier, SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while !FileManager.default.fileExists(atPath: log) && Date() < deadline { usleep(20_000) }
        _ = try c.get("/after-rotation")
        XCTAssertEqual(lines(atLeast: 1, in: log).first?.contains("/after-rotation"), true)
    }

    /// Issue 59: a reopen closed the old descriptor while a worker could
    /// still write to it; a client connection accepted meanwhile could get
    /// its number, and log lines. The new file now takes the old number's
    /// place: the same descriptor names the new file, none the moved one.
    func testAReopenKeepsTheLogsDescriptorNumber() throws {
        let log = temporaryPath("larder-access-fd") + ".log"
        addTeardownBlock { try? FileManager.default.removeItem(atPath: log + ".1") }
        addTeardownBlock { try? FileManager.default.removeItem(atPath: log) }
        let l = try start(config: "access_log = \"\(log)\"\n").larder
        let pid = l.child.process.processIdentifier
        func descriptors(naming path: String) -> [String] {
            let dir = "/proc/\(pid)/fd"
            return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: dir + "/" + $0)) == path
            }
        }
        let before = descriptors(naming: log)
        XCTAssertEqual(before.count, 1, "one descriptor for the log")
        try FileManager.default.moveItem(atPath: log, toPath: log + ".1")
        kill(pid, SIGHUP)
        let deadline = Date().addingTimeInterval(10)
        while descriptors(naming: log).isEmpty && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(descriptors(naming: log), before, "the new file behind the same number")
        XCTAssertEqual(descriptors(naming: log + ".1"), [], "the moved file is let go")
        // Clients connected around the reopen get answers, never log lines.
        for i in 0..<20 {
            let r = try l.client().get("/fd-\(i)")
            XCTAssertEqual(r.status, 200)
            XCTAssertFalse(r.text.contains("/fd-"), r.text)
        }
        XCTAssertEqual(lines(atLeast: 20, in: log).count, 20)
    }

    func testAnUnwritableAccessLogIsAClearError() throws {
        let config = try writeConfig("access_log = \"/nonexistent-dir/access.log\"\n")
        let child = try startChild(Paths.larder, ["serve", "--config", config, "--upstream", "http://127.0.0.1:1",
                                                  "--listen", "127.0.0.1:0", "--admin-listen", "none"])
        XCTAssertEqual(child.waitForExit(timeout: 15), 78, "a configuration error")
        XCTAssertNotNil(child.waitFor("access_log: cannot write /nonexistent-dir/access.log", timeout: 2), child.stderr)
    }
}
