import EdgeControls
import EventLoop
import HTTPHeaders
#if canImport(Glibc)
import Glibc
#endif
import HTTP1
import HTTP2
import Logging
import Telemetry
import Transport

/// One client's HTTP/2 connection (h2 by ALPN over TLS, or h2c by prior knowledge),
/// taken over from the `ClientConnection` that saw it begin: bytes between the socket
/// (or TLS) and the `HTTP2Session`, one `RequestStream` per request, and the limits
/// that keep one client from holding a worker (`HTTP2Limits`).
final class HTTP2Connection: IOHandler, BatchEndHandler, HTTP2SessionDelegate, ClientTransport, StreamCarrier {
    let fd: Int32
    let peer: String
    private(set) lazy var peerAddress = IPAddress(peer) ?? IPAddress(high: 0, low: 0)
    unowned(unsafe) let services: ConnectionServices
    unowned(unsafe) let loop: EventLoop
    let settings: ConnectionSettings
    private let parts: ExchangeParts
    /// The socket's bytes, plain (h2c) or through TLS (h2).
    private let stream: ByteStream
    /// The TLS server name of the connection (nil: plain), for the access log.
    var tlsServerName: String? { stream.tls?.serverName }
    var altService: String? { settings.altService }
    private(set) var session: HTTP2Session!
    private(set) var streams: [Int32: RequestStream] = [:]
    /// Bytes the session produced that the socket has not taken yet (the session is asked for more once they are gone).
    private var pending: [UInt8] = []
    private var pendingStart = 0
    /// Whether bytes the session produced wait for the socket.
    var outputWaits: Bool { pendingStart < pending.count }
    private var interest: IOEvents = [.read]
    private(set) var closed = false
    private var flushQueued = false
    /// Streams with output to submit at the batch's end.
    private var ready: [RequestStream] = []
    /// Streams answered whole while their request still comes: reset (NO_ERROR) once the answer's last frame is queued.
    private var answeredEarly: [Int32] = []
    /// Streams that wait for the client to open its window.
    var windowWaiters: [Int32] = []
    private var limits: HTTP2Limits
    private var draining = false
    /// Set once the session is over and its last bytes are out (`Lingering`).
    private(set) var lingering: Lingering?
    /// Deadlines (HTTP2Connection+Deadlines): the first request
    /// (header_timeout), idleness (keepalive_timeout), output not taken
    /// (send_timeout), a stream's window held shut (send_timeout), the
    /// lingering close; on one timer (`DeadlineKeeper`).
    var deadlines = ConnectionDeadlines()
    var timer: TimerID = .none
    var timerAt: UInt64 = 0
    var servedAny = false

    init(stream: ByteStream, peer: String, services: ConnectionServices, settings: ConnectionSettings) {
        fd = stream.fd
        self.stream = stream
        self.peer = peer
        self.services = services
        loop = services.loop
        self.settings = settings
        parts = services.exchangeParts
        limits = HTTP2Limits(now: services.loop.now())
    }

    /// Starts serving; `initial`: bytes already read (the preface, and what followed it).
    func start(initial: [UInt8]) {
        var sessionSettings = HTTP2Session.Settings()
        sessionSettings.maxConcurrentStreams = settings.http2MaxConcurrentStreams
        sessionSettings.maxHeaderListSize = settings.limits.maxHeaderBytes
        do {
            session = try HTTP2Session(settings: sessionSettings, delegate: self)
            try loop.watch(fd, interest, self)
        } catch {
            services.logger.warning("cannot start an HTTP/2 connection: \(error)")
            return close()
        }
        WorkerStats.bump(services.counters.http2Connections)
        if !initial.isEmpty { initial.withUnsafeBytes { receive($0) } }
        if !closed { write() }
        if !closed { setDeadline(.idle, after: settings.headerTimeoutMilliseconds) }
    }

    // MARK: events

    func ready(_ events: IOEvents) {
        guard !closed else { return }
        if lingering != nil {
            if lingering!.discard(stream, into: &services.scratch) { close() }
            return
        }
        if events.contains(.write) || events.contains(.error) { write() }
        if !closed && (events.contains(.read) || events.contains(.hangup) || stream.wantsWrite) { readAvailable() }
    }

    private func readAvailable() {
        var received = 0
        let reads = stream.readAvailable(into: &services.scratch, rounds: 16, received: &received,
                                         readMore: { !closed }) { receive($0) }
        WorkerStats.add(services.counters.receivedBytes, received)
        if closed { return }
        switch reads {
        case .waiting: write()
        case .ended: inputEnded()
        case .failed: abort()
        }
    }

