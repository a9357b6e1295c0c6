import CEventLoop
#if canImport(Glibc)
import Glibc
#endif

// Named threads and a condition variable on pthreads. The daemon uses these
// instead of Foundation's Thread and NSCondition so that it links only
// FoundationEssentials: full Foundation (CoreFoundation, ICU) added 50 MB,
// 37,000 relocations and 1,900 protocol conformances to scan at start-up
// (bench/RESULTS.md).

/// A thread that could not be started (pthread_create's error number).
public struct ThreadStartError: Error, CustomStringConvertible {
    public let code: Int32
    public var description: String { "cannot start a thread: \(String(cString: strerror(code)))" }
}

private final class ThreadBody {
    let name: String
    let run: () -> Void
    init(name: String, run: @escaping () -> Void) { (self.name, self.run) = (name, run) }
}

/// Runs `body` on a new detached thread named `name` (what `top -H` and
/// `/proc/PID/task/*/comm` show; Linux keeps the first 15 bytes).
public func startThread(name: String, _ body: @escaping () -> Void) throws(ThreadStartError) {
    let context = Unmanaged.passRetained(ThreadBody(name: name, run: body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { context in
        let body = Unmanaged<ThreadBody>.fromOpaque(context!).takeRetainedValue()
        el_name_thread(body.name)
        body.run()
        return nil
    }, context)
    if rc != 0 {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        throw ThreadStartError(code: rc)
    }
}

/// Lowers the calling thread's scheduling (on Linux per thread) for
/// background work: SCHED_IDLE (it runs only when no other thread wants
/// the CPU), or, with `idle` false or where that is refused, the usual
/// policy at nice 10 (a share that never starves).
public func lowerThreadPriority(idle: Bool) {
    var parameters = sched_param(sched_priority: 0)
    // 5: SCHED_IDLE, 0: SCHED_OTHER (Glibc hides the names without _GNU_SOURCE).
    if sched_setscheduler(0, idle ? 5 : 0, &parameters) != 0 || !idle {
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
    }
}

/// A mutex with a condition variable, as NSCondition: `lock`, then `wait`
/// in a loop over the state it guards, `broadcast` after changing it.
/// Timed waits use the monotonic clock, so a clock step does not cut or
/// stretch them.
public final class Condition: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }
    public func broadcast() { pthread_cond_broadcast(condition) }
    /// Wakes one waiter (where any one of them can take the change).
    public func signal() { pthread_cond_signal(condition) }
    /// Releases the lock until woken (possibly spuriously), then takes it again.
    public func wait() { pthread_cond_wait(condition, mutex) }

    /// A monotonic instant `milliseconds` from now, for `wait(until:)`.
    public static func deadline(afterMilliseconds milliseconds: UInt64) -> timespec {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let nanoseconds = UInt64(now.tv_nsec) + (milliseconds % 1000) * 1_000_000
        return timespec(tv_sec: now.tv_sec + Int(milliseconds / 1000) + Int(nanoseconds / 1_000_000_000),
                        tv_nsec: Int(nanoseconds % 1_000_000_000))
    }

    /// As `wait()`, but gives up at `deadline`: false when it passed.
    public func wait(until deadline: timespec) -> Bool {
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }
}
