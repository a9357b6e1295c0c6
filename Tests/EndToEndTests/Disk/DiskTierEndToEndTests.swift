import Foundation
import TestSupport
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The disk tier with the real binary: restarts, crashes, corruption, limits.
final class DiskTierEndToEndTests: DiskEndToEndCase {
    func testEntriesSurviveARestart() throws {
        let first = try start()
        let original = try first.client().get("/keep?size=5000")
        stop(first)
        // The stop records each sub-directory's names, which the next start's
        // first lookups read instead of listing the directory.
        let stored = try XCTUnwrap(cacheFiles().first)
        let sub = URL(fileURLWithPath: stored).deletingLastPathComponent().lastPathComponent
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/names/" + sub), "names of \(sub) recorded at the stop")
        let second = try start()
        let again = try second.client().get("/keep?size=5000")
        XCTAssertTrue(again.header("cache-status")?.contains("hit") ?? false, "\(again.headers)")
        XCTAssertEqual(again.body, original.body)
        XCTAssertEqual(try origin.count("/keep?size=5000"), 1, "the origin is not contacted again")
    }

    /// A 304 refreshes a large stored response on disk too (its body, over
    /// 1 MiB, stays in its file and is copied into the refreshed one):
    /// after a restart the refreshed response is fresh, and the origin is
    /// not asked again.
    func testARefreshBy304OfALargeFileIsOnDiskAfterARestart() throws {
        let target = "/refreshed?size=2000000&etag=r1&cc=max-age=4"
        let first = try start()
        let original = try first.client().get(target)
        XCTAssertEqual(original.status, 200)
        let stored = Date()
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        stop(first)
        // Stale once its four seconds have passed (the daemon's own clock:
        // real time), then revalidated after a restart: a 304, fresh for
        // four seconds more (room for a slow machine's restart).
        while Date().timeIntervalSince(stored) < 4.2 { usleep(50_000) }
        let second = try start()
        let revalidated = try second.client().get(target)
        XCTAssertEqual(revalidated.header("cache-status"), "larder; fwd=stale; fwd-status=304; stored")
        XCTAssertEqual(revalidated.body, original.body)
        XCTAssertEqual(try origin.count(target), 2)
        // The refreshed file is renamed over the stale one.
        func modified() -> Date { cacheFiles().first.flatMap { try? FileManager.default.attributesOfItem(atPath: $0)[.modificationDate] as? Date } ?? .distantPast }
        let written = Date().addingTimeInterval(10)
        while modified() < stored.addingTimeInterval(4) && Date() < written { usleep(20_000) }
        stop(second)
        let third = try start()
        let again = try third.client().get(target)
        XCTAssertTrue(again.header("cache-status")?.contains("hit") ?? false, "fresh from disk: \(again.headers)")
        XCTAssertEqual(again.body, original.body)
        XCTAssertEqual(try origin.count(target), 2, "not revalidated again")
    }