    private func receive(_ bytes: UnsafeRawBufferPointer) {
        // An idle connection's bytes (a PING) keep it open: its deadline moves.
        if streams.isEmpty { idleFromNow() }
        do {
            try session.receive(bytes)
        } catch {
            // A protocol error or a flood the library caught: its GOAWAY is queued.
            WorkerStats.bump(services.counters.http2Refusals)
            services.logger.debug("HTTP/2 connection from \(peer) ended: \(error)")
            write()
            close()
        }
    }

    /// The client closed its side: streams still answering are cancelled.
    private func inputEnded() {
        write()
        close()
    }

    // MARK: writing

    func batchEnded() {
        flushQueued = false
        let streams = ready
        ready.removeAll(keepingCapacity: true)
        for stream in streams where !closed {
            switch stream.takeSubmission() {
            case .respond(let head, let body)?: session.respond(Self.id(stream), head: head, body: body)
            case .resume?: session.resume(Self.id(stream))
            case nil: break
            }
            if stream.isWaitingForClient { watchWindow(stream) }
        }
        write()
    }

    func streamHasOutput(_ stream: RequestStream) {
        ready.append(stream)
        guard !flushQueued, !closed else { return }
        flushQueued = true
        loop.atBatchEnd(self)
    }

    /// Writes what is pending, then what the session has, until the socket
    /// is full; then sets the interest, and closes once the session is over.
    private func write() {
        guard !closed else { return }
        var wrote = false
        defer { if !closed && lingering == nil { outputMoved(wrote) } }
        do {
            while true {
                if pendingStart < pending.count {
                    let written = try pending[pendingStart...].withUnsafeBytes { (bytes) throws(SystemError) -> Int? in try stream.write(bytes) }
                    guard let written else { break }
                    pendingStart += written
                    WorkerStats.add(services.counters.sentBytes, written)
                    wrote = true
                    continue
                }
                pending.removeAll(keepingCapacity: pending.capacity <= 64 << 10)
                pendingStart = 0
                var produced = false
                try session.send { bytes in
                    pending.append(contentsOf: bytes)
                    produced = true
                    return pending.count < 64 << 10
                }
                if !answeredEarly.isEmpty {
                    for id in answeredEarly { session.reset(id, code: .noError) }
                    answeredEarly.removeAll()
                    produced = true
                }
                if !produced { break }
            }
        } catch {
            return abort()
        }
        if pendingStart >= pending.count && !session.wantsRead && !session.wantsWrite { return lingerThenClose() }
        if draining && streams.isEmpty && pendingStart >= pending.count { return lingerThenClose() }
        let wanted: IOEvents = pendingStart < pending.count || stream.wantsWrite ? [.read, .write] : [.read]
        if wanted != interest {
            interest = wanted
            loop.setInterest(fd, wanted)
        }
    }

    /// Everything is written: the close waits until the client has read it
    /// (`Lingering`), bounded; its timer replaces the deadlines.
    private func lingerThenClose() {
        guard lingering == nil, !closed else { return }
        lingering = .afterSession
        stream.shutdown()
        deadlines = ConnectionDeadlines()
        setDeadline(.linger, after: lingering!.milliseconds)
        if interest != [.read] {
            interest = [.read]
            loop.setInterest(fd, interest)
        }
    }

    // MARK: HTTP2SessionDelegate

    func streamOpened(_ id: Int32) -> Bool {
        // Past the advertised limit: refused alone (RFC 9113 section 5.1.2),
        // counted as a reset so that a client cannot refuse streams forever.
        guard streams.count < settings.http2MaxConcurrentStreams else {
            WorkerStats.bump(services.counters.http2Resets)
            if limits.countReset(now: loop.now()) { enhanceYourCalm("refused streams") }
            return false
        }
        servedAny = true
        deadlines[.idle] = nil
        let stream = RequestStream(id: Int64(id), connection: self, maxBodyBytes: settings.limits.maxBodyBytes,
                                 outputBound: settings.outputBoundBytes)
        streams[id] = stream
        WorkerStats.bump(services.counters.http2Streams)
        return true
    }

    func trailerField(_ id: Int32, bytes: Int) -> Bool {
        streams[id]?.trailerField(bytes: bytes, limit: settings.limits.maxHeaderBytes) ?? true
    }

