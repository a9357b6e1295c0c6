import EdgeControls
import CacheStorage
import EventLoop
import HTTP1
import Logging
import TLS
import Telemetry
import Threads
import Transport

/// One client's HTTP/1.1 connection, plain or through TLS: reads and parses
/// requests in order, hands each to an `Exchange`, and writes answers in
/// the same order (pipelined requests wait in the input buffer until the
/// one before is done).
final class ClientConnection: IOHandler, BatchEndHandler, ClientTransport {
    let fd: Int32
    let peer: String
    /// The peer as an address (access lists, rate limits), read once.
    private(set) lazy var peerAddress = IPAddress(peer) ?? IPAddress(high: 0, low: 0)
    /// The response rules of the exchange answering now.
    var answerEdits: ResponseEdits?
    /// What it uses of its worker (buffers, draining, what exchanges use),
    /// its loop and counters, held without reference counting (the worker
    /// owns its connections and outlives them): a checked reference cost
    /// each of their reads a retain and a release.
    unowned(unsafe) let services: ConnectionServices
    unowned(unsafe) let loop: EventLoop
    unowned(unsafe) let counters: WorkerStats
    let settings: ConnectionSettings
    /// Who answers its requests (the proxy's exchanges, or the admin API).
    private let responder: Responder
    /// The socket's bytes, plain or through TLS; a TLS handshake comes
    /// first (ClientConnection+TLS).
    var stream: ByteStream

    // `input`, `output` (and the worker's `scratch`, in `services`) are touched on every
    // request, only on the worker's thread and never re-entrantly (the whole
    // suite, sanitizers included, passed with the checks on before they were
    // turned off): runtime exclusivity checks on them cost about 2 % of a
    // hit, so they are off for these three.
    @exclusivity(unchecked) var input: [UInt8] = []
    var inputStart = 0
    private var parser: RequestParser
    @exclusivity(unchecked) private(set) var output = OutputQueue()
    private(set) var exchange: (any ConnectionRequest)?
    /// The answer being passed on: its body's framing for this client and
    /// how much of the body was queued (ClientConnection+Answers).
    var answerFraming = ClientFraming.none
    var answerBodyBytes = 0, answerLimit = Int.max
    private(set) var body: RequestBodyReader?
    /// Where the connection stands and what it waits for, and its
    /// decisions (keep-alive, pipelining, the output bound, lingering).
    var flow: ConnectionFlow
    var closed: Bool { flow.closed }
    var interest: IOEvents = [.read]
    /// Every deadline (waiting for a request, its body, the client taking
    /// output, a lingering close), behind one timer armed for the
    /// earliest; `timerAt`: when it fires (0: not armed). The timer holds
    /// the connection `unowned` (close() cancels it): a weak reference
    /// gives it a side table, and every retain of it a slow path.
    var deadlines = ConnectionDeadlines()
    var timer: TimerID = .none
    var timerAt: UInt64 = 0
    private var processing = false

    /// Whether a client may begin HTTP/2 here by prior knowledge (h2c).
    private let http2: Bool
    /// No request was taken yet (an h2c preface may still come).
    private var fresh = true

    init(fd: Int32, peer: String, services: ConnectionServices, settings: ConnectionSettings, tls: TLSSession? = nil, http2: Bool = false) {
        self.fd = fd
        self.http2 = http2
        stream = ByteStream(fd: fd, tls: tls)
        self.peer = peer
        self.services = services
        loop = services.loop
        counters = services.counters
        self.settings = settings
        responder = services.responder
        parser = RequestParser(limits: settings.limits)
        flow = ConnectionFlow(outputBound: settings.outputBoundBytes, pipelineBound: settings.pipelineBufferBytes)
    }

    /// What the connection holds, for `flow`'s decisions. (`upload`: ask
    /// the exchange whether the upstream is behind with the request body.)
    @inline(__always)
    private func held(upload: Bool = true) -> ConnectionFlow.Held {
        ConnectionFlow.Held(output: output.pendingBytes, unparsed: unparsedCount, body: body != nil, exchange: exchange != nil,
                            uploadCongested: upload && (exchange?.isUploadCongested ?? false))
    }

