import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import HTTPHeaders
import Telemetry

/// What one request's client is sent, once its exchange has decided it,
/// and the access-log line that says so: a stored response, an answer made
/// here, a head passed on (the upstream's, or a leader's shared one). The
/// sink queues it in its protocol's framing (`ResponseSink`); what to
/// answer is the exchange's.
struct ClientAnswer {
    /// Unsafe, and safe: the sink (of the worker) owns the exchange that
    /// owns this; checked references would cost a hit about 2 % in
    /// reference counting.
    unowned(unsafe) let sink: any ResponseSink
    /// Where the answer is recorded (the worker owns it, and the sink).
    unowned(unsafe) let log: RequestLog
    private var access: AccessRecord
    /// Added to Cache-Status (RFC 9211's `key`): a cached POST's body digest.
    var cacheStatusKey: String?

    private func keyed(_ value: String) -> String {
        guard let cacheStatusKey else { return value }
        return value + "; key=\"" + cacheStatusKey + "\""
    }

    private func keyed(_ line: CacheStatusLine) -> CacheStatusLine {
        cacheStatusKey == nil ? line : CacheStatusLine(keyed(line.value))
    }

    /// The request is the exchange's, passed to each call (a copy kept here
    /// would cost every hit its reference counting).
    @inline(__always)
    init(on sink: any ResponseSink, log: RequestLog) {
        self.sink = sink
        self.log = log
        // Timed from the wake that brought the request: its wait behind
        // others handled in that wake counts, and no clock is read here.
        access = AccessRecord(logging: log.recordsRequests, start: log.wakeMicroseconds)
    }

    /// Queues a stored response: whole, a 304 to the client's conditional
    /// or a 206/416 for a range, as `StoredAnswer` chooses here (the sink
    /// only frames it). False, having queued nothing, when its body is a
    /// disk file that can no longer be opened.
    mutating func stored(_ entry: CachedResponse, for request: RequestHead, age: Int, now: Int64, cacheStatus: CacheStatusLine) -> Bool {
        let cacheStatus = keyed(cacheStatus)
        let answer = StoredAnswer.choose(for: request, entry: entry)
        guard let sent = sink.sendStored(answer, of: entry, for: request, age: age, now: now, cacheStatus: cacheStatus) else {
            return false
        }
        access.note(status: sent.status, result: .hit, queuedWhole: true, cacheStatus: cacheStatus.bytes, bodyBytes: sent.bodyBytes)
        return true
    }

    /// The head of a stored gzip response decoded for this client
    /// (`ClientCoding`); the bytes of the decoded representation that
    /// follow (nil: none).
    mutating func decodedHead(_ answer: StoredAnswer, entry: CachedResponse, fields: HeaderFields, length: Int,
                              for request: RequestHead, age: Int, now: Int64, cacheStatus: CacheStatusLine) -> Range<Int>? {
        let cacheStatus = keyed(cacheStatus)
        let (sent, body) = sink.sendDecodedHead(answer, entry: entry, fields: fields, length: length, for: request, age: age,
                                                now: now, cacheStatus: cacheStatus)
        access.note(status: sent.status, result: .hit, queuedWhole: body == nil, cacheStatus: cacheStatus.bytes,
                    bodyBytes: body == nil ? sent.bodyBytes : nil)
        sink.flushSoon()
        return body
    }

    /// A whole answer made here (400, 502, 504).
    mutating func madeHere(_ status: Int, _ message: String, for request: RequestHead, cacheStatus: String?, extra: HeaderFields = []) {
        let cacheStatus = cacheStatus.map(keyed)
        var extra = extra
        if let cacheStatus { extra.append(HeaderField(lowercasedName: "cache-status", value: cacheStatus)) }
        access.note(status: status, result: .other, queuedWhole: true, cacheStatus: Array((cacheStatus ?? "").utf8),
                    bodyBytes: message.utf8.count + 1)
        sink.sendMadeHere(status: status, message: message, extra: extra, for: request)
    }

    /// A rate limit's 429.
    mutating func tooManyRequests(retryAfter: Int, for request: RequestHead) {
        access.note(status: 429, result: .other, queuedWhole: true, cacheStatus: [], bodyBytes: TooManyRequests.bodyBytes)
        sink.sendTooManyRequests(retryAfter: retryAfter, for: request)
    }

    /// The upstream's head, passed on; or a 304 (`notModified`, as the
    /// machine decided: a 200 the client's conditional request already
    /// has; the body still goes to the store, not to the client). `age`:
    /// nil when not looked up.
    mutating func upstreamHead(_ response: UpstreamResponse, for request: RequestHead, age: Int?, cacheStatus: String,
                               notModified: Bool = false) {
        let cacheStatus = keyed(cacheStatus)
        let fields = response.fields, now = response.timing.responseTime
        if notModified, let age {
            access.note(status: 304, result: .miss, queuedWhole: true, cacheStatus: Array(cacheStatus.utf8), bodyBytes: 0)
            sink.sendNotModified(fields: fields, age: age, cacheStatus: cacheStatus, now: now, for: request)
            sink.flush()
            return
        }
        access.note(status: response.status, result: age == nil ? .pass : .miss, queuedWhole: false,
                    cacheStatus: Array(cacheStatus.utf8), bodyBytes: nil)
        if access.logging { access.upstream = (response.status, response.upstreamMicroseconds, response.server) }
        sink.sendHead(status: response.status, reason: response.reason, fields: fields, length: response.length,
                      noBody: response.hasNoBody(answering: request.method), age: age, cacheStatus: cacheStatus, now: now,
                      for: request)
        sink.flushSoon()
    }

    /// The head of a leader's response shared with this collapsed request,
    /// aged by the time since it arrived.
    mutating func sharedHead(_ head: SharedFetch.Head, for request: RequestHead, cacheStatus: String) {
        let cacheStatus = keyed(cacheStatus)
        let now = log.clock.now()
        access.note(status: head.status, result: .miss, queuedWhole: false, cacheStatus: Array(cacheStatus.utf8), bodyBytes: nil)
        sink.sendHead(status: head.status, reason: head.reason, fields: head.headers, length: head.contentLength,
                      noBody: UpstreamResponse.hasNoBody(status: head.status, answering: request.method),
                      age: Freshness.currentAge(correctedInitialAge: Freshness.correctedInitialAge(head.timing),
                                                responseTime: head.timing.responseTime, now: now),
                      cacheStatus: cacheStatus, now: now, for: request)
    }

    /// The latencies and the access-log line, once: when the exchange
    /// completes, or ends early (status 0 if nothing was sent).
    mutating func log(_ request: RequestHead) {
        guard access.takeTurn() else { return }
        log.record(request, access, sentBy: sink)
    }
}
