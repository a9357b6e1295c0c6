import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

// Clients that try to use up a resource: connections, descriptors, output buffers, the admin API, log followers.

/// Connection, header and body limits.
final class LimitTests: ConfiguredTestCase {
    func testConnectionsOverTheLimitGet503AndOthersKeepWorking() throws {
        let (_, larder) = try start(config: "max_connections = 2\n")  // 2 workers: 1 each
        let clients = try (0..<6).map { _ in try larder.client() }
        var statuses: [Int] = []
        for c in clients {
            try? c.send("GET /limited HTTP/1.1\r\nHost: a\r\n\r\n")
            statuses.append((try? c.readResponse().status) ?? 0)
        }
        XCTAssertLessThanOrEqual(statuses.filter { $0 == 200 }.count, 2, "\(statuses)")
        XCTAssertGreaterThanOrEqual(statuses.filter { $0 == 503 }.count, 4, "\(statuses)")
        // The accepted connections still work.
        for (c, status) in zip(clients, statuses) where status == 200 {
            try c.send("GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
            XCTAssertEqual(try c.readResponse().status, 200)
        }
    }

    func testAStalledRequestBodyGets408() throws {
        let (origin, larder) = try start(config: "body_timeout = \"1s\"\n")
        let c = try larder.client()
        try c.send("POST /echo?stalled HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc")
        let r = try c.readResponse()
        XCTAssertEqual(r.status, 408)
        XCTAssertTrue(c.isClosedByPeer())
        _ = origin
    }

    func testPipelinedRequestsBeyondTheBufferWaitAndAreAnsweredInOrder() throws {
        let (_, larder) = try start(config: "max_pipeline_buffer = \"4KiB\"\n")
        let c = try larder.client()
        // About 6 KiB of requests at once: more than the buffer.
        let count = 150
        try c.send((1...count).map { "GET /pipe/\($0)?size=\($0) HTTP/1.1\r\nHost: a\r\n\r\n" }.joined())
        for i in 1...count {
            let r = try c.readResponse()
            XCTAssertEqual(r.status, 200)
            XCTAssertEqual(r.body.count, i, "answers leave in request order")
        }
    }

    func testTooManyHeaderFieldsGet431() throws {
        let (origin, larder) = try start(config: "max_header_count = 10\n")
        let c = try larder.client()
        let fields = (0..<20).map { "X-F\($0): v\r\n" }.joined()
        try c.send("GET /many-fields HTTP/1.1\r\nHost: a\r\n\(fields)\r\n")
        XCTAssertEqual(try c.readResponse().status, 431)
        XCTAssertEqual(try origin.count("/many-fields"), 0)
    }
}

/// Out of file descriptors: accepting pauses, and Larder recovers.
final class DescriptorExhaustionTests: XCTestCase {
    func testRunningOutOfDescriptorsPausesAcceptsAndRecovers() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try Origin()
        defer { origin.stop() }
        // 64 descriptors in all: a few dozen connections exhaust them.
        let child = try ChildProcess("/usr/bin/prlimit", ["--nofile=64:64", Paths.larder, "serve", "--listen", "127.0.0.1:0",
                                                          "--upstream", origin.url, "--workers", "1", "--admin-listen", "none"])
        defer { child.stop() }
        let port = try XCTUnwrap(child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), child.stderr)
        var idle: [HTTPClient] = []
        for _ in 0..<80 { if let c = try? HTTPClient(port: port) { idle.append(c) } }
        XCTAssertNotNil(child.waitFor("accept failed", timeout: 10), "the limit was reached: \(child.stderr)")
        idle.removeAll()  // the clients go away, descriptors come back
        // Bounded: accepting resumes within a few of its 100 ms pauses.
        var served: HTTPResponse?
        let deadline = Date().addingTimeInterval(15)
        while served == nil && Date() < deadline {
            served = try? HTTPClient(port: port).get("/after-exhaustion")
            if served == nil { usleep(100_000) }
        }
        XCTAssertEqual(served?.status, 200, child.stderr)
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }

    /// Out of descriptors when libcurl is to be loaded, Larder does not
    /// end (it did: "cannot load libcurl: Too many open files", exit 1): it
    /// says so and tries again, and goes on accepting (and pausing) as a
    /// daemon out of descriptors does. The limit that leaves the loader no
    /// descriptor is found by trying the few just under what a started
    /// Larder holds (measured, not assumed).
    func testOutOfDescriptorsWhenLibcurlLoadsIsNotTheEnd() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try Origin()
        defer { origin.stop() }
        let arguments = [Paths.larder, "serve", "--listen", "127.0.0.1:0", "--upstream", origin.url, "--workers", "1",
                         "--admin-listen", "none"]
        let probe = try ChildProcess(Paths.larder, Array(arguments.dropFirst()))
        XCTAssertNotNil(probe.waitFor("listening on"), probe.stderr)
        // The lowest descriptor number it leaves free (descriptors inherited
        // from the test runner may sit above it).
        let used = Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(probe.process.processIdentifier)/fd")
            .compactMap { Int($0) })
        let held = (0...).first { !used.contains($0) }!
        probe.stop()
        for limit in stride(from: held + 1, through: max(held - 3, 4), by: -1) {
            let child = try ChildProcess("/usr/bin/prlimit", ["--nofile=\(limit):\(limit)"] + arguments)
            defer { child.stop() }
            guard let port = child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init),
                  child.waitFor("libcurl cannot be loaded yet", timeout: 3) != nil else { continue }
            XCTAssertTrue(child.stderr.contains("Too many open files"), child.stderr)
            // A client now: Larder, alive, cannot accept it either, and says so.
            let socket = try? HTTPClient(port: port)
            XCTAssertNotNil(child.waitFor("accept failed"), child.stderr)
            XCTAssertTrue(child.process.isRunning, child.stderr)
            _ = socket
            kill(child.process.processIdentifier, SIGTERM)
            XCTAssertEqual(child.waitForExit(timeout: 20), 0, "stops cleanly when told: \(child.stderr)")
            return
        }
        XCTFail("no limit from \(held) down left the loader without a descriptor")
    }
}