    func start() {
        do {
            try loop.watch(fd, interest, self)
        } catch {
            services.logger.warning("cannot watch client socket: \(error)")
            close()
            return
        }
        setDeadline(.idle, after: !stream.isEncrypted ? settings.headerTimeoutMilliseconds : settings.handshakeTimeoutMilliseconds)
    }

    // MARK: events

    func ready(_ events: IOEvents) {
        if closed { return }
        if flow.lingering {
            drainWhileLingering()
            return
        }
        if !stream.isOpen {
            continueHandshake()
            return
        }
        if events.contains(.write) || events.contains(.error) { flush() }
        if closed { return }
        // (A TLS read may have waited for the socket to take a write.)
        if events.contains(.read) || events.contains(.hangup) || stream.wantsWrite { readAvailable() }
    }

    func readAvailable() {
        if flow.mayRead(held()) {
            var received = 0
            let reads = stream.readAvailable(into: &services.scratch, rounds: 16, received: &received,
                                             readMore: { flow.mayRead(held()) }) { input.append(contentsOf: $0) }
            WorkerStats.add(counters.receivedBytes, received)
            switch reads {
            case .waiting: break
            case .ended: flow.inputEnded()
            case .failed:
                abort()
                return
            }
        }
        processInput()
        // The client will send nothing more: an incomplete request is given
        // up (and its upstream transfer cancelled); with nothing left to
        // answer, the connection ends once its output is written.
        if flow.cannotFinish(held(upload: false)) {
            abort()
            return
        }
        if flow.endIfInputOver(held(upload: false)) {
            flush()
            if closed { return }
        }
        updateInterest()
    }

    var unparsedCount: Int { input.count - inputStart }

    /// Parses and dispatches as many requests as the state allows.
    private func processInput() {
        // A hit completes inside beginRequest; the loop below picks up the
        // next pipelined request instead of recursing.
        if processing { return }
        processing = true
        defer { processing = false }
        while !flow.closed && !flow.closeWhenFlushed {
            if body != nil {
                feedBody()
                if body != nil { return }
                continue
            }
            switch flow.next(held(upload: false)) {
            case .stop:
                return
            case .waitForOutput(let paused):
                // The next answer waits until the client reads (a write resumes).
                if paused { WorkerStats.bump(counters.outputPauses) }
                return
            case .parse:
                break
            }
            if fresh {
                fresh = false
                if http2 && !stream.isEncrypted, let preface = HTTP2Preface.match(input, from: inputStart) {
                    if preface { return switchToHTTP2() }
                    fresh = true  // a part of it: wait for the rest
                    return
                }
            }
            let result = input.withUnsafeBytes { raw in
                parser.parse(UnsafeRawBufferPointer(rebasing: raw[inputStart...]))
            }
            switch consume result {  // (consumed: the head moves on, not copied and destroyed)
            case .incomplete:
                return
            case .invalid(let error):
                WorkerStats.bump(counters.clientErrors)
                sendError(error.status, error.message, close: true)
                return
            case .complete(let head, let consumed):
                consume(consumed)
                parser.reset()
                beginRequest(head)
            }
        }
    }

