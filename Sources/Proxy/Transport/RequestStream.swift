import EdgeControls
import CacheStorage
import EventLoop
import HTTP1
import HTTP2
import HTTPHeaders
import Telemetry
import Threads

/// What a request stream asks of the connection that carries it: an
/// HTTP/2 connection (`HTTP2Connection`) or an HTTP/3 one (`HTTP3Connection`).
protocol StreamCarrier: AnyObject {
    var services: ConnectionServices { get }
    var peer: String { get }
    var peerAddress: IPAddress { get }
    var tlsServerName: String? { get }
    /// Alt-Svc's value on its answers, or nil.
    var altService: String? { get }
    /// The stream is reset with `code` (HTTP/2's codes; HTTP/3 sends its own for each).
    func resetStream(_ stream: RequestStream, code: HTTP2Error.Code)
    /// The client may send as many more body bytes as the upstream took.
    func acknowledge(_ stream: RequestStream)
    func sendInterim(_ stream: RequestStream, status: Int, fields: HeaderFields)
    func sendContinue(_ stream: RequestStream)
    /// Once the answer is out, the rest of the request is refused without error.
    func resetAfterAnswer(_ stream: RequestStream)
    /// The stream has output to submit (at the batch's end).
    func streamHasOutput(_ stream: RequestStream)
    func waitsForWindow(_ stream: RequestStream)
    /// A stream that waited (for a window, a file's pages) sends again.
    func resume(_ stream: RequestStream)
    /// A body file's next bytes are read into the page cache off the loop
    /// (`load` below; then `resume`).
    func load(_ file: OpenFile, offset: Int, count: Int, for stream: RequestStream)
    /// The open stream of this id, if the connection is not closed.
    func openStream(_ id: Int64) -> RequestStream?
}

extension StreamCarrier {
    func load(_ file: OpenFile, offset: Int, count: Int, for stream: RequestStream) {
        WorkerStats.bump(services.counters.offloadedReads)
        let id = stream.id
        BlockingWork.shared.run({ FilePages.load(file.fd, offset: offset, count: count) }, on: services.loop) { [weak self] _ in
            file.cachedUntil = max(file.cachedUntil, offset + count)
            guard let self, let stream = self.openStream(id) else { return }
            self.resume(stream)
        }
    }
}

/// One request stream of an HTTP/2 or HTTP/3 connection: its request, and
/// the exchange's `ResponseSink`. The request's fields become a
/// `RequestHead` directly, held to the same rules as a parsed HTTP/1.1
/// head (`RequestRules`: one set of checks and limits for every
/// protocol); the answer's head is written as fields (`AnswerQueue` with
/// `HTTP2Head`: HTTP/3's rules for fields are HTTP/2's, RFC 9114 section
/// 4.2), its body queued and taken by the session as DATA, as the
/// client's window allows.
final class RequestStream: AnswerQueue {
    let id: Int64
    /// The connection owns its streams and outlives them.
    unowned(unsafe) let connection: any StreamCarrier
    var services: ConnectionServices { connection.services }
    var peer: String { connection.peer }
    var peerAddress: IPAddress { connection.peerAddress }
    var answerEdits: ResponseEdits?
    var tlsServerName: String? { connection.tlsServerName }
    var altService: String? { connection.altService }
    let framesItsOwnBodies = true
    /// 20 (HTTP/2) or 30 (HTTP/3), as the access log writes it.
    let version: Int
    func loggedVersion(of request: RequestHead) -> Int { version }
    var answerFraming = ClientFraming.none
    var answerBodyBytes = 0, answerLimit = Int.max

