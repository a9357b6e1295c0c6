import EventLoop
import HTTP1
import Synchronization
import Threads
#if canImport(Glibc)
import Glibc
#endif

/// Where access log lines go: stdout, stderr or a file opened for
/// appending. Shared by the workers: each hands it batches of whole lines,
/// which its own thread writes, one write(2) each, so lines from different
/// workers never interleave and a slow disk or a stalled pipe never holds
/// a worker's loop. What waits is bounded (`queueLimit`); past it batches
/// are dropped and counted (`droppedBytes`), never waited for.
public final class AccessLog: @unchecked Sendable {
    /// nil for stdout or stderr.
    public let path: String?
    /// Text, JSON objects or a template (`access_log_format`).
    public let format: AccessLogFormat
    /// How long lines are held to be written in time order across workers
    /// (`LineMerge`; 0 with one worker: as they come).
    private let holdMilliseconds: Int64
    /// One number for the log's whole life: a reopen puts the new file
    /// behind it (`dup2`), so a worker writing as it happens writes to the
    /// old file or the new one, never to a number closed (or reused by a
    /// client's socket) under it.
    private let fd: Int32

    public struct OpenError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Where drops are counted for `/stats` and the metrics.
    private let stats: ProxyStats?

    /// `destination`: "stdout", "stderr" or a file path.
    /// `workers`: how many hand lines over (with more than one, lines are
    /// held a little longer than a worker's batch to be put in order).
    public init(destination: String, format: AccessLogFormat = .text, workers: Int = 1, stats: ProxyStats? = nil) throws(OpenError) {
        self.format = format
        holdMilliseconds = workers > 1 ? Self.batchMilliseconds + 100 : 0
        self.stats = stats
        switch destination {
        case "stdout":
            path = nil
            fd = 1
        case "stderr":
            path = nil
            fd = 2
        default:
            path = destination
            fd = try Self.open(destination)
        }
    }