    /// Disk hits keep their files open for the next hits, as many as
    /// `disk_open_files` allows (by default more than these six; 0: none),
    /// seen as an operator sees them: the process's descriptors on `.lrd` files.
    func testDiskOpenFilesBoundsTheDescriptorsHitsKeep() throws {
        for (setting, expected) in [("", 6), ("disk_open_files = 2\n", 2), ("disk_open_files = 0\n", 0)] {
            let l = try start(["--config", try config("max_object_size = \"1KiB\"\n" + setting)])  // disk only
            let c = try l.client()
            let targets = (0..<6).map { "/open-\($0)?size=4000" }
            // Stored once each (the first run) and written behind: the hits
            // come once every file is there (a second store of a key would
            // replace its entry, and the descriptor a hit kept on it, later).
            for target in targets { _ = try c.get(target) }
            let deadline = Date().addingTimeInterval(10)
            while cacheFiles().count < targets.count && Date() < deadline { usleep(20_000) }
            for target in targets {
                for _ in 0..<2 {
                    let r = try c.get(target)
                    XCTAssertTrue(r.header("cache-status")?.hasPrefix("larder; hit") ?? false, "\(setting)\(target): \(r.headers)")
                    XCTAssertEqual(r.body.count, 4000)
                }
                XCTAssertEqual(try origin.count(target), 1)
            }
            let fds = "/proc/\(l.child.process.processIdentifier)/fd"
            let kept = try FileManager.default.contentsOfDirectory(atPath: fds).filter {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: fds + "/" + $0))?.hasSuffix(".lrd") ?? false
            }
            XCTAssertEqual(kept.count, expected, setting.isEmpty ? "default" : setting)
            stop(l)
        }
    }

    func testACorruptedFileIsDroppedAndRefetched() throws {
        let first = try start()
        let original = try first.client().get("/corrupt?size=3000")
        stop(first)
        let files = cacheFiles()
        XCTAssertEqual(files.count, 1)
        for path in files {
            var bytes = [UInt8](FileManager.default.contents(atPath: path)!)
            bytes[bytes.count - 100] ^= 0x5A
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        }
        let second = try start()
        let again = try second.client().get("/corrupt?size=3000")
        XCTAssertEqual(again.header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertEqual(again.body, original.body)
        XCTAssertEqual(try origin.count("/corrupt?size=3000"), 2)
    }

    /// A file corrupted while Larder runs is found so by a lookup on a
    /// worker's loop: dropped (renamed at once, deleted by the writer, no
    /// unlink on the loop: the debug binary traps on one) and fetched again.
    func testAFileCorruptedWhileRunningIsDroppedByTheLoopAndRefetched() throws {
        let target = "/corrupt-live?size=3000"
        let l = try start(["--memory-limit", "64KiB"])
        let c = try l.client()
        let original = try c.get(target)
        // Others push it out of the memory tier: the next hit reads its file.
        for n in 0..<60 { _ = try c.get("/filler/\(n)?size=3000") }
        func file() -> String? {
            cacheFiles().first { FileManager.default.contents(atPath: $0).map { Data($0).range(of: Data("corrupt-live".utf8)) != nil } ?? false }
        }
        let deadline = Date().addingTimeInterval(30)
        while file() == nil && Date() < deadline { usleep(20_000) }
        let path = try XCTUnwrap(file())
        var bytes = [UInt8](try XCTUnwrap(FileManager.default.contents(atPath: path)))
        bytes[bytes.count - 100] ^= 0x5A
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let again = try c.get(target)
        XCTAssertEqual(again.header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertTrue(again.body == original.body, "the whole body, fetched again")
        XCTAssertEqual(try origin.count(target), 2)
        XCTAssertNotNil(l.child.waitFor("dropping"), "logged")
    }

    func testKillDashNineDuringWritesNeverServesABadBody() throws {
        let first = try start()
        let c = try first.client()
        let targets = (0..<80).map { "/crash/\($0)?size=\(1000 + $0 * 997)" }
        for target in targets { _ = try c.get(target) }
        kill(first.child.process.processIdentifier, SIGKILL)  // writes may be half done
        _ = first.child.waitForExit(timeout: 10)
        let second = try start()
        let d = try second.client()
        let direct = try HTTPClient(port: origin.port)
        for target in targets {
            let served = try d.get(target)
            XCTAssertEqual(served.status, 200, target)
            XCTAssertTrue(served.body == (try direct.get(target)).body, "body of \(target) after a crash")
        }
    }

    func testASecondInstanceOnTheSameDirectoryIsRefused() throws {
        _ = try start()
        let second = try ChildProcess(Paths.larder, ["serve", "--listen", "127.0.0.1:0", "--upstream", origin.url,
                                                     "--cache-dir", directory])
        XCTAssertEqual(second.waitForExit(timeout: 15), 1)
        XCTAssertNotNil(second.waitFor("is in use by another running larder", timeout: 2), second.stderr)
    }

    func testAnUnusableCacheDirectoryStillServesFromMemory() throws {
        let l = try startLarder(upstream: origin.url, ["--cache-dir", "/dev/null/larder"])
        XCTAssertNotNil(l.child.waitFor("disk tier disabled", timeout: 5))
        let c = try l.client()
        _ = try c.get("/mem?size=10")
        XCTAssertTrue(try c.get("/mem?size=10").header("cache-status")?.contains("hit") ?? false)
    }

    func testTheDiskLimitHolds() throws {
        let l = try start(["--disk-limit", "1MiB", "--memory-limit", "64KiB"])
        let c = try l.client()
        for i in 0..<40 { XCTAssertEqual(try c.get("/big/\(i)?size=50000").status, 200) }
        stop(l)
        let total = cacheFiles().reduce(0) { sum, path in
            sum + ((try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0)
        }
        XCTAssertGreaterThan(total, 0)
        XCTAssertLessThanOrEqual(total, 1 << 20)
    }

    /// memory_ttl drops an entry from memory while HTTP still calls it fresh.
    func testMemoryLifetimeEndsAMemoryOnlyEntry() throws {
        let l = try startLarder(upstream: origin.url, ["--config", try config("memory_ttl = \"1s\"\n")],
                                environment: LarderProcess.testClock)
        let c = try l.client()
        _ = try c.get("/mttl?size=10")
        XCTAssertTrue(try c.get("/mttl?size=10").header("cache-status")?.contains("hit") ?? false)
        try l.advanceClock(2.2)
        XCTAssertEqual(try c.get("/mttl?size=10").header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertEqual(try origin.count("/mttl?size=10"), 2)
    }

    /// disk_ttl: a file past its lifetime is not served after a restart.
    func testDiskLifetimeEndsADiskEntry() throws {
        let path = try config("memory_ttl = \"1s\"\ndisk_ttl = \"mirror\"\n")
        let first = try start(["--config", path])
        _ = try first.client().get("/dttl?size=10")
        stop(first)
        // The file's lifetime passes for the second process: its clocks
        // move on before it is asked.
        let second = try start(["--config", path], environment: LarderProcess.testClock)
        try second.advanceClock(2.2)
        XCTAssertEqual(try second.client().get("/dttl?size=10").header("cache-status"), "larder; fwd=uri-miss; stored")
        XCTAssertEqual(try origin.count("/dttl?size=10"), 2)
    }

    /// stale-while-revalidate of a response too large for the memory tier:
    /// the background refresh stores the new response (streamed to the
    /// disk tier, as a client's fetch is), not only small ones.
    func testABackgroundRefreshReplacesAResponseKeptOnDisk() throws {
        let l = try start(["--config", try config("max_object_size = \"64KiB\"\n")], environment: LarderProcess.testClock)
        let target = "/swr-large?cc=max-age=1,stale-while-revalidate=60&size=300000"
        let c = try l.client()
        XCTAssertEqual(try c.get(target).body.count, 300_000)
        // The disk tier writes behind: asked until the stored copy answers (a miss fetches again).
        let deadline = Date().addingTimeInterval(10)
        var hit = try c.get(target)
        while !(hit.header("cache-status")?.hasPrefix("larder; hit") ?? false) && Date() < deadline { hit = try c.get(target) }
        XCTAssertTrue(hit.header("cache-status")?.hasPrefix("larder; hit") ?? false)
        try l.advanceClock(1.5)  // stale now
        let fetched = try origin.count(target)
        let stale = try c.get(target)
        XCTAssertTrue(stale.header("cache-status")?.hasPrefix("larder; hit") ?? false, "served stale at once")
        XCTAssertEqual(stale.body.count, 300_000)
        XCTAssertEqual(try origin.waitForCount(target, atLeast: fetched + 1), fetched + 1, "one background revalidation")
        // A refreshed copy (this revalidation's, or a later one's: with
        // max-age=1 a slow machine may see the next one first) replaces the stale one.
        func count(_ response: HTTPResponse) -> Int { Int(response.header("x-origin-count") ?? "") ?? 0 }
        var refreshed = try c.get(target)
        var trace: [String] = []  // what came instead, for the failure message
        while count(refreshed) <= fetched && Date() < deadline.addingTimeInterval(10) {
            if trace.count < 8 { trace.append("\(refreshed.header("cache-status") ?? "-"), count \(refreshed.header("x-origin-count") ?? "-")") }
            refreshed = try c.get(target)
        }
        XCTAssertGreaterThan(count(refreshed), fetched,
                             "the refreshed response replaced the stale one; came instead: \(trace.joined(separator: " | "))")
        XCTAssertEqual(refreshed.body.count, 300_000)
    }

    /// A stale response stored as a file, revalidated with a 304 whose
    /// arrival finds the file deleted: answered whole from the descriptor
    /// the lookup holds (the very bytes that were validated), not left
    /// unanswered nor fetched again.
    func testA304ForAResponseWhoseFileVanishedMeanwhileIsAnsweredFromItsDescriptor() throws {
        let l = try start(["--config", try config("max_object_size = \"1MiB\"\n")], environment: LarderProcess.testClock)
        let target = "/vanish?size=2097152&cc=max-age=1&etag=v1&delay=0.5"
        XCTAssertEqual(try l.client().get(target).body.count, 2_097_152)
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 1)
        try l.advanceClock(1.5)  // stale now
        let answered = expectation(description: "the revalidating request is answered")
        let port = l.port
        let result = Locked<(Int, Int)?>(nil)
        Thread {
            if let r = try? HTTPClient(port: port).get(target) { result.withLock { $0 = (r.status, r.body.count) } }
            answered.fulfill()
        }.start()
        // The conditional request is at the origin (counted before its delay): the file goes now.
        while try origin.count(target) < 2 && Date() < deadline.addingTimeInterval(10) { usleep(10_000) }
        XCTAssertEqual(try origin.count(target), 2)
        for file in cacheFiles() { try FileManager.default.removeItem(atPath: file) }
        wait(for: [answered], timeout: 20)
        XCTAssertEqual(result.withLock { $0?.0 }, 200)
        XCTAssertEqual(result.withLock { $0?.1 }, 2_097_152)
        XCTAssertEqual(try origin.count(target), 2, "not fetched again")
        XCTAssertEqual(try origin.lastRequest(target)["headers"].map { "\($0)".contains("if-none-match") }, true)
    }

    /// A hit on disk whose read may wait for the disk (here a large file's
    /// head) is read on an I/O thread, not the worker's loop, and answered
    /// whole; the loop meanwhile answers others.
    func testADiskReadThatMayWaitIsMadeOffTheWorkersLoop() throws {
        let l = try start(["--config", try config("max_object_size = \"1MiB\"\n")])  // larger ones: disk only
        let target = "/offloaded?size=2097152"
        let miss = try l.client().get(target)
        XCTAssertEqual(miss.body.count, 2_097_152)
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 1)
        // The miss may have been looked up off the loop too (the start-up
        // rebuild had not listed its directory yet on a slow machine).
        let before = try statsFigure(l, "offloaded_lookups")
        let hit = try l.client().get(target)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        XCTAssertTrue(hit.body == miss.body, "the body served is the one fetched")
        let after = try statsFigure(l, "offloaded_lookups")
        XCTAssertEqual(after, before + 1, "its head was read on an I/O thread")
        XCTAssertEqual(try origin.count(target), 1)
        let metrics = try l.adminClient().get("/metrics")
        XCTAssertTrue(String(decoding: metrics.body, as: UTF8.self).contains("larder_offloaded_lookups_total \(after)"))
        XCTAssertEqual(try statsFigure(l, "io_jobs"), 0, "none left on the I/O threads once answered")
        XCTAssertTrue(String(decoding: metrics.body, as: UTF8.self).contains("larder_io_jobs 0"))
    }

    /// A disk hit's body whose pages left the page cache while it was being
    /// sent (the client reads slowly) is read into it on an I/O thread, a
    /// window at a time, not by sendfile on the worker's loop; it arrives
    /// whole. (The kernel's own readahead may bring a window back before
    /// Larder looks at it: then nothing waits and nothing is offloaded, so
    /// the hit is tried a few times.)
    func testABodyThatLeftThePageCacheMidSendIsReadOffTheWorkersLoop() throws {
        let l = try start(["--config", try config("max_object_size = \"1MiB\"\n")])
        let size = 32 << 20
        let target = "/coldsend?size=\(size)"
        let miss = try l.client().get(target)
        XCTAssertEqual(miss.body.count, size)
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        let file = try XCTUnwrap(cacheFiles().first)
        let before = try statsFigure(l, "offloaded_reads")
        var after = before
        for _ in 0..<5 where after == before {
            let c = try HTTPClient(port: l.port, receiveBuffer: 64 << 10)
            try c.send("GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertNotNil(try c.read(until: "\r\n\r\n"), "the head came")
            // What is not in the sockets' buffers yet now has to come from the disk.
            guard PageCache.drop(file, probe: size - 1) else { throw XCTSkip("this file system keeps the file's pages in memory (tmpfs?)") }
            let hit = try c.readResponse()
            XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
            XCTAssertTrue(hit.body == miss.body, "the body arrived whole")
            after = try statsFigure(l, "offloaded_reads")
        }
        XCTAssertGreaterThan(after, before, "its cold windows were read on an I/O thread")
        let metrics = String(decoding: try l.adminClient().get("/metrics").body, as: UTF8.self)
        XCTAssertTrue(metrics.contains("larder_offloaded_reads_total \(after)"), metrics)
        XCTAssertEqual(try origin.count(target), 1)
    }

    /// A 100 MiB response: too large for memory, streamed to disk while it
    /// streams to the client, then served from the file (sendfile).
    func testAHundredMebibyteObjectIsCachedOnDiskAndServedWithFlatMemory() throws {
        try skipMemoryFiguresUnderSanitizers()
        let target = "/huge100?size=104857600"
        let l = try start(["--memory-limit", "16MiB"])
        let pid = l.child.process.processIdentifier
        let miss = try l.client().get(target)
        XCTAssertEqual(miss.body.count, 104_857_600)
        XCTAssertEqual(miss.header("cache-status"), "larder; fwd=uri-miss; stored")
        // The file is sealed by the background writer: wait for it (bounded).
        let deadline = Date().addingTimeInterval(30)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        XCTAssertEqual(cacheFiles().count, 1)
        let before = memory(of: pid)
        let hit = try l.client().get(target)
        let after = memory(of: pid)
        XCTAssertTrue(hit.header("cache-status")?.contains("hit") ?? false, "\(hit.headers)")
        XCTAssertTrue(hit.body == miss.body, "the body served from disk is the one fetched")
        XCTAssertEqual(try origin.count(target), 1)
        XCTAssertLessThan(after.rss - before.rss, 16 << 20, "serving from disk does not load the object")
        XCTAssertLessThan(after.peak, 100 << 20, "the object was never held in memory whole")
        // A range of it, from the file.
        let part = try l.client().get(target, headers: ["Range: bytes=104857500-"])
        XCTAssertEqual(part.status, 206)
        XCTAssertTrue(part.body == Array(miss.body[104_857_500...]))
    }

    /// A memory tier of 2 MiB in front of the disk tier is split into shards
    /// of 256 KiB and leaves objects larger than such a shard keeps (192 KiB)
    /// to the disk tier: stored there, hit from there, never in memory.
    func testASmallMemoryTierLeavesLargerObjectsToTheDiskTier() throws {
        let l = try start(["--memory-limit", "2MiB"])
        let c = try l.client()
        let first = try c.get("/mid?size=300000")
        _ = try c.get("/small?size=1000")
        let deadline = Date().addingTimeInterval(10)
        while cacheFiles().count < 2 && Date() < deadline { usleep(20_000) }
        let again = try c.get("/mid?size=300000")
        XCTAssertTrue(again.header("cache-status")?.contains("hit") ?? false, "\(again.headers)")
        XCTAssertTrue(again.body == first.body)
        XCTAssertEqual(try origin.count("/mid?size=300000"), 1)
        let stats = try l.adminClient().request("GET", "/stats", headers: [])
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        XCTAssertEqual((json["memory"] as? [String: Any])?["objects"] as? Int, 1, "only the small object is in memory")
        XCTAssertEqual((json["disk"] as? [String: Any])?["objects"] as? Int, 2)
    }

    /// A gzip body served from the disk tier (too large for the memory
    /// tier) is decoded for a client that does not take gzip.
    func testAGzipBodyServedFromDiskIsDecodedForAClientWithoutGzip() throws {
        let target = "/gzdisk?gzip=always&size=6000000"
        let l = try start(["--memory-limit", "64KiB"])
        let gzipped = try l.client().get(target, headers: ["Accept-Encoding: gzip"])
        XCTAssertGreaterThan(gzipped.body.count, 64 << 10, "larger than the memory tier")
        let deadline = Date().addingTimeInterval(30)
        while cacheFiles().isEmpty && Date() < deadline { usleep(20_000) }
        let plain = try l.client().get(target)
        XCTAssertTrue(plain.header("cache-status")?.contains("hit") ?? false, "\(plain.headers)")
        XCTAssertNil(plain.header("content-encoding"))
        XCTAssertEqual(plain.body.count, 6_000_000)
        XCTAssertEqual(try origin.count(target), 1)
    }
}
