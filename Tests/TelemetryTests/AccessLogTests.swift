import Foundation
import XCTest
@testable import Telemetry

/// The access log's own thread writes the workers' batches: whole, in the
/// order each worker gave them, and a writer that stalls (a full pipe, a
/// slow disk) never holds the threads that hand lines in.
final class AccessLogTests: XCTestCase {
    func testBatchesFromManyThreadsAreWrittenWholeOnceAskedToFinish() throws {
        let path = NSTemporaryDirectory() + "larder-access-\(UUID().uuidString).log"
        defer { unlink(path) }
        let log = try AccessLog(destination: path)
        let threads = 4, batches = 200
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for n in 0..<batches {
                let batch = Array("thread \(thread) line \(n)\n".utf8)
                batch.withUnsafeBufferPointer { log.write($0) }
            }
        }
        XCTAssertTrue(log.waitUntilWritten(milliseconds: 10_000))
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, threads * batches)
        for thread in 0..<threads {
            let own = lines.filter { $0.hasPrefix("thread \(thread) ") }
            XCTAssertEqual(own, (0..<batches).map { "thread \(thread) line \($0)"[...] }, "in order, none torn")
        }
        XCTAssertEqual(log.droppedBytes, 0)
    }

    func testAStalledWriterDropsWhatIsPastTheBoundAndHoldsNoOne() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        // Nobody reads the pipe yet: the writer thread blocks once its 64 KiB are full.
        let log = try AccessLog(destination: "/proc/self/fd/\(fds[1])")
        let batch = [UInt8](repeating: UInt8(ascii: "x"), count: 32 * 1024 - 1) + [UInt8(ascii: "\n")]
        let handed = AccessLog.queueLimit / batch.count * 2
        for _ in 0..<handed { batch.withUnsafeBufferPointer { log.write($0) } }
        XCTAssertGreaterThan(log.droppedBytes, 0, "what is past the bound is dropped, not waited for")
        XCTAssertLessThanOrEqual(log.droppedBytes, handed * batch.count - AccessLog.queueLimit)
        // The reader comes back: everything not dropped arrives.
        let state = NSLock()
        var read = 0, stop = false
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            var poller = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            while !state.withLock({ stop }) {
                guard poll(&poller, 1, 50) > 0 else { continue }
                let n = buffer.withUnsafeMutableBytes { Foundation.read(fds[0], $0.baseAddress, $0.count) }
                if n <= 0 { return }
                state.withLock { read += n }
            }
        }
        reader.start()
        defer { state.withLock { stop = true } }
        XCTAssertTrue(log.waitUntilWritten(milliseconds: 20_000))
        let expected = handed * batch.count - log.droppedBytes
        let deadline = Date().addingTimeInterval(10)
        while state.withLock({ read }) < expected && Date() < deadline { usleep(1_000) }
        XCTAssertEqual(state.withLock { read }, expected)
        XCTAssertEqual(log.droppedBytes % batch.count, 0, "whole batches dropped")
    }
}