    private func beginRequest(_ head: consuming RequestHead) {
        deadlines[.idle] = nil
        body = RequestBodyReader(head.framing, maxBodyBytes: settings.limits.maxBodyBytes)
        if let body, !body.isEmpty { setDeadline(.body, after: settings.bodyTimeoutMilliseconds) }
        if head.expectsContinue && head.minorVersion == 1 {
            output.append(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))
        }
        (answerFraming, answerBodyBytes, answerLimit) = (.none, 0, .max)
        switch responder {
        case .proxy(let parts):
            if let upgrade = Upgrade.requested(head) { return beginUpgrade(head, upgrade, parts) }
            let exchange = Exchange(head: consume head, sink: self, parts: parts)
            self.exchange = exchange
            exchange.start()
        case .handler(let make):
            let request = make(head, self)
            self.exchange = request
            request.start()
        }
        // What the exchange queued and did not write itself (a 100
        // Continue, a head while its body is awaited); every caller sets
        // the interest afterwards.
        if !output.isEmpty { write() }
    }

    /// Moves buffered body bytes to the exchange (or discards them when the
    /// answer did not need the body).
    private func feedBody() {
        guard var reader = body, unparsedCount > 0 || reader.isEmpty else { return }
        // Progress: the deadline moves (the armed timer stays, and finds it later).
        deadlines[.body] = loop.now() + settings.bodyTimeoutMilliseconds
        let outcome = input.withUnsafeBytes { raw in
            reader.feed(UnsafeRawBufferPointer(rebasing: raw[inputStart...])) { exchange?.requestBody($0) }
        }
        switch outcome {
        case .needMore(let consumed):
            consume(consumed)
            body = reader
        case .done(let consumed):
            consume(consumed)
            body = nil
            deadlines[.body] = nil
            exchange?.requestBodyEnd()
        case .invalid(let error):
            failRequest(error.status, error.message)
        }
        if body == nil && exchange == nil { setDeadline(.idle, after: settings.keepAliveTimeoutMilliseconds) }
    }

    private func consume(_ n: Int) {
        inputStart += n
        if inputStart == input.count {
            input.removeAll(keepingCapacity: input.capacity <= 64 * 1024)
            inputStart = 0
        } else if inputStart > 32 * 1024 {
            input.removeFirst(inputStart)
            inputStart = 0
        }
    }

    /// A broken or stalled body: answer if nothing was sent yet, then close.
    func failRequest(_ status: Int, _ message: String) {
        WorkerStats.bump(counters.clientErrors)
        body = nil
        deadlines[.body] = nil
        if let exchange, !exchange.responseStarted {
            exchange.cancel()
            self.exchange = nil
            sendError(status, message, close: true)
        } else {
            abort()
        }
    }

    // MARK: called by the exchange

    func enqueue(head: HTTP1Head) { output.append(head.bytes) }
    func enqueue(_ bytes: [UInt8]) { output.append(bytes) }
    func enqueue(copying buffer: UnsafeRawBufferPointer) { output.append(copying: buffer) }
    func enqueue(_ bytes: Bytes, from: Int = 0, to: Int? = nil) { output.append(bytes, from: from, to: to) }
    func enqueue(stored bytes: StoredBytes) { output.append(bytes) }

    /// Whether the upstream should pause until the client catches up.
    var isCongested: Bool { output.pendingBytes >= settings.outputBoundBytes }

    /// The exchange has queued its whole response.
    func exchangeFinished(keepAlive: Bool) {
        (exchange, answerEdits) = (nil, nil)
        let ending = flow.answered(keepAlive: keepAlive, draining: services.draining, held(upload: false))
        // Idle from the answer's end, before the client can have it (it
        // may ask again at once; a clock moved meanwhile counts).
        if !ending && body == nil { setDeadline(.idle, after: settings.keepAliveTimeoutMilliseconds) }
        // Pipelined requests answered in this batch leave in one writev; a
        // lone response goes at once (waiting for the batch adds latency).
        // The interest is set once, below.
        if unparsedCount > 0 { flushSoon() } else { write() }
        if closed { return }
        if !ending {
            processInput()
            if flow.endIfInputOver(held(upload: false)) { flush() }
        }
        if !closed { updateInterest() }
    }

    /// The upstream has taken every buffered body byte: read from the client again.
    func uploadDrained() {
        guard !closed else { return }
        processInput()
        updateInterest()
    }

    /// The response broke after its head was sent: the client cannot be told
    /// in-band, so the connection is closed.
    func exchangeAborted() {
        (exchange, answerEdits) = (nil, nil)
        flow.end()
        flush()
    }

    func sendError(_ status: Int, _ message: String, close: Bool) {
        output.append(ResponseSerializer.simple(status: status, body: message, close: close))
        if close { flow.end() }
        flush()
    }

    // MARK: writing


    /// Writes what is queued once the loop has dispatched its current batch
    /// of events: a response head and body produced in one batch (an
    /// upstream answer, pipelined hits) leave in one writev.
    func flushSoon() {
        guard !flow.flushQueued, !closed else { return }
        flow.flushQueued = true
        loop.atBatchEnd(self)
    }

    func batchEnded() {
        flow.flushQueued = false
        flush()
    }

    func flush() {
        if write() { updateInterest() }
    }

    /// Writes what is queued; false when the connection closed or began
    /// its lingering close meanwhile (its interest is set then).
    @discardableResult
    private func write() -> Bool {
        guard !closed, !flow.waitingForDisk else { return false }
        do {
            var sent = 0
            let flushed = try output.flush(to: stream, scratch: &services.scratch, sent: &sent)
            WorkerStats.add(counters.sentBytes, sent)
            if case .waitsForDisk(let file, let offset, let count) = flushed { load(file, offset: offset, count: count) }
            let done = if case .done = flushed { true } else { false }
            // send_timeout bookkeeping only while output is held up (a hit
            // that leaves at once reads no clock). Caught up: the next stall
            // is timed from its own start.
            if done {
                if deadlines[.send] != nil { deadlines[.send] = nil }
            } else if sent > 0 || deadlines[.send] == nil {
                setDeadline(.send, after: settings.sendTimeoutMilliseconds)
            }
            if flow.outputTaken(pending: output.pendingBytes) {
                processInput()
                if closed { return false }
            }
            switch flow.afterWrite(done: done, pending: output.pendingBytes) {
            case .finish:
                lingerThenClose()
                return false
            case .drained:
                exchange?.outputDrained()
            case .none:
                break
            }
        } catch {
            abort()
            return false
        }
        return !closed
    }

    /// A file's next bytes are read into the page cache on an I/O thread
    /// (sendfile would have waited for the disk on the loop); the output
    /// goes on once they are in. The connection is held until then.
    private func load(_ file: OpenFile, offset: Int, count: Int) {
        flow.waitingForDisk = true
        WorkerStats.bump(counters.offloadedReads)
        BlockingWork.shared.run({ FilePages.load(file.fd, offset: offset, count: count) }, on: loop) { [self] _ in
            file.cachedUntil = max(file.cachedUntil, offset + count)
            flow.waitingForDisk = false
            flush()
        }
    }

    private func updateInterest() {
        // Lingering reads (and only reads) until it closes: its interest is its own.
        guard !closed, !flow.lingering else { return }
        var wanted = flow.interest(held())
        if stream.wantsWrite { wanted.insert(.write) }
        if wanted != interest {
            interest = wanted
            loop.setInterest(fd, wanted)
        }
    }

    // MARK: closing (deadlines: ClientConnection+Deadlines)

    /// What a lingering close read and dropped (ClientConnection+Linger).
    var lingering = Lingering.afterAnswer

    /// Answered, and closing once the client has read it (`Lingering`).
    var isLingering: Bool { flow.lingering }

    /// Whether nothing is in progress (used when draining on shutdown).
    var isIdle: Bool { flow.lingering || exchange == nil && body == nil && output.isEmpty && unparsedCount == 0 }

    /// Shutting down: an idle connection closes now; one answering closes
    /// after its answer (which says Connection: close).
    func drain() { if isIdle { close() } }

    func abort() {
        exchange?.cancel()
        exchange = nil
        close()
    }

    func close() {
        guard !closed else { return }
        // close_notify, unless a lingering close sent it already.
        let notify = !flow.lingering
        flow.close()
        cancelTimer()
        exchange?.cancel()
        exchange = nil
        output.removeAll()
        loop.unwatch(fd)
        stream.close(notify: notify)
        services.connectionClosed(self)
    }
}
