import Foundation
import Threads
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Collapsed waiters released by a failed leader fetch together, not one
/// after another.
final class CollapsedReleaseTests: ConfiguredTestCase {
    func testWaitersOfAFailedLargeFetchGoUpstreamTogether() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("larder-wait-\(UUID().uuidString)").path
        addTeardownBlock { try? FileManager.default.removeItem(atPath: directory) }
        let (origin, larder) = try start(config: "cache_dir = \"\(directory)\"\nmax_object_size = \"1MiB\"\n")
        // Larger than max_object_size (to disk, not shared), and it breaks off.
        let target = "/large-fail?size=3000000&delay=1.5&cut=1000"
        let clients = try (0..<6).map { _ in try larder.client() }
        for c in clients { try c.send("GET \(target) HTTP/1.1\r\nHost: a\r\n\r\n") }
        for c in clients { _ = try? c.readResponse() }  // each is cut short: the origin's fault
        XCTAssertEqual(try origin.count(target), 6, "the leader, then each waiter on its own")
        let peak = try origin.lastRequest(target)["max_concurrent"] as? Int ?? 0
        XCTAssertGreaterThanOrEqual(peak, 5, "the five waiters were at the origin at once")
    }
}

/// Error answers reach a client that is still sending (lingering close):
/// closing with unread bytes made the kernel reset the connection.
final class LingeringCloseTests: ProxyTestCase {
    func testA431ReachesAClientStillSendingItsHeaders() throws {
        let c = try larder.client()
        let done = DispatchSemaphore(value: 0)
        let sent = Locked(0)
        // 2 MiB of header section (more than one read takes), far over max_header_size: the answer comes
        // while the client is still sending; it reads only once it is done.
        let piece = Array(("X-Filler: " + String(repeating: "a", count: 1000) + "\r\n").utf8)
        Thread {
            try? c.send(Array("GET /flood HTTP/1.1\r\nHost: a\r\n".utf8))
            for _ in 0..<2048 {
                if (try? c.send(piece)) == nil { break }
                sent.withLock { $0 += 1 }
            }
            done.signal()
        }.start()
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(sent.withLock { $0 }, 2048, "Larder read and discarded what followed its answer")
        XCTAssertEqual(try c.readResponse().status, 431)
    }

    func testA400ForABadBodyIsReadableBeforeTheClose() throws {
        let c = try larder.client()
        // A broken chunk size, then more bytes the client keeps sending.
        try c.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + String(repeating: "b", count: 200_000))
        XCTAssertEqual(try c.readResponse().status, 400)
        XCTAssertTrue(c.isClosedByPeer(), "a clean close (EOF), not a reset")
    }
}
