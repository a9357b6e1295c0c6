import EventLoop
import HTTP1
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Where access log lines go: stdout, stderr or a file opened for
/// appending. Shared by the workers; each hands it whole lines in one
/// write(2), so lines from different workers never interleave.
public final class AccessLog: Sendable {
    /// nil for stdout or stderr.
    public let path: String?
    /// One JSON object per line (`access_log_format = "json"`), else text.
    public let json: Bool
    private let fd: Atomic<Int32>

    public struct OpenError: Error, CustomStringConvertible {
        public let description: String
    }

    /// `destination`: "stdout", "stderr" or a file path.
    public init(destination: String, json: Bool = false) throws(OpenError) {
        self.json = json
        switch destination {
        case "stdout":
            path = nil
            fd = Atomic(1)
        case "stderr":
            path = nil
            fd = Atomic(2)
        default:
            path = destination
            fd = Atomic(try Self.open(destination))
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
        do {
            let old = fd.exchange(try Self.open(path), ordering: .acquiringAndReleasing)
            close(old)
            return nil
        } catch {
            return error.description
        }
    }

    /// Writes whole lines. A failing log never stops serving.
    func write(_ bytes: [UInt8]) {
        let fd = fd.load(ordering: .acquiring)
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                done += n
            }
        }
    }
}

/// One worker's pending access log lines: formatted on the loop thread,
/// written in batches (at 32 KiB, or within a second).
struct AccessLogBuffer {
    var bytes: [UInt8] = []
    private var second: Int64 = -1
    private var stamp: [UInt8] = []

    static let flushBytes = 32 * 1024

    /// Appends `TIME CLIENT METHOD TARGET STATUS BYTES MILLISECONDS "CACHE"`.
    mutating func append(now: Int64, client: String, method: String, target: String, status: Int, bodyBytes: Int,
                         milliseconds: UInt64, cache: String) {
        appendTime(now)
        bytes.append(0x20)
        bytes.append(contentsOf: client.utf8)
        bytes.append(0x20)
        bytes.append(contentsOf: method.utf8)
        bytes.append(0x20)
        bytes.append(contentsOf: target.utf8)
        bytes.append(0x20)
        ResponseSerializer.appendDecimal(status, to: &bytes)
        bytes.append(0x20)
        ResponseSerializer.appendDecimal(bodyBytes, to: &bytes)
        bytes.append(0x20)
        ResponseSerializer.appendDecimal(Int(milliseconds), to: &bytes)
        bytes.append(contentsOf: " \"".utf8)
        bytes.append(contentsOf: cache.utf8)
        bytes.append(contentsOf: "\"\n".utf8)
    }

    /// The time, formatted once per second.
    mutating func appendTime(_ now: Int64) {
        if now != second {
            second = now
            stamp = Self.iso8601(now)
        }
        bytes.append(contentsOf: stamp)
    }

    mutating func take() -> [UInt8] {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes
    }

    /// 2026-11-22T10:31:59Z
    static func iso8601(_ seconds: Int64) -> [UInt8] {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> [UInt8] { [UInt8(48 + v / 10), UInt8(48 + v % 10)] }
        let year = Int(parts.tm_year) + 1900
        return Array(String(year).utf8) + [UInt8(ascii: "-")] + two(parts.tm_mon + 1) + [UInt8(ascii: "-")] + two(parts.tm_mday)
            + [UInt8(ascii: "T")] + two(parts.tm_hour) + [UInt8(ascii: ":")] + two(parts.tm_min) + [UInt8(ascii: ":")]
            + two(parts.tm_sec) + [UInt8(ascii: "Z")]
    }
}

/// What the access log and the latency histograms say of one exchange:
/// noted as its answer is decided, taken once when it ends. The Cache-Status
/// is kept only while the log is on, or for an error.
struct AccessRecord {
    /// Whether the access log is on.
    let logging: Bool
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
    /// The upstream's status and time to its head, when its head was the answer.
    var upstream: (status: Int, microseconds: Int?)?
    /// Body bytes of an answer made here; nil for a forwarded body (the
    /// bytes received count then).
    private(set) var bodyBytes: Int?
    private var written = false

    /// `start`: when the request arrived (its loop's wake, monotonic
    /// microseconds); now when not given.
    init(logging: Bool = true, start: UInt64? = nil) {
        self.logging = logging
        startMicroseconds = start ?? EventLoop.nowMicroseconds()
    }

    @inline(__always)
    mutating func note(status: Int, result: LatencyHistograms.Result, queuedWhole: Bool,
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
    mutating func takeTurn() -> Bool {
        defer { written = true }
        return !written
    }

    /// Microseconds from the request to its answer's head, and to its
    /// last byte queued (now, unless it was queued whole with its head);
    /// nil when nothing was answered.
    func latencies() -> (firstByte: Int, total: Int)? {
        guard firstByteMicroseconds != 0 else { return nil }
        let end = queuedWhole ? firstByteMicroseconds : EventLoop.nowMicroseconds()
        return (Int(firstByteMicroseconds &- startMicroseconds), Int(end &- startMicroseconds))
    }

    /// Since the request began.
    var microseconds: Int { Int(EventLoop.nowMicroseconds() &- startMicroseconds) }

    /// The log's cache column: the Cache-Status value without field name,
    /// cache name or line end ("hit; ttl=55"), "-" when none was sent.
    private static let fieldPrefix = Array("Cache-Status: ".utf8), cacheName = Array("larder; ".utf8)

    var cacheColumn: String {
        var cache = cacheStatus[...]
        let prefix = Self.fieldPrefix, name = Self.cacheName
        if cache.starts(with: prefix) { cache = cache.dropFirst(prefix.count) }
        if cache.starts(with: name) { cache = cache.dropFirst(name.count) }
        while let last = cache.last, last == 0x0D || last == 0x0A { cache = cache.dropLast() }
        return cache.isEmpty ? "-" : String(decoding: cache, as: UTF8.self)
    }
}
