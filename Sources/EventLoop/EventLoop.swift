import CEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// Readiness reported for a file descriptor.
public struct IOEvents: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let read = IOEvents(rawValue: UInt32(EL_READ))
    public static let write = IOEvents(rawValue: UInt32(EL_WRITE))
    public static let error = IOEvents(rawValue: UInt32(EL_ERROR))
    public static let hangup = IOEvents(rawValue: UInt32(EL_HUP))
}

/// Something that owns a file descriptor registered with a loop.
public protocol IOHandler: AnyObject {
    func ready(_ events: IOEvents)
}

/// Work put off until the loop has dispatched its current batch of events
/// (for example, writing everything a connection queued during the batch
/// with one system call).
public protocol BatchEndHandler: AnyObject {
    func batchEnded()
}

/// A one-shot timer's handle; cancel it with `EventLoop.cancel(_:)`.
public struct TimerID: Hashable, Sendable {
    fileprivate let raw: UInt64
    fileprivate let token: UInt64
    public static let none = TimerID(raw: 0, token: 0)
}

/// The Swift face of the C loop. One per worker thread; every method except
/// `execute` and `wake` must be called on the loop's own thread.
public final class EventLoop {
    private let raw: OpaquePointer
    private var ioHandlers = SlotTable<IOHandler>()
    /// The token of each watched fd, indexed by fd (0: not watched).
    private var fdTokens: [UInt64] = []
    /// A closure wrapped in a struct: stored in a generic container as is,
    /// where a bare function value would be re-abstracted (a thunk, thus an
    /// allocation, for every timer).
    private struct Action {
        let run: () -> Void
    }
    private var timers = SlotTable<Action>()
    private var running = false
    private var events: UnsafeMutablePointer<el_event>
    private let eventsCapacity = 512

    private let queueLock = Lock()
    private var queued: [() -> Void] = []

    public init() throws(SystemError) {
        var err: Int32 = 0
        guard let loop = el_create(&err) else { throw SystemError(errno: err, operation: "epoll_create") }
        raw = loop
        events = .allocate(capacity: eventsCapacity)
    }

    deinit {
        events.deallocate()
        el_destroy(raw)
    }

    /// Registers `fd` (or changes its interest) with `handler`.
    public func watch(_ fd: Int32, _ interest: IOEvents, _ handler: IOHandler) throws(SystemError) {
        guard fd >= 0 else { throw SystemError(errno: EBADF, operation: "epoll_ctl(\(fd))") }
        if Int(fd) >= fdTokens.count { fdTokens.append(contentsOf: repeatElement(0, count: Int(fd) + 1 - fdTokens.count)) }
        let token: UInt64
        if fdTokens[Int(fd)] != 0 && ioHandlers.replace(fdTokens[Int(fd)], with: handler) {
            token = fdTokens[Int(fd)]
        } else {
            token = ioHandlers.insert(handler)
            fdTokens[Int(fd)] = token
        }
        _ = try check(Int(el_watch(raw, fd, interest.rawValue, token)), "epoll_ctl(\(fd))")
    }

    /// Changes the interest set of an fd that is already watched.
    public func setInterest(_ fd: Int32, _ interest: IOEvents) {
        guard fd >= 0, Int(fd) < fdTokens.count, fdTokens[Int(fd)] != 0 else { return }
        _ = el_watch(raw, fd, interest.rawValue, fdTokens[Int(fd)])
    }

    /// Stops watching `fd`; pending events for it in this batch are dropped.
    public func unwatch(_ fd: Int32) {
        guard fd >= 0, Int(fd) < fdTokens.count, fdTokens[Int(fd)] != 0 else { return }
        ioHandlers.remove(fdTokens[Int(fd)])
        fdTokens[Int(fd)] = 0
        _ = el_unwatch(raw, fd)
    }

    /// Runs `action` once after `milliseconds` on the monotonic clock.
    @discardableResult
    public func schedule(after milliseconds: UInt64, _ action: @escaping () -> Void) -> TimerID {
        let token = timers.insert(Action(run: action))
        let id = el_timer_start(raw, milliseconds, token)
        guard id != 0 else {  // out of memory: the timer is lost, as malloc failure elsewhere
            timers.remove(token)
            return .none
        }
        return TimerID(raw: id, token: token)
    }

    public func cancel(_ timer: TimerID) {
        guard timer.raw != 0 else { return }
        el_timer_cancel(raw, timer.raw)
        timers.remove(timer.token)
    }