/// Files disk hits keep open give way to connections when the process
/// runs out of descriptors, and what is stored stays stored.
final class KeptFilesUnderDescriptorPressureTests: ConfiguredTestCase {
    /// Larder with 128 descriptors in all, disk only (nothing fits in
    /// memory) and 20 files kept, each of `targets` stored and hit until
    /// its file is kept (the first hit keeps it).
    private func startWithKeptFiles(_ targets: [String], admin: String = "none", config extra: String = "") throws
        -> (origin: Origin, child: ChildProcess, port: Int, client: HTTPClient) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit") else {
            throw HarnessError("prlimit (util-linux) is missing")
        }
        let origin = try startOrigin()
        let config = try writeConfig("max_object_size = \"1KiB\"\ndisk_open_files = 20\n" + extra)
        let child = try startChild("/usr/bin/prlimit", ["--nofile=128:128", Paths.larder, "serve", "--listen", "127.0.0.1:0",
                                                        "--upstream", origin.url, "--workers", "1", "--admin-listen", admin,
                                                        "--cache-dir", temporaryPath("larder-kept"), "--config", config])
        let port = try XCTUnwrap(child.waitFor("listening on 127\\.0\\.0\\.1:(\\d+)").flatMap(Int.init), child.stderr)
        let c = try HTTPClient(port: port)
        for target in targets { XCTAssertEqual(try c.get(target).status, 200) }
        let deadline = Date().addingTimeInterval(15)
        var hits = 0
        while hits < targets.count && Date() < deadline {
            hits = try targets.filter { try c.get($0).header("cache-status")?.contains("hit") ?? false }.count
        }
        XCTAssertEqual(hits, targets.count, "every file stored and hit")
        return (origin, child, port, c)
    }

    func testKeptFilesAreClosedForConnectionsAndTheEntriesStay() throws {
        // 80 connections more do not fit beside the kept files (some
        // descriptors are the files' directories).
        let targets = (0..<20).map { "/kept-\($0)?size=4000" }
        let (origin, child, port, c) = try startWithKeptFiles(targets)
        var idle: [HTTPClient] = []
        for _ in 0..<80 { idle.append(try HTTPClient(port: port)) }
        for client in idle { try client.send("GET /kept-0?size=4000 HTTP/1.1\r\nHost: a\r\n\r\n") }
        // Each connection is answered (one not accepted would time out).
        for (n, client) in idle.enumerated() {
            guard let r = try? client.readResponse() else { return XCTFail("connection \(n) got no answer: \(child.stderr)") }
            XCTAssertEqual(r.status, 200)
        }
        XCTAssertNotNil(child.waitFor("out of descriptors: closed \\d+ files disk hits kept open", timeout: 5), child.stderr)
        idle.removeAll()
        for target in targets { XCTAssertTrue(try c.get(target).header("cache-status")?.contains("hit") ?? false, target) }
        for target in targets { XCTAssertEqual(try origin.count(target), 1, "\(target) stayed stored") }
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }

    func testTheAdminListenerTooGetsKeptFilesBackWhenDescriptorsRunOut() throws {
        let targets = (0..<20).map { "/kept-admin-\($0)?size=4000" }
        let (_, child, _, c) = try startWithKeptFiles(targets, admin: "127.0.0.1:0", config: "admin_max_connections = 1000\n")
        let adminPort = try XCTUnwrap(child.stderr.firstMatch(of: #/admin API on [^ ]+:(\d+)/#).flatMap { Int($0.1) }, child.stderr)
        // Admin connections (each answered, then held open) until the
        // descriptors left are used up, and six more: those six are
        // accepted only once kept files are given back.
        let used = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.process.processIdentifier)/fd").count
        var held: [HTTPClient] = []
        for n in 0..<(128 - used + 6) {
            let admin = try HTTPClient(port: adminPort)
            guard let r = try? admin.get("/healthz") else { return XCTFail("admin connection \(n) got no answer: \(child.stderr)") }
            XCTAssertEqual(r.status, 200)
            held.append(admin)
        }
        XCTAssertNotNil(child.waitFor("out of descriptors: closed \\d+ files disk hits kept open", timeout: 5), child.stderr)
        held.removeAll()
        for target in targets { XCTAssertTrue(try c.get(target).header("cache-status")?.contains("hit") ?? false, target) }
        XCTAssertTrue(child.process.isRunning, child.stderr)
    }
}

