import EventLoop
import Threads

/// A small pool of threads for work that may wait for the disk, so that a
/// worker's loop never does (what nginx's `aio threads` are for): a disk
/// lookup whose file is not in the page cache, a large file's head, a
/// directory listed during the start-up rebuild. Each job runs on one of
/// the pool's threads; its result is handed back to the loop that asked
/// (`EventLoop.execute`). One pool per process; `serve` starts its threads
/// before libcurl loads (`startAll`: a thread started later waits for the
/// loader's lock that dlopen holds, and the first disk hit after a start
/// waited 3 ms for it); they wait on a condition while there is no job.
public final class BlockingWork: @unchecked Sendable {
    private let condition = Condition()
    private var jobs: [() -> Void] = []
    private var started = 0
    /// Threads running a job now.
    private var busy = 0
    /// The most threads it starts (`io_threads` for the process's pool).
    let threads: Int

    public static let defaultThreads = 4
    /// How many threads the process's pool starts at most (`io_threads`):
    /// set once, before the first job.
    nonisolated(unsafe) private static var sharedThreads = defaultThreads
    public static func setSharedThreads(_ count: Int) { sharedThreads = count }

    /// The process's pool.
    static let shared = BlockingWork(threads: sharedThreads)

    init(threads: Int) {
        self.threads = max(1, threads)
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
    var pending: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count + busy
    }

    /// Runs `work` on a pool thread, then `done` with its result on `loop`.
    func run<Result>(_ work: @escaping () -> Result, on loop: EventLoop, then done: @escaping (Result) -> Void) {
        let job = {
            let result = work()
            loop.execute { done(result) }
        }
        condition.lock()
        jobs.append(job)
        let startOne = started < min(threads, jobs.count + busy)
        if startOne { started += 1 }
        condition.signal()  // one job: one thread woken, not the pool
        condition.unlock()
        if startOne { startWorker() }
    }

    private func startWorker() {
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
            // No thread: the job runs here rather than never (the loop waits, as before the pool).
            condition.lock()
            started -= 1
            let job = jobs.isEmpty ? nil : jobs.removeFirst()
            condition.unlock()
            job?()
        }
    }
}