    /// Queues `work` to run on the loop's thread. Safe from any thread.
    public func execute(_ work: @escaping () -> Void) {
        queueLock.withLock { queued.append(work) }
        _ = el_wake(raw)
    }

    private var batchEnd: [BatchEndHandler] = []
    private var batchEndSpare: [BatchEndHandler] = []

    /// Calls `handler.batchEnded()` once the current batch of events has
    /// been dispatched (before the loop waits again). Loop thread only.
    public func atBatchEnd(_ handler: BatchEndHandler) {
        batchEnd.append(handler)
    }

    /// Runs until `stop()` is called.
    public func run() {
        running = true
        while running {
            runOnce(maxWaitMilliseconds: -1)
        }
    }

    /// Waits for and dispatches one batch of events.
    public func runOnce(maxWaitMilliseconds: Int32) {
        let n = el_poll(raw, events, Int32(eventsCapacity), maxWaitMilliseconds)
        if n < 0 { return }
        // A worker's handlers run "on a loop": blocking work asserts it is not.
        let marks = isWorkerLoop, outer = marks ? el_on_loop() : 0
        if marks { el_set_on_loop(1) }
        defer { if marks { el_set_on_loop(outer) } }
        for i in 0..<Int(n) {
            let event = events[i]
            switch event.kind {
            case UInt32(EL_KIND_FD):
                // A handler removed earlier in this batch has no entry: stale event.
                ioHandlers[event.token]?.ready(IOEvents(rawValue: event.events))
            case UInt32(EL_KIND_TIMER):
                timers.remove(event.token)?.run()
            default:
                drainQueue()
            }
        }
        // Handlers may defer more work; run until none is left, so nothing
        // waits for the next event.
        while !batchEnd.isEmpty {
            swap(&batchEnd, &batchEndSpare)
            for handler in batchEndSpare { handler.batchEnded() }
            batchEndSpare.removeAll(keepingCapacity: true)
        }
        if n > 0, let turnEnded { turnEnded(el_now_us() &- el_wake_us(raw)) }
    }

    /// Told how long each turn that handled something took (microseconds,
    /// from the poll's return to the end of the work its events deferred).
    public var turnEnded: ((UInt64) -> Void)?

    public func stop() { running = false }

    /// A worker's loop, which serves requests: nothing it runs may block
    /// (`assertOffLoop`). The admin API's and the fleet feed's loops may.
    public var isWorkerLoop = false

    /// Whether this thread is handling a worker loop's events now.
    public static var isOnLoop: Bool { el_on_loop() != 0 }

    /// Debug builds trap when work that may block (a disk read or write,
    /// a compression of a whole body, a DNS lookup) runs on a loop: the
    /// whole test suite runs with this on. Release builds check nothing.
    @inline(__always)
    public static func assertOffLoop(_ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        assert(el_on_loop() == 0, "\(what()) on an event loop's thread", file: file, line: line)
    }

    private func drainQueue() {
        let work = queueLock.withLock { () -> [() -> Void] in
            let w = queued
            queued.removeAll()
            return w
        }
        for item in work { item() }
    }

    /// Monotonic milliseconds (the process's clock: what has no loop reads).
    public static func nowMilliseconds() -> UInt64 { el_now_ms() }

    /// This loop's monotonic milliseconds, under its timers and the
    /// deadlines of what runs on it: the process's clock, or, in a test,
    /// one moved on by hand (`advanceClock`), so that a timeout passes
    /// without being waited for. Each part is given its loop, and so its clock.
    @inline(__always)
    public func now() -> UInt64 { el_loop_now_ms(raw) }

    /// Moves this loop's clock on (tests; on the loop's thread): timers
    /// then due fire at its next turn.
    public func advanceClock(milliseconds: Int64) {
        precondition(milliseconds >= 0, "clocks only move on")
        el_loop_clock_advance(raw, milliseconds)
    }
    /// Monotonic microseconds.
    public static func nowMicroseconds() -> UInt64 { el_now_us() }
    /// When this loop's last poll returned (monotonic microseconds): when
    /// what it is handling now arrived, without a clock read of its own.
    public var wakeMicroseconds: UInt64 { el_wake_us(raw) }
    /// Wall-clock seconds since the epoch.
    public static func wallSeconds() -> Int64 { el_wall_seconds() }
    /// Wall-clock milliseconds since the epoch.
    public static func wallMilliseconds() -> Int64 { el_wall_ms() }
}

/// A pthread mutex; small enough that the whole process can use one type.
public final class Lock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    public init() { pthread_mutex_init(mutex, nil) }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    @inline(__always)
    public func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
