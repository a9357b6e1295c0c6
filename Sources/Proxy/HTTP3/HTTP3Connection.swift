import EdgeControls
import CacheStorage
import EventLoop
import HTTP1
import HTTP2
import HTTP3
import HTTPHeaders
import Telemetry
import Threads

/// One client's HTTP/3 connection: datagrams from its `QUICListener` into
/// the `HTTP3ServerConnection` (QUIC, TLS, HTTP/3 framing), one
/// `RequestStream` per request as on HTTP/2, and the connection's timer.
/// The same exchange answers every stream; only the stream ids and the
/// error codes are HTTP/3's.
final class HTTP3Connection: BatchEndHandler, HTTP3ConnectionDelegate, ClientTransport, StreamCarrier {
    unowned(unsafe) let listener: QUICListener
    unowned(unsafe) let services: ConnectionServices
    var loop: EventLoop { services.loop }
    let settings: ConnectionSettings
    private let parts: ExchangeParts
    private(set) var quic: HTTP3ServerConnection!
    private(set) var streams: [Int64: RequestStream] = [:]
    let peer: String
    private(set) lazy var peerAddress = IPAddress(peer) ?? IPAddress(high: 0, low: 0)
    var tlsServerName: String? { quic.serverName }
    /// (Alt-Svc advertises HTTP/3; an HTTP/3 answer needs none.)
    var altService: String? { nil }
    private var ready: [RequestStream] = []
    private var flushQueued = false
    private var timer: TimerID = .none
    private var windowTimer: TimerID = .none
    private var timerAt: UInt64 = .max
    private(set) var closed = false
    private var draining = false
    private var handshakeCounted = false
    /// Streams reset per 10 s (rapid reset, as on HTTP/2): beyond the budget the connection ends.
    private var limits: HTTP2Limits

    init(listener: QUICListener, header: InitialPacket, from remote: DatagramPeer, retried: ConnectionID?,
         services: ConnectionServices, settings: ConnectionSettings, credentials: QUICCredentials) throws(HTTP3Error) {
        self.listener = listener
        self.services = services
        self.settings = settings
        parts = services.exchangeParts
        peer = remote.text
        limits = HTTP2Limits(now: services.loop.now())
        var quicSettings = HTTP3ServerConnection.Settings()
        quicSettings.maxConcurrentStreams = settings.http2MaxConcurrentStreams
        quicSettings.maxHeaderListSize = settings.limits.maxHeaderBytes
        quicSettings.idleTimeoutMilliseconds = settings.keepAliveTimeoutMilliseconds
        quicSettings.handshakeTimeoutMilliseconds = settings.handshakeTimeoutMilliseconds
        quic = try HTTP3ServerConnection(header: header, local: listener.localAddress, remote: remote, credentials: credentials,
                                         settings: quicSettings, delegate: self, retried: retried, now: Self.now())
    }

    /// QUIC's clock: monotonic nanoseconds.
    static func now() -> UInt64 { EventLoop.nowMicroseconds() * 1000 }

    // MARK: datagrams

    func receive(_ datagram: UnsafeRawBufferPointer, from peer: DatagramPeer) {
        guard !closed else { return }
        quic.receive(datagram, from: peer, now: Self.now())
        WorkerStats.add(services.counters.receivedBytes, datagram.count)
        if !handshakeCounted && quic.handshakeCompleted {
            handshakeCounted = true
            listener.handshakeCompleted(self)
        }
        // What the datagrams of this batch call for leaves once, at its end.
        writeSoon()
    }

    private func writeSoon() {
        guard !flushQueued, !closed else { return }
        flushQueued = true
        loop.atBatchEnd(self)
    }

    /// Packets out as far as the connection may send now; the timer set for its next moment.
    func write() {
        guard !closed else { return }
        quic.write(into: listener.sendBuffer, now: Self.now()) { bytes, segment, peer in
            WorkerStats.add(services.counters.sentBytes, bytes.count)
            return listener.send(bytes, segment: segment, to: peer)
        }
        if quic.ending != nil { return close() }
        armTimer()
    }

    private func armTimer() {
        let expiry = quic.expiry
        guard expiry != .max else { return }
        let now = Self.now()
        let delay = expiry > now ? (expiry - now + 999_999) / 1_000_000 : 0
        let at = loop.now() + delay
        if timer != .none {
            if at == timerAt { return }
            loop.cancel(timer)
        }
        timerAt = at
        timer = loop.schedule(after: delay) { [weak self] in
            guard let self, !self.closed else { return }
            self.timer = .none
            self.quic.handleExpiry(now: Self.now())
            self.write()
        }
    }

    // MARK: output at the batch's end

    func batchEnded() {
        flushQueued = false
        let streams = ready
        ready.removeAll(keepingCapacity: true)
        for stream in streams where !closed {
            switch stream.takeSubmission() {
            case .respond(let head, let body)?: quic.respond(stream.id, head: head, body: body)
            case .resume?: quic.resume(stream.id)
            case nil: break
            }
        }
        write()
        watchWindows()
    }

    /// send_timeout per stream: a body the client's flow control holds
    /// back (its window never reopened) is cancelled once no byte of it
    /// left for that long, as HTTP/2's; the others go on.
    private func watchWindows() {
        guard windowTimer == .none, !closed, streams.values.contains(where: \.isWaitingForClient) else { return }
        windowTimer = loop.schedule(after: settings.sendTimeoutMilliseconds) { [weak self] in
            guard let self, !self.closed else { return }
            self.windowTimer = .none
            let now = self.loop.now(), limit = self.settings.sendTimeoutMilliseconds
            for stream in self.streams.values where stream.isWaitingForClient && now - stream.lastProgress >= limit {
                WorkerStats.bump(self.services.counters.sendTimeouts)
                self.resetStream(stream, code: .cancel)
            }
            self.watchWindows()
        }
    }