    /// The request's fields as they arrive (cookies apart, joined at the
    /// end), and their size as HTTP/1.1 text would have it (max_header_size).
    private var headers = HeaderFields()
    private var headBytes = 0
    private var cookies: [UInt8] = []
    private var pseudo: (method: String?, path: String?, authority: String?) = (nil, nil, nil)
    private var hasLength = false
    /// The Host field's value, when the request has one.
    private var host: String?
    /// Over max_header_size: answered 431.
    private var tooLarge = false
    /// Bytes of fields decoded, counted as SETTINGS_MAX_HEADER_LIST_SIZE counts them.
    private var decodedBytes = 0
    private var trailerBytes = 0
    /// A GET or HEAD whose head did not end the stream: its exchange waits
    /// for a DATA frame with bytes (a body) or the stream's end (none).
    private var waitingForBody: (ParseLimits, ExchangeParts)?
    private(set) var exchange: Exchange?
    /// Request body bytes received, and not yet acknowledged to the client
    /// (its window reopens as the upstream takes them).
    private var bodyBytes = 0
    var unacknowledged = 0
    private var maxBodyBytes: Int
    /// The client sent its whole request (END_STREAM).
    private(set) var requestEnded = false
    /// Over max_body_size: the rest of the body is dropped.
    private var bodyTooLarge = false

    /// The answer's head, until the session takes it.
    private var head: HeaderBlock?
    private(set) var submitted = false
    /// The answer's body, taken as DATA.
    private var body = OutputQueue()
    /// The exchange queued its whole answer (or none will come).
    private(set) var ended = false
    /// The session waits for body bytes (it asked, none were there).
    private var deferred = false
    /// When body bytes last left (send_timeout per stream), in loop milliseconds.
    var lastProgress: UInt64 = 0
    private var outputBound: Int

    init(id: Int64, connection: any StreamCarrier, version: Int = 20, maxBodyBytes: Int, outputBound: Int) {
        self.id = id
        self.connection = connection
        self.version = version
        self.maxBodyBytes = maxBodyBytes
        self.outputBound = outputBound
        headers.reserveCapacity(16)
    }

    // MARK: the request

    /// A host as compared: lower case, without a default port (80 or 443).
    static func sameHost(_ host: String) -> Substring {
        var host = Substring(host.lowercased())
        if host.hasSuffix(":80") { host = host.dropLast(3) } else if host.hasSuffix(":443") { host = host.dropLast(4) }
        return host
    }

    /// One field; pseudo-fields are kept for the request line. False when
    /// the fields decoded so far are far beyond the limit (an HPACK bomb:
    /// small references to large table entries): the stream is reset
    /// rather than answered.
    func field(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, limit: Int) -> Bool {
        decodedBytes += name.count + value.count + 32  // (RFC 9113's field size)
        guard !tooLarge else { return decodedBytes <= 4 * limit }
        if headBytes + name.count + value.count + cookies.count > limit {
            tooLarge = true
            return true
        }
        if name.first == UInt8(ascii: ":") {
            let text = String(decoding: value, as: UTF8.self)
            switch String(decoding: name, as: UTF8.self) {
            case ":method": pseudo.method = text
            case ":path": pseudo.path = text
            case ":authority": pseudo.authority = text
            default: break  // :scheme (checked by the library)
            }
            return true
        }
        // Cookie crumbs are joined with "; " (RFC 9113 section 8.2.3).
        if name.elementsEqual("cookie".utf8) {
            if !cookies.isEmpty { cookies += "; ".utf8 }
            cookies += value
            return true
        }
        if name.elementsEqual("host".utf8) { host = String(decoding: value, as: UTF8.self) }
        if name.elementsEqual("content-length".utf8) { hasLength = true }
        headBytes += name.count + value.count + 4  // ("name: value\r\n")
        // (Names arrive in lower case: the session refuses any other.)
        headers.append(HeaderField(lowercasedName: CommonFieldNames.string(name), value: FieldBytes.string(Self.trimmed(value))))
        return true
    }

    /// A field value without the white space around it (as an HTTP/1.1
    /// field's is read).
    static func trimmed(_ value: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 0, end = value.count
        while start < end && (value[start] == 0x20 || value[start] == 0x09) { start += 1 }
        while end > start && (value[end - 1] == 0x20 || value[end - 1] == 0x09) { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: value[start..<end])
    }

    /// A trailer field (dropped): false once the trailers are over the
    /// limit the head has (counted as the head's fields are).
    func trailerField(bytes: Int, limit: Int) -> Bool {
        trailerBytes += bytes + 32
        return trailerBytes <= limit
    }

