import XCTest
import CacheSemantics
@testable import CacheStorage
import EventLoop
import TestSupport
@testable import Proxy
#if canImport(Glibc)
import Glibc
#endif

/// Bytes queued for a client go out in order, across short writes, from
/// memory, stored responses and files alike.
final class OutputQueueTests: XCTestCase {
    /// A non-blocking pipe of one page (`size`): writes come up short quickly.
    private func smallPipe(size: Int32 = 4096) throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        _ = fcntl(fds[1], 1031 /* F_SETPIPE_SZ */, size)
        _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        addTeardownBlock { close(fds[0]); close(fds[1]) }
        return (fds[0], fds[1])
    }

    private func drain(_ fd: Int32, into out: inout [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while poll(&ready, 1, 0) > 0 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return }
            out.append(contentsOf: buffer[0..<n])
        }
    }

    func testSegmentsGoOutInOrderAcrossShortWrites() throws {
        let (r, w) = try smallPipe()
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("larder-oq-\(UUID().uuidString)").path
        let fileBytes = (0..<20_000).map { UInt8($0 % 251) }
        try Data(fileBytes).write(to: URL(fileURLWithPath: path))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)

        var queue = OutputQueue()
        let head = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
        let big = [UInt8](repeating: 0x61, count: 10_000)
        queue.append(head)
        queue.append(Bytes(big), from: 100, to: 9_000)
        queue.append(file: OpenFile(try XCTUnwrap(StoredFile(opening: path))), from: 500, to: 20_000)
        queue.append([])  // nothing: no segment
        XCTAssertEqual(queue.pendingBytes, head.count + 8_900 + 19_500)

        var received: [UInt8] = []
        var rounds = 0
        while try !queue.flush(to: w) {
            drain(r, into: &received)
            rounds += 1
            XCTAssertLessThan(rounds, 1_000, "bounded")
            if rounds >= 1_000 { break }
        }
        drain(r, into: &received)
        XCTAssertGreaterThan(rounds, 1, "the pipe took it in several writes")
        XCTAssertTrue(queue.isEmpty)
        XCTAssertEqual(received, head + big[100..<9_000] + fileBytes[500..<20_000])
    }

    func testAClosedReaderIsAnError() {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        close(fds[0])
        defer { close(fds[1]) }
        let w = fds[1]
        signal(SIGPIPE, SIG_IGN)
        var queue = OutputQueue()
        queue.append(Array("data".utf8))
        XCTAssertThrowsError(try queue.flush(to: w))
        queue.removeAll()
        XCTAssertTrue(queue.isEmpty)
    }

    /// A file's bytes that are not in the page cache are not sent by the
    /// flush (sendfile would wait for the disk on the loop): it stops before
    /// them and names the window to load, an I/O thread's job; once loaded
    /// they go out, whole and in order.
    func testAFilesBytesNotInThePageCacheAreLoadedBeforeTheyAreSent() throws {
        let (r, w) = try smallPipe(size: 1 << 20)
        let path = FileManager.default.currentDirectoryPath + "/.build/larder-oq-\(UUID().uuidString)"
        let fileBytes = (0..<(3 << 20)).map { UInt8($0 % 251) }
        try Data(fileBytes).write(to: URL(fileURLWithPath: path))
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        guard PageCache.drop(path) else { throw XCTSkip("this file system keeps the file's pages in memory (tmpfs?)") }
        let file = try OpenFile(XCTUnwrap(StoredFile(opening: path)))
        XCTAssertGreaterThanOrEqual(file.fd, 0)
        var queue = OutputQueue()
        let head = Array("HTTP/1.1 200 OK\r\n\r\n".utf8)
        queue.append(head)
        queue.append(file: file, from: 0, to: fileBytes.count)

        var sent = 0
        guard case .waitsForDisk(let cold, let offset, let count) = try queue.flush(to: w, sent: &sent) else {
            return XCTFail("the cold file was sent from the flush")
        }
        XCTAssertTrue(cold === file)
        XCTAssertEqual(offset, 0)
        XCTAssertEqual(count, OutputQueue.cacheWindow)
        XCTAssertEqual(sent, head.count, "what was in memory went")
        XCTAssertEqual(FilePages.cached(file.fd, offset: offset, count: count), false)

        var received: [UInt8] = []
        var loads = 0, rounds = 0
        var flushed = OutputQueue.Flushed.waitsForDisk(cold, offset: offset, count: count)
        while rounds < 1_000 {
            rounds += 1
            switch flushed {
            case .done:
                rounds = 1_000
                continue
            case .waitsForDisk(let file, let offset, let count):
                loads += 1
                XCTAssertEqual(FilePages.load(file.fd, offset: offset, count: count), count)
                XCTAssertEqual(FilePages.cached(file.fd, offset: offset, count: count), true)
                file.cachedUntil = offset + count
            case .wouldBlock:
                break
            }
            drain(r, into: &received)
            flushed = try queue.flush(to: w, sent: &sent)
        }
        drain(r, into: &received)
        XCTAssertTrue(queue.isEmpty)
        XCTAssertGreaterThanOrEqual(loads, 1)
        XCTAssertEqual(sent, head.count + fileBytes.count)
        XCTAssertTrue(received == head + fileBytes, "every byte, in order")
    }
    /// A worker's hit holds its period's token, not its block; bytes of it
    /// that wait for a slow client hold the block itself, so the period
    /// ends with nothing held back and the bytes stay whole after the
    /// entry leaves the tier.
    func testStoredBytesThatWaitHoldTheirBlock() throws {
        let (r, w) = try smallPipe()
        let body = (0..<100_000).map { UInt8($0 % 253) }
        let head = Array("HTTP/1.1 200 OK\r\n".utf8)
        let tier = MemoryTier(limitBytes: 4 << 20)
        tier.insert(CachedResponse.make(key: "/big", status: 200, headPrefix: head, body: body,
                                        timing: ResponseTiming(requestTime: 0, responseTime: 0, dateValue: nil, ageValue: 0),
                                        lifetime: 60, cacheControl: CacheControl("max-age=60"), varyNames: [], varyValues: []))
        let local = LocalHits()
        var queue = OutputQueue()
        do {
            let hit = try XCTUnwrap(tier.lookup("/big", local: local).first)
            XCTAssertFalse(hit.isOwned, "a worker's hit borrows its block")
            queue.append(hit, from: 0, to: hit.headLength + hit.body.count)
        }
        XCTAssertFalse(try queue.flush(to: w), "the pipe takes a page")
        XCTAssertEqual(tier.remove("/big"), 1)
        local.endPeriod()
        XCTAssertEqual(Reclamation.pending.lingering, 0, "the waiting bytes hold their block, not the period's token")

        var received: [UInt8] = []
        var rounds = 0
        while try !queue.flush(to: w), rounds < 10_000 {
            drain(r, into: &received)
            rounds += 1
        }
        drain(r, into: &received)
        XCTAssertEqual(received.count, head.count + body.count)
        XCTAssertTrue(received == head + body, "the bytes as stored")
    }
}
