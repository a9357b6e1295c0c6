#if canImport(Glibc)
import Glibc
#endif

/// A value behind a pthread mutex, for state shared between threads (the
/// tiers, the collapser). Used instead of the standard library's
/// `Synchronization.Mutex`, whose futex-based locking ThreadSanitizer cannot
/// see on Linux (every guarded access is then reported as a race), so that
/// sanitizer runs show real races only. Uncontended, both cost about the
/// same: one atomic exchange each way.
public final class Locked<Value: ~Copyable>: @unchecked Sendable {
    private var value: Value
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    public init(_ value: consuming Value) {
        self.value = value
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Reads the value without the mutex: only where something else keeps
    /// writers out (`ShardReaders`).
    @inline(__always)
    public func withoutLock<Result>(_ body: (borrowing Value) -> Result) -> Result { body(value) }

    #if LOCK_STATS
    /// The same, timed per call site (`bench/locks.sh`).
    @inline(__always)
    public func withLock<Result: ~Copyable, E: Error>(_ body: (inout Value) throws(E) -> Result,
                                                     file: StaticString = #fileID, line: UInt = #line) throws(E) -> Result {
        let asked = LockStats.now()
        let contended = pthread_mutex_trylock(mutex) != 0
        if contended { pthread_mutex_lock(mutex) }
        let taken = LockStats.now()
        defer {
            let held = LockStats.now() - taken
            pthread_mutex_unlock(mutex)
            LockStats.record(file, line, contended: contended, waitNanos: taken - asked, holdNanos: held)
        }
        return try body(&value)
    }
    #else
    @inline(__always)
    public func withLock<Result: ~Copyable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
    #endif
}