    /// The head is complete: parsed as an HTTP/1.1 head would be, then
    /// answered by an exchange (or refused here).
    func headersEnded(endStream: Bool, limits: ParseLimits, parts: ExchangeParts) {
        if !endStream && !hasLength && (pseudo.method == "GET" || pseudo.method == "HEAD") && !tooLarge {
            // Some clients end a GET with an empty DATA frame: whether it has
            // a body (and so whether it may be cached) is known at the first
            // DATA with bytes, or at the end of the stream.
            waitingForBody = (limits, parts)
            return
        }
        begin(endStream: endStream, limits: limits, parts: parts)
    }

    private func begin(endStream: Bool, limits: ParseLimits, parts: ExchangeParts) {
        requestEnded = endStream
        guard !tooLarge else { return refuse(431, "request header fields too large") }
        guard let method = pseudo.method, let path = pseudo.path else { return refuse(400, "malformed request: :method and :path") }
        // :authority names the target (RFC 9113 section 8.3.1): a Host that
        // names another is malformed, never a second host to route or key by.
        if let host, let authority = pseudo.authority, Self.sameHost(host) != Self.sameHost(authority) {
            return refuse(400, "malformed request: Host differs from :authority")
        }
        var fields = headers
        headers = HeaderFields()
        if host == nil, let authority = pseudo.authority { fields.fields.insert(HeaderField(lowercasedName: "host", value: authority), at: 0) }
        if !cookies.isEmpty { fields.append(HeaderField(lowercasedName: "cookie", value: cookies.withUnsafeBytes { FieldBytes.string($0) })) }
        switch RequestRules.head(method: method, target: path, headers: fields, limits: limits) {
        case .success(var head):
            // A body of no announced length is framed by the stream's end.
            head.framing = endStream ? .none : hasLength ? head.framing : .chunked
            head.expectsContinue = head.framing != .none && head.header("expect")?.lowercased() == "100-continue"
            if case .contentLength(let length) = head.framing, length > maxBodyBytes {
                return refuse(413, "request body too large")
            }
            // The client waits for a 100 before it sends the body.
            if head.expectsContinue { connection.sendContinue(self) }
            let exchange = Exchange(head: head, sink: self, parts: parts)
            self.exchange = exchange
            exchange.start()
        case .failure(let error):
            refuse(error.status, error.message)
        }
    }

    /// Request body bytes: to the exchange, or dropped once the answer no
    /// longer needs them. Over max_body_size the request is answered 413
    /// (the stream is reset when its answer had begun) and the rest dropped.
    func data(_ bytes: UnsafeRawBufferPointer) {
        bodyBytes += bytes.count
        unacknowledged += bytes.count
        if let (limits, parts) = waitingForBody {
            guard !bytes.isEmpty else { return }
            waitingForBody = nil
            begin(endStream: false, limits: limits, parts: parts)
        }
        if bodyBytes > maxBodyBytes && !bodyTooLarge {
            bodyTooLarge = true
            if let exchange {
                self.exchange = nil
                if exchange.responseStarted {
                    exchange.cancel()
                    ended = true
                    return connection.resetStream(self, code: .cancel)
                }
                exchange.cancel()
                refuse(413, "request body too large")
            }
        }
        guard !bodyTooLarge else { return }
        exchange?.requestBody(bytes)
    }

    func bodyEnded() {
        if let (limits, parts) = waitingForBody {
            waitingForBody = nil
            return begin(endStream: true, limits: limits, parts: parts)
        }
        requestEnded = true
        exchange?.requestBodyEnd()
    }

    /// An answer made here for a request no exchange takes.
    private func refuse(_ status: Int, _ message: String) {
        let made = ClientHead.madeHere(status: status, message: message, extra: [], close: false, as: HTTP2Head.self)
        enqueue(head: made.head)
        enqueue(made.body)
        ended = true
        flushSoon()
    }

    // MARK: the answer (AnswerQueue)

    func enqueue(head: HTTP2Head) { self.head = head.block }
    func enqueue(_ bytes: [UInt8]) { body.append(bytes) }
    func enqueue(copying buffer: UnsafeRawBufferPointer) { body.append(copying: buffer) }
    func enqueue(_ bytes: Bytes, from: Int, to: Int?) { body.append(bytes, from: from, to: to) }

