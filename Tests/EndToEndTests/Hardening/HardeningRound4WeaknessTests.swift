import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Issue 59's weaknesses: limits and answers users would expect. Each test
/// failed on the code before its change.

/// A HEAD (fetched as a GET to be stored) of a chunked body that never
/// says its length went on past finish_store_limit (to 260 MiB with a
/// limit of 8 MiB): the fetch without a client now stops there.
final class UnknownLengthWithoutClientEndToEndTests: ConfiguredTestCase {
    func testAFetchWithoutItsClientStopsAtTheFinishStoreLimit() throws {
        let (origin, larder) = try start(config: "finish_store_limit = \"1MiB\"\nmax_object_size = \"512MiB\"\n")
        let target = "/unknown/head?size=30000000&chunked=1&trickle=0.05"
        let c = try larder.client()
        try c.send("HEAD \(target) HTTP/1.1\r\nHost: t\r\n\r\n")
        XCTAssertEqual(try c.readResponse(method: "HEAD").status, 200)
        // The origin's side of it ends one way or the other (bounded).
        let deadline = Date().addingTimeInterval(20)
        var last = try origin.lastRequest(target)
        while last["aborted"] == nil && last["done"] == nil && Date() < deadline {
            usleep(50_000)
            last = try origin.lastRequest(target)
        }
        XCTAssertEqual(last["aborted"] as? Bool, true, "abandoned past the limit, not fetched to its end: \(last)")
        let stored = try larder.client().get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
        XCTAssertEqual(stored.status, 504, "nothing of it stored")
    }
}

/// A small file system: with 10 MiB free, the newest of ten 1 MiB objects
/// was the one lost to ENOSPC (room was made only after a write failed).
/// Room is now made before each write; failures are counted in /stats.
final class SmallFileSystemEndToEndTests: ConfiguredTestCase {
    func testTheNewestResponseIsKeptOnAFullFileSystem() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a small tmpfs needs root") }
        let mountPoint = temporaryPath("larder-small-fs")
        try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
        guard try runProgram(["mount", "-t", "tmpfs", "-o", "size=10m", "tmpfs", mountPoint]).status == 0 else {
            throw XCTSkip("cannot mount a tmpfs here")
        }
        // (Runs after the Larder stopped: teardown blocks run last first.)
        addTeardownBlock {
            let umount = Process()
            umount.executableURL = URL(fileURLWithPath: "/bin/umount")
            umount.arguments = [mountPoint]
            try? umount.run()
            umount.waitUntilExit()
        }
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, ["--cache-dir", mountPoint + "/cache", "--memory-limit", "64MiB"])
        let admin = try larder.adminClient()
        // Once the disk tier knows what it holds (until then it may not evict).
        let ready = Date().addingTimeInterval(10)
        while Date() < ready {
            let stats = try JSONSerialization.jsonObject(with: Data(try admin.get("/stats").body)) as? [String: Any]
            if (stats?["disk"] as? [String: Any])?["index_complete"] as? Bool == true { break }
            usleep(20_000)
        }
        for i in 0..<10 { XCTAssertEqual(try larder.client().get("/enospc/\(i)?size=1048576").status, 200) }
        XCTAssertEqual(try admin.request("POST", "/memory/clear").status, 200)
        // The newest reaches the disk (bounded: its write may still be queued).
        var newest = 0
        let deadline = Date().addingTimeInterval(10)
        while newest != 200 && Date() < deadline {
            newest = try larder.client().get("/enospc/9?size=1048576", headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"]).status
            if newest != 200 { usleep(50_000) }
        }
        XCTAssertEqual(newest, 200, "the newest response is on disk, older ones made room")
        let stats = try JSONSerialization.jsonObject(with: Data(try admin.get("/stats").body)) as? [String: Any]
        let disk = try XCTUnwrap(stats?["disk"] as? [String: Any])
        XCTAssertNotNil(disk["write_failures"] as? Int, "store failures are counted: \(disk)")
        XCTAssertTrue(try admin.get("/metrics").text.contains("larder_disk_write_failures_total"))
    }
}

/// A pool's health checks asked one server after another: one that hangs
/// held up every other server's check (a 1 s interval ran once in 8 s).
/// Each server is now checked on its own schedule.
final class HealthCheckScheduleEndToEndTests: ConfiguredTestCase {
    func testAServerThatHangsDelaysNoOtherServersCheck() throws {
        // A server that takes connections and never answers.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        XCTAssertTrue(bound && listen(listener, 16) == 0)
        let hangingPort = Int(UInt16(bigEndian: addr.sin_port))
        let good = try startOrigin()
        let config = try writeConfig("""
            upstream = "api"
            [upstreams.api]
            servers = ["http://127.0.0.1:\(hangingPort)", "\(good.url)"]
            health_check = "/health"
            health_interval = "5s"
            """)
        _ = try startLarder(upstream: "api", ["--config", config, "--workers", "1"])
        // The hanging server's check is taken first (bounded wait) and held open.
        var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&poller, 1, 10_000), 1, "the hanging server is checked")
        let held = accept(listener, nil, nil)
        XCTAssertGreaterThanOrEqual(held, 0)
        defer { close(held) }
        // The other server is checked meanwhile, not once that check timed out.
        XCTAssertGreaterThanOrEqual(try good.waitForCount("/health", atLeast: 1), 1)
        var scratch = [UInt8](repeating: 0, count: 4096)
        while recv(held, &scratch, scratch.count, Int32(MSG_DONTWAIT)) > 0 {}
        let open = recv(held, &scratch, scratch.count, Int32(MSG_DONTWAIT)) < 0 && errno == EAGAIN
        XCTAssertTrue(open, "the good server's check came while the hanging one's was still out")
    }
}

/// Forty new values of a varied header, sent with no request for the hot
/// variant between them, pushed it out (32 kept, each served one spared
/// only once). The variants never asked for again go first now.
final class VaryBurstEndToEndTests: ConfiguredTestCase {
    func testABurstOfNewValuesKeepsTheHotVariant() throws {
        let (origin, larder) = try start(config: "")
        let target = "/vary/burst?vary=X-V"
        let c = try larder.client()
        _ = try c.get(target, headers: ["X-V: hot"])
        XCTAssertTrue(try c.get(target, headers: ["X-V: hot"]).header("cache-status")?.contains("hit") ?? false)
        for i in 0..<40 { XCTAssertEqual(try c.get(target, headers: ["X-V: burst-\(i)"]).status, 200) }
        let hot = try c.get(target, headers: ["X-V: hot"])
        XCTAssertTrue(hot.header("cache-status")?.contains("hit") ?? false, "the hot variant stayed: \(hot.header("cache-status") ?? "")")
        XCTAssertTrue(hot.text.hasPrefix("X-V=hot"), "its own answer")
        XCTAssertEqual(try origin.count(target), 41)
    }
}