    private static func open(_ path: String) throws(OpenError) -> Int32 {
        let fd = Glibc.open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw OpenError(description: "cannot open the access log \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// Opens the file again (after logrotate moved it). Returns an error
    /// message and keeps the old file when that fails.
    public func reopen() -> String? {
        guard let path else { return nil }
        let new: Int32
        do {
            new = try Self.open(path)
        } catch {
            return error.description
        }
        defer { close(new) }
        // (dup3 is not in Glibc's module: dup2, then close-on-exec again.)
        guard dup2(new, fd) >= 0 else {
            return "cannot reopen the access log \(path): \(String(cString: strerror(errno)))"
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return nil
    }

    /// Lines a worker holds before it writes them (or a second at most).
    public static let flushBytes = 32 * 1024
    public static let batchMilliseconds: Int64 = 1000

    /// Bytes of lines that may wait for the writer thread.
    public static let queueLimit = 16 << 20
    private let pending = Condition()
    private var batches: [LineMerge.Batch] = []
    /// The writer's: lines held for their order.
    private var merge = LineMerge()
    /// `waitUntilWritten` asks for every held line now.
    private var flushing = false
    private var queued = 0
    private var writing = false
    private var dropped = 0
    /// Whether the writer thread runs (or is starting).
    private var writerStarted = false

    /// Hands whole lines to the writer thread (any thread; it never waits
    /// for the file), each line's time (wall milliseconds) and end offset
    /// given. Until a thread could start, they wait within the bound.
    public func write(_ bytes: UnsafeBufferPointer<UInt8>, times: [Int64], ends: [Int]) {
        guard !bytes.isEmpty, times.count == ends.count, ends.last == bytes.count else { return }
        let batch = LineMerge.Batch(bytes: Array(bytes), times: times, ends: ends)
        pending.lock()
        guard queued + bytes.count <= Self.queueLimit else {
            dropped += bytes.count
            pending.unlock()
            stats?.accessLogDroppedBytes.wrappingAdd(bytes.count, ordering: .relaxed)
            return
        }
        batches.append(batch)
        queued += bytes.count
        let start = !writerStarted
        writerStarted = true
        pending.broadcast()  // (the writer; waiters in waitUntilWritten look again)
        pending.unlock()
        if start { startWriter() }
    }

    /// Bytes of lines dropped because the writer was that far behind.
    public var droppedBytes: Int {
        pending.lock()
        defer { pending.unlock() }
        return dropped
    }

    /// Waits, at most `milliseconds`, until every batch handed in is
    /// written (before the process exits). True when they were.
    @discardableResult
    public func waitUntilWritten(milliseconds: Int = 5_000) -> Bool {
        let deadline = Condition.deadline(afterMilliseconds: UInt64(max(0, milliseconds)))
        pending.lock()
        defer { pending.unlock() }
        flushing = true
        pending.broadcast()
        while !batches.isEmpty || writing || !merge.isEmpty {
            if !pending.wait(until: deadline) { return batches.isEmpty && !writing && merge.isEmpty }
        }
        return true
    }

    private func startWriter() {
        do {
            try startThread(name: "larder-log") { [self] in
                while true {
                    pending.lock()
                    while batches.isEmpty && !(flushing && !merge.isEmpty) {
                        guard holdMilliseconds > 0, let earliest = merge.earliest else { pending.wait(); continue }
                        let due = earliest + holdMilliseconds - EventLoop.wallMilliseconds()
                        if due <= 0 || !pending.wait(until: Condition.deadline(afterMilliseconds: UInt64(due))) { break }
                    }
                    let taken = batches, all = flushing
                    batches.removeAll(keepingCapacity: true)
                    queued = 0
                    writing = true
                    pending.unlock()
                    for batch in taken { merge.add(batch) }
                    let lines = merge.take(upTo: all ? .max : EventLoop.wallMilliseconds() - holdMilliseconds)
                    lines.withUnsafeBufferPointer(writeNow)
                    pending.lock()
                    writing = false
                    if merge.isEmpty { flushing = false }
                    pending.broadcast()  // (waitUntilWritten)
                    pending.unlock()
                }
            }
        } catch {
            // No thread now: the next batch tries again.
            pending.lock()
            writerStarted = false
            pending.unlock()
        }
    }

    /// Writes whole lines. A failing log never stops serving.
    private func writeNow(_ bytes: UnsafeBufferPointer<UInt8>) {
        EventLoop.assertOffLoop("an access log write")
        var done = 0
        while done < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            done += n
        }
    }
}

/// What the access log and the latency histograms say of one exchange:
/// noted as its answer is decided, taken once when it ends. The Cache-Status
/// is kept only while the log is on, or for an error.
public struct AccessRecord {
    /// Whether the access log is on.
    public let logging: Bool
    /// Monotonic microseconds when the request began, and when its answer's
    /// head was queued (0: not yet).
    private let startMicroseconds: UInt64
    private(set) var firstByteMicroseconds: UInt64 = 0
    /// How the answer was made (the histograms' `result`).
    private(set) var result = LatencyHistograms.Result.other
    /// The whole answer was queued with its head (a stored or made-here
    /// one): its last byte's time is its first's.
    private(set) var queuedWhole = false
    private(set) var status = 0
    /// The Cache-Status sent: a whole "Cache-Status: ...\r\n" line (hits)
    /// or the value (forwards).
    private(set) var cacheStatus: [UInt8] = []
    /// The upstream's status, time to its head and server (host:port), when its head was the answer.
    public var upstream: (status: Int, microseconds: Int?, server: String?)?
    /// Body bytes of an answer made here; nil for a forwarded body (the
    /// bytes received count then).
    private(set) var bodyBytes: Int?
    private var written = false

    /// `start`: when the request arrived (its loop's wake, monotonic
    /// microseconds); now when not given.
    public init(logging: Bool = true, start: UInt64? = nil) {
        self.logging = logging
        startMicroseconds = start ?? EventLoop.nowMicroseconds()
    }

    @inline(__always)
    public mutating func note(status: Int, result: LatencyHistograms.Result, queuedWhole: Bool,
                       cacheStatus: @autoclosure () -> [UInt8], bodyBytes: Int?) {
        self.status = status
        self.result = result
        self.queuedWhole = queuedWhole
        firstByteMicroseconds = EventLoop.nowMicroseconds()
        // An error's Cache-Status goes to the status page's recent errors.
        guard logging || status >= 500 else { return }
        self.cacheStatus = cacheStatus()
        self.bodyBytes = bodyBytes
    }

    /// True the first time only: an exchange that ends twice (cancelled,
    /// then completed) is counted and logged once.
    public mutating func takeTurn() -> Bool {
        defer { written = true }
        return !written
    }

    /// Microseconds from the request to its answer's head, and to its
    /// last byte queued (now, unless it was queued whole with its head);
    /// nil when nothing was answered.
    public func latencies() -> (firstByte: Int, total: Int)? {
        guard firstByteMicroseconds != 0 else { return nil }
        let end = queuedWhole ? firstByteMicroseconds : EventLoop.nowMicroseconds()
        return (Int(firstByteMicroseconds &- startMicroseconds), Int(end &- startMicroseconds))
    }

    /// Since the request began.
    public var microseconds: Int { Int(EventLoop.nowMicroseconds() &- startMicroseconds) }

    /// The log's cache column: the Cache-Status value without field name,
    /// cache name or line end ("hit; ttl=55"), "-" when none was sent.
    public var cacheColumn: String {
        let cache = cacheStatus.withUnsafeBufferPointer { AccessLine.cacheColumn($0) }
        return cache.isEmpty ? "-" : String(decoding: cache, as: UTF8.self)
    }
}