    func field(_ id: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        streams[id]?.field(name: name, value: value, limit: settings.limits.maxHeaderBytes) ?? true
    }

    func headersEnded(_ id: Int32, endStream: Bool) {
        guard let stream = streams[id] else { return }
        if draining { return resetStream(stream, code: .refusedStream) }
        stream.headersEnded(endStream: endStream, limits: settings.limits, parts: parts)
    }

    func data(_ id: Int32, _ bytes: UnsafeRawBufferPointer) {
        // (Bytes for a stream already gone still count against the
        // connection's window: it reopens, or it would shut for good.)
        guard let stream = streams[id] else { return session.consumeConnection(bytes.count) }
        stream.data(bytes)
        if !(stream.exchange?.isUploadCongested ?? false) { acknowledge(stream) }
    }

    func bodyEnded(_ id: Int32) { streams[id]?.bodyEnded() }

    func streamClosed(_ id: Int32, errorCode: UInt32) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.closed()
        if streams.isEmpty { idleFromNow() }
        session.consumeConnection(stream.unacknowledged)
        stream.unacknowledged = 0
        if errorCode != 0 {
            WorkerStats.bump(services.counters.http2Resets)
            if limits.countReset(now: loop.now()) { enhanceYourCalm("streams reset") }
        }
    }

    func controlFrame(type: UInt8, stream: Int32, increment: Int32) {
        let isWindowUpdate = type == 8
        if isWindowUpdate && !windowWaiters.isEmpty {
            // Streams that waited for a window worth a frame try again.
            for id in windowWaiters { session.resume(id) }
            windowWaiters.removeAll()
        }
        // A window opened a few bytes at a time counts as much as a PING.
        if isWindowUpdate && increment >= HTTP2Limits.smallWindowIncrement { return }
        if limits.countControl(now: loop.now()) { enhanceYourCalm("control frames") }
    }

    func body(_ id: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool)? {
        // (Not `streams[id]?.pull(...) ?? ...`: that would read "wait" as "gone".)
        guard let stream = streams[id] else { return (0, true) }
        return stream.pull(into: buffer)
    }

    // MARK: what streams ask

    /// A stream's id as nghttp2 has it (every id it made fits).
    static func id(_ stream: RequestStream) -> Int32 { Int32(truncatingIfNeeded: stream.id) }

    func resetStream(_ stream: RequestStream, code: HTTP2Error.Code) {
        session.reset(Self.id(stream), code: code)
        streamHasOutput(stream)
    }

    /// The client may send as many more body bytes as the upstream took.
    func acknowledge(_ stream: RequestStream) {
        session.consume(Self.id(stream), stream.unacknowledged)
        stream.unacknowledged = 0
        streamHasOutput(stream)
    }

    func sendInterim(_ stream: RequestStream, status: Int, fields: HeaderFields) {
        session.informational(Self.id(stream), head: ClientHead.interim(status: status, fields: fields, as: HTTP2Head.self).block)
        streamHasOutput(stream)
    }

    func sendContinue(_ stream: RequestStream) {
        session.informational(Self.id(stream), head: HeaderBlock(status: 100))
        streamHasOutput(stream)
    }

    func resetAfterAnswer(_ stream: RequestStream) {
        if !answeredEarly.contains(Self.id(stream)) { answeredEarly.append(Self.id(stream)) }
    }

    /// A flood or abuse: GOAWAY (ENHANCE_YOUR_CALM), then the connection ends.
    private func enhanceYourCalm(_ what: String) {
        guard !closed else { return }
        WorkerStats.bump(services.counters.http2Refusals)
        services.logger.debug("HTTP/2 connection from \(peer): too many \(what); GOAWAY")
        session.goAway(.enhanceYourCalm, graceful: false)
        write()
        close()
    }

    // MARK: ClientTransport

    var isIdle: Bool { streams.isEmpty && pendingStart >= pending.count }

    /// Shutting down: GOAWAY, streams already taken finish, then the close.
    func drain() {
        guard !closed, !draining else { return }
        draining = true
        session.goAway(.noError, graceful: true)
        write()
    }

    func abort() { close() }

    func close() {
        guard !closed else { return }
        closed = true
        cancelTimer()
        for stream in streams.values { stream.closed() }
        streams.removeAll()
        ready.removeAll()
        loop.unwatch(fd)
        stream.close(notify: lingering == nil)
        services.connectionClosed(self)
    }
}
