import XCTest
import Foundation
@testable import EventLoop
#if canImport(Glibc)
import Glibc
#endif

final class EventLoopTests: XCTestCase {
    func testTimersFireInDeadlineOrderAndCancelWorks() throws {
        let loop = try EventLoop()
        var fired: [Int] = []
        loop.schedule(after: 30) { fired.append(3); loop.stop() }
        loop.schedule(after: 10) { fired.append(1) }
        let cancelled = loop.schedule(after: 5) { fired.append(99) }
        loop.schedule(after: 20) { fired.append(2) }
        loop.cancel(cancelled)
        let deadline = EventLoop.nowMilliseconds() + 5000
        while fired.count < 3 && EventLoop.nowMilliseconds() < deadline { loop.runOnce(maxWaitMilliseconds: 100) }
        XCTAssertEqual(fired, [1, 2, 3])
    }

    /// A loop's clock is its own to move: a timer a minute away fires at
    /// the next turn once the loop's clock is moved a minute on, with no
    /// wait; another loop's timers keep the process's time.
    func testALoopsClockMovedOnFiresItsTimersWithoutWaiting() throws {
        let loop = try EventLoop(), other = try EventLoop()
        var fired: [String] = []
        loop.schedule(after: 60_000) { fired.append("minute") }
        loop.schedule(after: 120_000) { fired.append("two minutes") }
        other.schedule(after: 60_000) { fired.append("other loop") }
        let before = loop.now()
        loop.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(fired, [], "not yet")
        loop.advanceClock(milliseconds: 60_000)
        XCTAssertGreaterThanOrEqual(loop.now(), before + 60_000)
        XCTAssertLessThan(other.now(), before + 60_000, "the other loop's clock did not move")
        loop.runOnce(maxWaitMilliseconds: 0)
        other.runOnce(maxWaitMilliseconds: 0)
        XCTAssertEqual(fired, ["minute"])
    }

    func testExecuteFromAnotherThreadWakesTheLoop() throws {
        let loop = try EventLoop()
        final class Flag: @unchecked Sendable { var ran = false }  // set and read on the loop's thread
        let flag = Flag()
        let thread = Thread { loop.execute { flag.ran = true } }
        thread.start()
        let deadline = EventLoop.nowMilliseconds() + 5000
        while !flag.ran && EventLoop.nowMilliseconds() < deadline { loop.runOnce(maxWaitMilliseconds: 100) }
        XCTAssertTrue(flag.ran)
    }

    final class Reader: IOHandler {
        var seen: IOEvents = []
        func ready(_ events: IOEvents) { seen.formUnion(events) }
    }

    func testReadinessAndUnwatchDropsEvents() throws {
        let loop = try EventLoop()
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let reader = Reader()
        try loop.watch(fds[0], .read, reader)
        XCTAssertEqual(write(fds[1], "x", 1), 1)
        let deadline = EventLoop.nowMilliseconds() + 5000
        while !reader.seen.contains(.read) && EventLoop.nowMilliseconds() < deadline { loop.runOnce(maxWaitMilliseconds: 100) }
        XCTAssertTrue(reader.seen.contains(.read))

        loop.unwatch(fds[0])
        reader.seen = []
        loop.runOnce(maxWaitMilliseconds: 20)
        XCTAssertEqual(reader.seen, [])
    }

    func testSlotTableTokensStopWorkingOnceRemovedEvenWhenTheSlotIsReused() {
        var table = SlotTable<String>()
        let a = table.insert("a"), b = table.insert("b")
        XCTAssertNotEqual(a, 0)
        XCTAssertEqual(table[a], "a")
        XCTAssertEqual(table[b], "b")
        XCTAssertEqual(table.remove(a), "a")
        XCTAssertNil(table[a])
        XCTAssertNil(table.remove(a))
        let c = table.insert("c")  // reuses a's slot
        XCTAssertNotEqual(c, a)
        XCTAssertEqual(c & 0xFFFF_FFFF, a & 0xFFFF_FFFF)
        XCTAssertNil(table[a], "a stale token does not reach the slot's new value")
        XCTAssertFalse(table.replace(a, with: "x"))
        XCTAssertTrue(table.replace(c, with: "c2"))
        XCTAssertEqual(table[c], "c2")
        XCTAssertNil(table[0])
        XCTAssertNil(table[UInt64.max])
        XCTAssertEqual(table.count, 2)
        // Many reuses of one slot: every token differs, none is 0.
        var seen: Set<UInt64> = [b, c]
        table.remove(c)
        for _ in 0..<1000 {
            let t = table.insert("t")
            XCTAssertNotEqual(t, 0)
            XCTAssertTrue(seen.insert(t).inserted)
            table.remove(t)
        }
    }

    /// An fd unwatched and watched again with another handler (as when its
    /// number is reused): events reach the new handler only.
    func testAReusedFdNumberGetsANewRegistration() throws {
        let loop = try EventLoop()
        final class Handler: IOHandler {
            var calls = 0
            func ready(_ events: IOEvents) { calls += 1 }
        }
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let first = Handler(), second = Handler()
        try loop.watch(fds[0], .read, first)
        loop.unwatch(fds[0])
        try loop.watch(fds[0], .read, second)
        XCTAssertEqual(write(fds[1], "x", 1), 1)
        loop.runOnce(maxWaitMilliseconds: 1000)
        XCTAssertEqual(first.calls, 0)
        XCTAssertEqual(second.calls, 1)
        loop.unwatch(fds[0])
    }

    func testListenOnPortZeroReportsThePort() throws {
        let first = try Socket.listen(host: "127.0.0.1", port: 0, reusePort: true)
        defer { Socket.close(first.fd) }
        XCTAssertGreaterThan(first.port, 0)
        let second = try Socket.listen(host: "127.0.0.1", port: first.port, reusePort: true)
        defer { Socket.close(second.fd) }
        XCTAssertEqual(second.port, first.port)
        XCTAssertThrowsError(try Socket.listen(host: "256.0.0.1", port: 0, reusePort: false))
    }

    /// A worker's loop marks its thread while it handles events (what
    /// `assertOffLoop` checks); other loops, and the thread between
    /// batches, are not marked.
    func testAWorkerLoopMarksItsThreadWhileItHandlesEvents() throws {
        let worker = try EventLoop(), other = try EventLoop()
        worker.isWorkerLoop = true
        var seen: [Bool] = []
        worker.execute { seen.append(EventLoop.isOnLoop) }
        other.execute { seen.append(EventLoop.isOnLoop) }
        let deadline = Date().addingTimeInterval(10)
        while seen.count < 1 && Date() < deadline { worker.runOnce(maxWaitMilliseconds: 20) }
        XCTAssertFalse(EventLoop.isOnLoop, "not between batches")
        while seen.count < 2 && Date() < deadline { other.runOnce(maxWaitMilliseconds: 20) }
        XCTAssertEqual(seen, [true, false])
        XCTAssertFalse(EventLoop.isOnLoop)
    }
}
