import Foundation
import XCTest
import EventLoop
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
                batch.withUnsafeBufferPointer { log.write($0, times: [Int64(n)], ends: [batch.count]) }
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
        for _ in 0..<handed { batch.withUnsafeBufferPointer { log.write($0, times: [0], ends: [batch.count]) } }
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

    /// With several workers, lines are written in time order however their
    /// batches came: a worker's batch may hold a line a second older than
    /// another's already handed in.
    func testLinesOfSeveralWorkersAreWrittenInTimeOrder() throws {
        let path = NSTemporaryDirectory() + "larder-access-\(UUID().uuidString).log"
        defer { unlink(path) }
        let log = try AccessLog(destination: path, workers: 2)
        func hand(_ lines: [(Int64, String)]) {
            var bytes: [UInt8] = [], ends: [Int] = []
            for (_, text) in lines {
                bytes += Array((text + "\n").utf8)
                ends.append(bytes.count)
            }
            bytes.withUnsafeBufferPointer { log.write($0, times: lines.map(\.0), ends: ends) }
        }
        let now = EventLoop.wallMilliseconds()
        hand([(now + 10, "b 10"), (now + 30, "b 30")])
        hand([(now, "a 0"), (now + 20, "a 20"), (now + 30, "a 30")])
        XCTAssertTrue(log.waitUntilWritten(milliseconds: 10_000))
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(lines, ["a 0", "b 10", "a 20", "b 30", "a 30"], "by time; equal times in the order handed in")
    }

    func testTheMergeHoldsLinesUntilTheirTimeIsPastTheCutoff() {
        var merge = LineMerge()
        var first = LineMerge.Batch(), second = LineMerge.Batch()
        first.append(Array("x1\n".utf8)[...], time: 100)
        first.append(Array("x3\n".utf8)[...], time: 300)
        second.append(Array("y2\n".utf8)[...], time: 200)
        merge.add(first)
        merge.add(second)
        XCTAssertEqual(merge.earliest, 100)
        XCTAssertEqual(String(decoding: merge.take(upTo: 250), as: UTF8.self), "x1\ny2\n")
        XCTAssertEqual(merge.earliest, 300, "the later line is held")
        XCTAssertEqual(merge.take(upTo: 250), [])
        XCTAssertEqual(String(decoding: merge.take(upTo: .max), as: UTF8.self), "x3\n")
        XCTAssertTrue(merge.isEmpty)
    }
}