/// A client that pipelines and never reads cannot make Larder queue
/// answers without bound; one that reads nothing for send_timeout is dropped.
final class UnreadOutputTests: ConfiguredTestCase {
    func testAnswersWaitWhileTheClientLeavesOutputUnread() throws {
        let (_, larder) = try start(config: "send_timeout = \"30s\"\n")
        let target = "/big-hit?size=131072"
        XCTAssertEqual(try larder.client().get(target).body.count, 131_072)
        let hitsBefore = try statsFigure(larder, "hits")
        let c = try larder.client()
        let count = 200  // 25 MiB of answers, about 10 KiB of requests
        try c.send(String(repeating: "GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n", count: count))
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "output_pauses", atLeast: 1), 1, "answers held back")
        let answered = try statsFigure(larder, "hits") - hitsBefore
        XCTAssertLessThan(answered, count / 2, "answers stop at the output bound (plus socket buffers), not at the end of the input")
        // Reading resumes the answers, in order and complete.
        for i in 0..<count {
            let r = try c.readResponse()
            XCTAssertEqual(r.body.count, 131_072, "answer \(i)")
        }
    }

    func testAClientThatReadsNothingIsDisconnectedAfterSendTimeout() throws {
        let (_, larder) = try start(config: "send_timeout = \"1s\"\n")
        let target = "/big-hit?size=131072"
        _ = try larder.client().get(target)
        let c = try larder.client()
        try c.send(String(repeating: "GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n", count: 100))
        XCTAssertGreaterThanOrEqual(try waitForStats(larder, "send_timeouts", atLeast: 1), 1)
        XCTAssertTrue(c.isClosedByPeer())
        XCTAssertEqual(try larder.client().get(target).status, 200, "others are still served")
    }
}

/// Idle admin connections cannot use up the process's descriptors.
final class AdminConnectionLimitTests: ConfiguredTestCase {
    func testAdminConnectionsAreBoundedAndUnauthenticatedIdleOnesClosed() throws {
        let (_, larder) = try start(config: "admin_max_connections = 4\n")
        let idle = try (0..<4).map { _ in try larder.adminClient() }
        // Past the limit: 503 and closed (the idle ones hold every slot).
        let refused = try larder.adminClient()
        try refused.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")
        XCTAssertEqual(try refused.readResponse().status, 503)
        XCTAssertEqual(try larder.client().get("/still-serving").status, 200, "the proxy keeps accepting")
        // Unauthenticated idle connections are closed after a few seconds.
        for c in idle { XCTAssertTrue(c.isClosedByPeer()) }
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertGreaterThanOrEqual(try statsFigure(larder, "admin_refused_connections"), 1)
    }
}

/// Admin connections' deadlines, on Larder's clock (moved on, not waited
/// for): one that sent nothing goes after 5 s, one that was answered
/// stays open for 30 s of idleness, not more.
final class AdminIdleDeadlineTests: ConfiguredTestCase {
    func testIdleAdminConnectionsCloseOnTheirDeadlines() throws {
        let origin = try startOrigin()
        let larder = try startLarder(upstream: origin.url, environment: LarderProcess.testClock)
        let silent = try larder.adminClient()
        let answered = try larder.adminClient()
        XCTAssertEqual(try answered.get("/healthz").status, 200)
        XCTAssertEqual(try silent.get("/healthz").status, 200, "both open")  // (then sent nothing more)
        let unasked = try larder.adminClient()
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200, "the listener has taken the connections before")
        try larder.advanceClock(6)
        XCTAssertTrue(unasked.isClosedByPeer(), "nothing asked within 5 s: closed")
        try larder.advanceClock(20)
        XCTAssertEqual(try answered.get("/healthz").status, 200, "answered ones stay up to 30 s idle")
        try larder.advanceClock(31)
        XCTAssertTrue(silent.isClosedByPeer(), "idle past 30 s: closed")
    }
}

