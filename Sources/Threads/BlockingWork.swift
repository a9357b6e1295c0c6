import EventLoop

/// A small pool of threads for work that may wait for the disk, so that a
/// worker's loop never does (what nginx's `aio threads` are for): a disk
/// lookup whose file is not in the page cache, a large file's head, a
/// directory listed during the start-up rebuild. Each job runs on one of
/// the pool's threads; its result is handed back to the loop that asked
/// (`EventLoop.execute`). One pool per process; `serve` starts its threads
/// before libcurl loads (`startAll`: a thread started later waits for the
/// loader's lock that dlopen holds, and the first disk hit after a start
/// waited 3 ms for it); they wait on a condition while there is no job.
///
/// The queue is bounded (`maxQueued`): a job asked for when it is full, or
/// when no thread could start, is asked again on its loop a moment later
/// (`retryMilliseconds`), never run on the loop itself. What waits so is
/// bounded by the requests in flight, and the disk sets the pace.
public final class BlockingWork: @unchecked Sendable {
    private let condition = Condition()
    private var jobs: [() -> Void] = []
    private var started = 0
    /// Threads running a job now.
    private var busy = 0
    /// The most threads it starts (`io_threads` for the process's pool).
    public let threads: Int
    /// The most jobs that wait for a thread.
    public let maxQueued: Int
    /// Jobs asked again later because the queue was full or no thread ran.
    private var deferredCount = 0
    public static let retryMilliseconds: UInt64 = 5

    public static let defaultThreads = 4
    /// How many threads the process's pool starts at most (`io_threads`):
    /// set once, before the first job.
    nonisolated(unsafe) private static var sharedThreads = defaultThreads
    public static func setSharedThreads(_ count: Int) { sharedThreads = count }

    /// The process's pool.
    public static let shared = BlockingWork(threads: sharedThreads)

    /// `maxQueued`: 64 jobs a thread unless given.
    public init(threads: Int, maxQueued: Int? = nil) {
        self.threads = max(1, threads)
        self.maxQueued = max(1, maxQueued ?? 64 * self.threads)
    }

    /// Starts every thread now (they wait for jobs).
    public static func startAll() {
        let pool = shared
        pool.condition.lock()
        let missing = pool.threads - pool.started
        pool.started = pool.threads
        pool.condition.unlock()
        for _ in 0..<max(0, missing) { pool.startWorker() }
    }

    /// Jobs waiting for a thread or running (a disk slower than the
    /// requests for it shows here first).
    public var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count + busy
    }

    /// Jobs asked again later so far (a full queue, or no thread).
    public var deferred: Int {
        condition.lock()
        defer { condition.unlock() }
        return deferredCount
    }

    /// Runs `work` on a pool thread, then `done` with its result on `loop`
    /// (call on `loop`'s thread). With the queue full, or no thread running
    /// and none able to start, it is asked again on `loop` shortly.
    public func run<Result>(_ work: @escaping () -> Result, on loop: EventLoop, then done: @escaping (Result) -> Void) {
        condition.lock()
        guard jobs.count < maxQueued, started > 0 || startedOneNow() else {
            deferredCount += 1
            condition.unlock()
            _ = loop.schedule(after: Self.retryMilliseconds) { [self] in run(work, on: loop, then: done) }
            return
        }
        jobs.append {
            let result = work()
            loop.execute { done(result) }
        }
        let startOne = started < min(threads, jobs.count + busy)
        if startOne { started += 1 }
        condition.signal()  // one job: one thread woken, not the pool
        condition.unlock()
        if startOne { startWorker() }
    }

    /// With no thread running (none ever started, or none could): tries to
    /// start one now. Called with the lock held.
    private func startedOneNow() -> Bool {
        started += 1
        condition.unlock()
        let ran = startWorker()
        condition.lock()
        return ran
    }

    @discardableResult
    private func startWorker() -> Bool {
        do {
            try startThread(name: "larder-io") { [self] in
                while true {
                    condition.lock()
                    while jobs.isEmpty { condition.wait() }
                    let job = jobs.removeFirst()
                    busy += 1
                    condition.unlock()
                    job()
                    condition.lock()
                    busy -= 1
                    condition.unlock()
                }
            }
        } catch {
            // No thread: the jobs wait for another (each run starts one when
            // none runs); with none at all, new jobs are asked again later.
            condition.lock()
            started -= 1
            condition.unlock()
            return false
        }
        return true
    }
}
