#if LOCK_STATS
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// How long each `Locked` is held and waited for, per call site: for
/// `bench/locks.sh`, on a build made with `-Xswiftc -DLOCK_STATS` (a normal
/// build has none of this). Each thread counts in a table of its own (no
/// shared counter to distort what is measured); the tables are summed and
/// written when the process exits, to the file named by `LARDER_LOCK_STATS`
/// (else standard error). A hold time includes one `clock_gettime` (about
/// 20 ns): compare sites, not the last nanoseconds.
public enum LockStats {
    struct Site: Hashable {
        let file: UInt
        let line: UInt
    }

    struct Counts {
        var acquired = 0
        var contended = 0
        var waitNanos = 0
        var holdNanos = 0
        var maxHoldNanos = 0
    }

    /// One thread's counts. Its own mutex (never contended but at exit,
    /// when the report reads every table while a background thread may
    /// still be counting) is taken outside the timed section.
    final class Table {
        var counts: [Site: Counts] = [:]
        var names: [Site: String] = [:]
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        init() { pthread_mutex_init(mutex, nil) }
    }

    @inline(__always)
    static func now() -> Int {
        var t = timespec()
        clock_gettime(CLOCK_MONOTONIC, &t)
        return t.tv_sec * 1_000_000_000 + t.tv_nsec
    }

    /// Every thread's table (appended once per thread, read at exit).
    nonisolated(unsafe) private static var tables: [Table] = []
    nonisolated(unsafe) private static var tablesLock = pthread_mutex_t()

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        atexit { LockStats.write() }
        return key
    }()

    private static func table() -> Table {
        if let raw = pthread_getspecific(key) { return Unmanaged<Table>.fromOpaque(raw).takeUnretainedValue() }
        let table = Table()
        pthread_setspecific(key, Unmanaged.passRetained(table).toOpaque())
        pthread_mutex_lock(&tablesLock)
        tables.append(table)
        pthread_mutex_unlock(&tablesLock)
        return table
    }

    @inline(never)
    static func record(_ file: StaticString, _ line: UInt, contended: Bool, waitNanos: Int, holdNanos: Int) {
        let site = Site(file: UInt(bitPattern: file.utf8Start), line: line)
        let table = table()
        pthread_mutex_lock(table.mutex)
        defer { pthread_mutex_unlock(table.mutex) }
        if table.names[site] == nil { table.names[site] = "\(file):\(line)" }
        table.counts[site, default: Counts()].acquired += 1
        if contended { table.counts[site]!.contended += 1 }
        table.counts[site]!.waitNanos += waitNanos
        table.counts[site]!.holdNanos += holdNanos
        table.counts[site]!.maxHoldNanos = max(table.counts[site]!.maxHoldNanos, holdNanos)
    }

    /// One line per call site, busiest first: site, acquisitions, contended
    /// ones, total wait and hold in nanoseconds, longest hold.
    static func report() -> String {
        pthread_mutex_lock(&tablesLock)
        defer { pthread_mutex_unlock(&tablesLock) }
        var sum: [String: Counts] = [:]
        for table in tables {
            pthread_mutex_lock(table.mutex)
            defer { pthread_mutex_unlock(table.mutex) }
            for (site, c) in table.counts {
                var s = sum[table.names[site]!, default: Counts()]
                s.acquired += c.acquired
                s.contended += c.contended
                s.waitNanos += c.waitNanos
                s.holdNanos += c.holdNanos
                s.maxHoldNanos = max(s.maxHoldNanos, c.maxHoldNanos)
                sum[table.names[site]!] = s
            }
        }
        var lines = ["site acquired contended wait_ns hold_ns max_hold_ns"]
        for (name, c) in sum.sorted(by: { $0.value.acquired > $1.value.acquired }) {
            lines.append("\(name) \(c.acquired) \(c.contended) \(c.waitNanos) \(c.holdNanos) \(c.maxHoldNanos)")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func write() {
        let text = report()
        if let path = getenv("LARDER_LOCK_STATS"), let file = fopen(path, "w") {
            fputs(text, file)
            fclose(file)
        } else {
            fputs(text, stderr)
        }
    }
}
#endif