/// max_connections is one count across workers; a disk file cut short
/// behind Larder's back is dropped, not served short.
final class SharedLimitsAndDiskFilesTests: ConfiguredTestCase {
    func testMaxConnectionsIsOneCountAcrossWorkers() throws {
        let (_, larder) = try start(config: "max_connections = 100\n")
        var clients: [HTTPClient] = []
        for i in 0..<100 {
            let c = try larder.client()
            XCTAssertEqual(try c.get("/conn?\(i)").status, 200, "connection \(i) of 100")
            clients.append(c)
        }
        XCTAssertEqual(try larder.client().get("/conn-over").status, 503, "the 101st is refused")
        clients.removeAll()
    }

    func testOneConnectionMeansOneAcrossWorkers() throws {
        // Split per worker, a limit of 1 let each of the 2 workers take one.
        let (_, larder) = try start(config: "max_connections = 1\n")
        let first = try larder.client()
        XCTAssertEqual(try first.get("/only").status, 200)
        for i in 0..<6 {
            XCTAssertEqual(try larder.client().get("/over-\(i)").status, 503, "connection \(i + 2) while one is open")
        }
        XCTAssertEqual(try first.get("/only-again").status, 200)
    }

    func testABodyFileTruncatedWhileRunningIsDroppedAndFetchedAgain() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-trunc-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let (origin, larder) = try start(config: "cache_dir = \"\(directory)\"\nmax_object_size = \"64KiB\"\n")
        let target = "/truncated?size=3000000"
        let original = try larder.client().get(target)
        XCTAssertEqual(original.body.count, 3_000_000)
        func files() -> [String] {
            (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [])
                .filter { $0.hasSuffix(".lrd") }.map { directory + "/" + $0 }
        }
        // The body file shows before its entry is committed: ask (bounded)
        // with a cache-only policy until the store answers from it.
        let asker = try larder.client()
        var hit: HTTPResponse?
        for _ in 0..<500 where hit == nil {
            let r = try asker.get(target, headers: ["Larder-Cache-Policy: returnCacheDataDontLoad"])
            if r.status == 200 { hit = r } else { usleep(20_000) }
        }
        XCTAssertTrue(hit?.header("cache-status")?.contains("hit") ?? false, "served from the file")
        XCTAssertEqual(hit?.body.count, 3_000_000)
        let path = try XCTUnwrap(files().first)
        XCTAssertEqual(truncate(path, 1_000_000), 0)
        let again = try larder.client().get(target)
        XCTAssertEqual(again.status, 200)
        XCTAssertEqual(again.body, original.body, "a whole body, fetched again")
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertNotNil(larder.child.waitFor("shorter than recorded"), "logged")
    }
}

/// Log followers that never read made every later admin request answer
/// 503 (they held all admin connections, forever). Followers now have a
/// bound of their own, and one that reads nothing for send_timeout is
/// dropped; purges and health checks keep their room.
final class LogFollowerBoundEndToEndTests: ConfiguredTestCase {
    func testFollowersThatNeverReadCannotLockOutTheAdminAPI() throws {
        let (_, larder) = try start(config: "send_timeout = \"1s\"\n")
        let adminPort = try XCTUnwrap(larder.adminPort)
        var followers: [HTTPClient] = []
        for _ in 0..<64 {
            let follower = try HTTPClient(port: adminPort, receiveBuffer: 4096)
            try follower.send("GET /log?follow=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            followers.append(follower)
        }
        // Each has its answer (a follower's stream, or 503) before the admin
        // API is asked: until then the 64 connections are all open.
        let refused = try followers.filter { try $0.read(until: "\r\n\r\n")?.hasPrefix("HTTP/1.1 503") ?? false }
        XCTAssertGreaterThan(refused.count, 40, "followers beyond their bound are refused")
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().request("POST", "/purge?all=true").status, 200)

        // Some 8 MiB of log lines that the accepted followers never read.
        let c = try larder.client()
        let target = "/lf/unread?" + String(repeating: "p", count: 3000)
        for _ in 0..<2500 { XCTAssertEqual(try c.get(target).status, 200) }
        XCTAssertTrue(larder.child.waitFor("(dropping a log follower that has read nothing)") != nil, larder.child.stderr)
        XCTAssertEqual(try larder.adminClient().get("/healthz").status, 200)
        XCTAssertEqual(try larder.adminClient().get("/stats").status, 200)
    }
}