    func streamHasOutput(_ stream: RequestStream) {
        ready.append(stream)
        writeSoon()
    }

    // MARK: HTTP3ConnectionDelegate

    func streamOpened(_ id: Int64) -> Bool {
        // Draining: a stream the client opened after GOAWAY is rejected alone (the others finish).
        guard !draining else {
            quic.reset(id, code: HTTP3Code.requestRejected)
            return true
        }
        let stream = RequestStream(id: id, connection: self, version: 30, maxBodyBytes: settings.limits.maxBodyBytes,
                                   outputBound: settings.outputBoundBytes)
        streams[id] = stream
        WorkerStats.bump(services.counters.http3Streams)
        return true
    }

    func field(_ id: Int64, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool {
        streams[id]?.field(name: name, value: value, limit: settings.limits.maxHeaderBytes) ?? true
    }

    func trailerField(_ id: Int64, bytes: Int) -> Bool {
        streams[id]?.trailerField(bytes: bytes, limit: settings.limits.maxHeaderBytes) ?? true
    }

    func headersEnded(_ id: Int64, endStream: Bool) {
        streams[id]?.headersEnded(endStream: endStream, limits: settings.limits, parts: parts)
    }

    func data(_ id: Int64, _ bytes: UnsafeRawBufferPointer) {
        guard let stream = streams[id] else { return quic.consume(id, bytes.count) }
        stream.data(bytes)
        if !(stream.exchange?.isUploadCongested ?? false) { acknowledge(stream) }
    }

    func bodyEnded(_ id: Int64) { streams[id]?.bodyEnded() }

    func streamClosed(_ id: Int64, errorCode: UInt64) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.closed()
        // Body bytes received and not yet given back still count against the connection's window.
        quic.consume(id, stream.unacknowledged)
        stream.unacknowledged = 0
        if draining && streams.isEmpty { quic.shutDown() }
    }

    /// Streams the client resets, as in rapid reset: past the budget
    /// (HTTP/2's, 200 per 10 s) the connection ends with H3_EXCESSIVE_LOAD.
    func streamReset(_ id: Int64) {
        WorkerStats.bump(services.counters.http3Resets)
        if limits.countReset(now: loop.now()) {
            services.logger.debug("HTTP/3 connection from \(peer): too many streams reset; closing")
            quic.shutDown(code: HTTP3Code.excessiveLoad)
            writeSoon()
        }
    }

    func body(_ id: Int64, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool)? {
        guard let stream = streams[id] else { return (0, true) }
        return stream.pull(into: buffer)
    }

    func connectionIDIssued(_ id: ConnectionID) { listener.route(id, to: self) }
    func connectionIDRetired(_ id: ConnectionID) { listener.unroute(id) }

    // MARK: StreamCarrier

    func resetStream(_ stream: RequestStream, code: HTTP2Error.Code) {
        let h3: UInt64
        switch code {
        case .noError: h3 = HTTP3Code.noError
        case .refusedStream: h3 = HTTP3Code.requestRejected
        case .cancel: h3 = HTTP3Code.requestCancelled
        default: h3 = HTTP3Code.internalError
        }
        quic.reset(stream.id, code: h3)
        streamHasOutput(stream)
    }

    func acknowledge(_ stream: RequestStream) {
        quic.consume(stream.id, stream.unacknowledged)
        stream.unacknowledged = 0
        streamHasOutput(stream)
    }

    func sendInterim(_ stream: RequestStream, status: Int, fields: HeaderFields) {
        quic.informational(stream.id, head: ClientHead.interim(status: status, fields: fields, as: HTTP2Head.self).block)
        streamHasOutput(stream)
    }

    func sendContinue(_ stream: RequestStream) {
        quic.informational(stream.id, head: HeaderBlock(status: 100))
        streamHasOutput(stream)
    }

    func resetAfterAnswer(_ stream: RequestStream) { quic.stopReading(stream.id) }

    /// (QUIC's windows are the library's: a stream waits for bytes only.)
    func waitsForWindow(_ stream: RequestStream) {}

    func resume(_ stream: RequestStream) {
        quic.resume(stream.id)
        streamHasOutput(stream)
    }

    func openStream(_ id: Int64) -> RequestStream? { closed ? nil : streams[id] }

    // MARK: ClientTransport

    var isIdle: Bool { streams.isEmpty }

    /// Shutting down: GOAWAY; streams already taken finish, then the connection closes.
    func drain() {
        guard !closed, !draining else { return }
        draining = true
        quic.goAway()
        write()
        // An idle one closes now, its GOAWAY first (the close is the next packet).
        if streams.isEmpty {
            quic.shutDown()
            write()
        }
    }

    func abort() { close() }

    func close() {
        guard !closed else { return }
        closed = true
        if timer != .none { loop.cancel(timer) }
        if windowTimer != .none { loop.cancel(windowTimer) }
        (timer, windowTimer) = (.none, .none)
        for stream in streams.values { stream.closed() }
        streams.removeAll()
        ready.removeAll()
        listener.connectionClosed(self)
    }
}