    func enqueue(stored bytes: StoredBytes) {
        // Taken as the client's windows allow, which may be long after this
        // loop turn: a block's bytes hold their block, not the worker's
        // period token (`CachedResponse.owned`).
        if case .block(let entry, let range) = bytes { return body.append(.block(entry.owned(), range)) }
        body.append(bytes)
    }

    var isCongested: Bool { body.pendingBytes >= outputBound }

    /// Queued bytes go at the end of the loop's batch (a head and its body in one go).
    func flushSoon() { connection.streamHasOutput(self) }
    func flush() { connection.streamHasOutput(self) }

    func exchangeFinished(keepAlive: Bool) {
        (exchange, answerEdits) = (nil, nil)
        ended = true
        flushSoon()
    }

    func exchangeAborted() {
        (exchange, answerEdits) = (nil, nil)
        ended = true
        connection.resetStream(self, code: .internalError)
    }

    func sendInterim(status: Int, fields: HeaderFields, for request: RequestHead) {
        guard !submitted else { return }
        connection.sendInterim(self, status: status, fields: fields)
    }

    func uploadDrained() { connection.acknowledge(self) }

    /// What the connection does with queued output at the batch's end.
    enum Submission {
        /// The head, complete (`body`: DATA follows).
        case respond(HeaderBlock, body: Bool)
        /// A body that waited has bytes (or its end).
        case resume
    }

    /// The head submitted once complete, a waiting body resumed.
    func takeSubmission() -> Submission? {
        if !submitted {
            guard let head else { return nil }
            submitted = true
            self.head = nil
            lastProgress = services.loop.now()
            let hasBody = !(ended && body.isEmpty)
            if !hasBody { answered() }
            return .respond(head, body: hasBody)
        } else if deferred && (!body.isEmpty || ended) {
            deferred = false
            return .resume
        }
        return nil
    }

    /// DATA for the session: up to `buffer.count` bytes, whether they end
    /// the body, or nil to wait. A window smaller than 512 bytes with more
    /// than that to send waits for the client to open it (tiny DATA
    /// frames, one per byte of window, would cost far more than they carry),
    /// for `smallWindowWaitMilliseconds`; then what fits goes.
    func pull(into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool)? {
        if body.isEmpty {
            if ended {
                answered()
                return (0, true)
            }
            deferred = true
            return nil
        }
        if buffer.count < 512 && body.pendingBytes > buffer.count && !smallWindowDue {
            deferred = true
            connection.waitsForWindow(self)
            // A window that stays small gets what fits after a short wait
            // (a client that opens it no wider would wait for send_timeout).
            if windowTimer == .none {
                windowTimer = services.loop.schedule(after: Self.smallWindowWaitMilliseconds) { [weak self] in
                    guard let self else { return }
                    self.windowTimer = .none
                    self.smallWindowDue = true
                    self.connection.resume(self)
                }
            }
            return nil
        }
        smallWindowDue = false
        let wasCongested = isCongested
        let taken: OutputQueue.Gathered
        do {
            taken = try body.take(into: buffer)
        } catch {
            connection.resetStream(self, code: .internalError)
            return nil
        }
        switch taken {
        case .bytes(let n):
            lastProgress = services.loop.now()
            if wasCongested && !isCongested { exchange?.outputDrained() }
            let end = ended && body.isEmpty
            if end { answered() }
            return (n, end)
        case .waits(let flushed):
            deferred = true
            if case .waitsForDisk(let file, let offset, let count) = flushed { connection.load(file, offset: offset, count: count, for: self) }
            return nil
        }
    }

    /// The whole answer is out while the client still sends its request:
    /// it is asked to stop, without error (RFC 9113 section 8.1).
    private func answered() {
        if !requestEnded { connection.resetAfterAnswer(self) }
    }

    /// Whether bytes wait for the client's window (send_timeout applies).
    var isWaitingForClient: Bool { submitted && !body.isEmpty }

    /// The stream is gone: its exchange (if still answering) learns the client left.
    static let smallWindowWaitMilliseconds: UInt64 = 100
    /// The wait for a window worth a frame, and its end.
    private var windowTimer: TimerID = .none
    private var smallWindowDue = false

    func closed() {
        if windowTimer != .none { services.loop.cancel(windowTimer) }
        windowTimer = .none
        exchange?.cancel()
        exchange = nil
        body.removeAll()
    }
}
