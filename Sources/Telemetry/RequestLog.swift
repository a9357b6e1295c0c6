import Bytes
import Clocks
import EventLoop
import HTTP1
import Synchronization

/// What the request log reads of where an answer went, whatever carries it.
public protocol AnswerCarrier: AnyObject {
    /// The client's address.
    var peer: String { get }
    /// The body bytes passed on so far (a streamed answer's line).
    var answerBodyBytes: Int { get }
    /// The HTTP version the line names for `request`: 10, 11, 20 or 30.
    func loggedVersion(of request: RequestHead) -> Int
    /// The server name the client's TLS handshake sent ("" for none); nil without TLS.
    var tlsServerName: String? { get }
}

/// What is recorded of each answer on one worker: its latencies, a sample
/// for the status page and `larder top`, its line for the access log (in
/// batches) and for the log's followers. Used on the worker's thread only.
public final class RequestLog {
    /// Unsafe, and safe: the worker owns both (a checked reference cost
    /// every answer a retain and a release).
    unowned(unsafe) let loop: EventLoop
    public let clock: WallClock
    /// The worker's number (0, 1, ...) written in each line.
    public var worker = 0
    private let latency: LatencyHistograms
    private let responses: ResponseCounts
    /// nil: access logging is off.
    private let accessLog: AccessLog?
    /// Lines for the access log, written in batches (32 KiB, or a second).
    private let accessBuffer = ByteBuffer(capacity: AccessLog.flushBytes + 4096)
    /// Each line's time and end in `accessBuffer` (the log puts workers' lines in order).
    private var accessTimes: [Int64] = [], accessEnds: [Int] = []
    private var accessFormat = AccessLineFormatter()
    private var accessFlushPending = false
    /// Followers of the log (`attach`, before the worker runs).
    private var logQueue: LineQueue?
    /// The feed's follower count (it outlives the workers).
    private var followers: UnsafeMutablePointer<Atomic<Int>>?
    /// Which answers the status page and `larder top` count (`attach`).
    @exclusivity(unchecked) private var sampler = RequestSampler(nil)

    public init(loop: EventLoop, clock: WallClock, latency: LatencyHistograms, responses: ResponseCounts, accessLog: AccessLog?) {
        self.loop = loop
        self.clock = clock
        self.latency = latency
        self.responses = responses
        self.accessLog = accessLog
    }

    /// Lines go to `feed` while someone follows it; answers are sampled
    /// into `samples`. Call before the worker runs.
    public func attach(_ feed: LogFeed, samples: RequestSamples?) {
        logQueue = feed.makeQueue()
        followers = feed.followers
        sampler = RequestSampler(samples?.makeQueue())
    }

    /// Whether someone follows the log.
    private var isFollowed: Bool { (followers?.pointee.load(ordering: .relaxed) ?? 0) > 0 }

    /// Whether a request's line is wanted: the access log is on or someone follows.
    public var recordsRequests: Bool { accessLog != nil || isFollowed }

    /// When the loop's last poll returned (what it handles now arrived then).
    public var wakeMicroseconds: UInt64 { loop.wakeMicroseconds }

    /// One answer, once it is over: its latencies, its sample, its line
    /// (the sink's client and body bytes are read only for a line).
    @inline(__always)
    public func record(_ request: RequestHead, _ access: AccessRecord, sentBy sink: any AnswerCarrier) {
        let latencies = access.latencies()
        if let (firstByte, total) = latencies { latency.record(access.result, firstByte: firstByte, total: total) }
        if access.status > 0 { responses.record(status: access.status, result: access.result) }  // (0: nothing was answered)
        sample(request, access)
        guard access.logging else { return }
        let sni = sink.tlsServerName
        let figures = AccessLine.Figures(time: EventLoop.wallMilliseconds(), worker: worker, status: access.status,
                                         bodyBytes: access.bodyBytes ?? sink.answerBodyBytes,
                                         firstByteMicroseconds: latencies?.firstByte,
                                         totalMicroseconds: latencies?.total ?? access.microseconds, result: access.result,
                                         upstreamStatus: access.upstream?.status, upstreamMicroseconds: access.upstream?.microseconds,
                                         httpVersion: sink.loggedVersion(of: request), tls: sni != nil)
        line(figures, client: sink.peer, method: request.method, target: request.target,
             cache: access.cacheStatus,  // cut to the log's column where it is formatted
             at: AccessLine.Where(host: request.header("host"), upstream: access.upstream?.server, sni: sni))
    }

    /// Queues one answer for the admin thread's counts when it is sampled
    /// (every miss, pass and error; one hit in `RequestSamples.hitStride`).
    @inline(__always)
    private func sample(_ request: RequestHead, _ access: AccessRecord) {
        guard let weight = sampler.weight(access.result, status: access.status) else { return }
        sampler.push(RequestSample(time: clock.now(), method: request.method, target: request.target,
                                   status: access.status, result: access.result, weight: weight,
                                   cache: access.status >= 500 ? access.cacheColumn : nil))
    }

    /// Hands one request's line to the log's followers and the access log
    /// (in batches). Its texts are copied as bytes, never made Strings.
    private func line(_ figures: AccessLine.Figures, client: String, method: String, target: String, cache: [UInt8],
                      at place: AccessLine.Where) {
        let followed = isFollowed
        guard followed || accessLog != nil else { return }
        AccessLine.with(figures, client: client, method: method, target: target, cache: cache, at: place) { line in
            if followed, let logQueue, logQueue.push(line) { loop.atBatchEnd(logQueue) }
            guard let accessLog else { return }
            accessFormat.append(line, as: accessLog.format, to: accessBuffer)
            accessTimes.append(figures.time)
            accessEnds.append(accessBuffer.count)
        }
        guard accessLog != nil else { return }
        if accessBuffer.count >= AccessLog.flushBytes {
            flush()
        } else if !accessFlushPending {
            accessFlushPending = true
            loop.schedule(after: UInt64(AccessLog.batchMilliseconds)) { [weak self] in self?.flush() }
        }
    }

    /// Writes the access log's lines held for the next batch.
    public func flush() {
        accessFlushPending = false
        guard let accessLog, !accessBuffer.isEmpty else { return }
        accessLog.write(accessBuffer.bytes, times: accessTimes, ends: accessEnds)
        accessBuffer.removeAll()
        accessTimes.removeAll(keepingCapacity: true)
        accessEnds.removeAll(keepingCapacity: true)
    }
}
