import EventLoop
import HTTP1
import Telemetry
import Transport
import Upstream

/// An upgraded HTTP/1.1 connection (WebSocket, or any protocol the client
/// and the upstream agree on): the request goes to a server of the
/// route's pool on a connection of its own (`UpstreamTunnel`) with its
/// Upgrade and Connection fields; the upstream's 101 goes to the client,
/// then bytes flow both ways, each side held back while the other is 256
/// KiB behind, until either side closes or neither sends anything for
/// upstream_idle_timeout. Nothing of it is stored or collapsed. Any other
/// answer is passed on, and the connection closed after it.
final class UpgradeTunnel: IOHandler, ClientTransport, UpstreamTunnelDelegate, AnswerCarrier {
    let fd: Int32
    let peer: String
    private let stream: ByteStream
    unowned(unsafe) let services: ConnectionServices
    private let parts: ExchangeParts
    private let request: RequestHead
    private let server: String
    private let tunnel: UpstreamTunnel
    private var access: AccessRecord

    enum Phase { case connecting, awaitingHead, piping, closed }
    private(set) var phase = Phase.connecting
    /// Bytes on their way: the request (then the client's) to the
    /// upstream, the upstream's to the client, each from its start offset.
    private var toUpstream: [UInt8], sentUp = 0
    private var toClient: [UInt8] = [], sentDown = 0
    private var head: [UInt8] = []
    /// 101: bytes both ways; otherwise the answer alone, `remaining` bytes of
    /// its body still to come (nil: until the upstream closes).
    private var switched = false
    private var remaining: Int?
    private var clientEnded = false, upstreamEnded = false
    private var clientInterest: IOEvents = []
    private var lastActivity: UInt64
    private var timer: TimerID = .none
    private(set) var answerBodyBytes = 0
    private var opened: UInt64 = 0

    static let bound = 256 << 10

    /// `input`: what the client sent after the request head (its first frames).
    init(fd: Int32, peer: String, stream: ByteStream, request: RequestHead, upgrade: String, input: [UInt8],
         services: ConnectionServices) {
        (self.fd, self.peer, self.stream, self.request, self.services) = (fd, peer, stream, request, services)
        parts = services.exchangeParts
        let upstream = parts.upstream
        let configuration = upstream.configuration
        let pool = configuration.pool(named: Upgrade.route(of: request, in: configuration.routes)?.upstream)
        let chosen = pool.pick(key: request.pathAndQuery, now: upstream.loop.now())
        chosen.started()
        server = chosen.address
        tunnel = UpstreamTunnel(loop: upstream.loop, settings: configuration.upstream, url: chosen.base)
        let forwarded = UpstreamHeaders.forward(request, peer: peer, forwardHost: configuration.forwardHost,
                                                preserveHost: configuration.preserveHost, passed: configuration.passRequestHeaders)
        toUpstream = Upgrade.upstreamRequest(request, forwarded: forwarded, host: chosen.address, upgrade: upgrade) + input
        access = AccessRecord(logging: parts.log.recordsRequests)
        lastActivity = upstream.loop.now()
    }

    private var loop: EventLoop { services.loop }
    private var idleMilliseconds: UInt64 { UInt64(parts.upstream.configuration.upstream.idleTimeoutSeconds) * 1000 }

    func start() {
        opened = EventLoop.nowMicroseconds()
        tunnel.start(delegate: self)
        armTimer(after: UInt64(parts.upstream.configuration.upstream.responseTimeoutMilliseconds))
    }

    // MARK: the upstream

    func tunnelConnected() {
        guard phase == .connecting else { return }
        phase = .awaitingHead
        pump()
    }

    func tunnelFailed(_ error: UpstreamError) {
        guard phase == .connecting || phase == .awaitingHead else { return close() }
        let timedOut = if case .timedOut = error { true } else { false }
        answerHere(timedOut ? 504 : 502, "upstream upgrade failed: \(error.message)")
    }

    func tunnelReady(_ events: IOEvents) { pump() }

    // MARK: the client

    func ready(_ events: IOEvents) {
        if phase == .closed { return }
        if events.contains(.error) { return close() }
        pump()
    }

    /// Moves what can move, each way, then says what to wait for.
    private func pump() {
        guard phase != .closed else { return }
        if phase != .connecting {
            guard sendUpstream(), receiveUpstream(), writeClient() else { return close() }
            if switched {
                guard readClient(), sendUpstream() else { return close() }
            }
        }
        // Either side over, and what it sent passed on: the tunnel ends.
        if (upstreamEnded && sentDown == toClient.count) || (clientEnded && sentUp == toUpstream.count && switched) {
            return close()
        }
        var client: IOEvents = []
        if switched && !clientEnded && toUpstream.count - sentUp < Self.bound { client.insert(.read) }
        if sentDown < toClient.count || stream.wantsWrite { client.insert(.write) }
        if client != clientInterest {
            // Watched only while something is wanted of it (see `UpstreamTunnel.want`).
            if client.isEmpty {
                loop.unwatch(fd)
            } else if clientInterest.isEmpty {
                do { try loop.watch(fd, client, self) } catch { return close() }
            } else {
                loop.setInterest(fd, client)
            }
            clientInterest = client
        }
        var upstream: IOEvents = []
        if phase != .connecting && !upstreamEnded && toClient.count - sentDown < Self.bound { upstream.insert(.read) }
        if sentUp < toUpstream.count { upstream.insert(.write) }
        tunnel.want(upstream)
    }

    private func sendUpstream() -> Bool {
        while sentUp < toUpstream.count {
            guard let n = toUpstream.withUnsafeBytes({ tunnel.send(UnsafeRawBufferPointer(rebasing: $0[sentUp...])) }) else { return false }
            if n == 0 { break }
            moved(n, &sentUp, &toUpstream)
        }
        return true
    }

    private func receiveUpstream() -> Bool {
        while !upstreamEnded && toClient.count - sentDown < Self.bound {
            let got = services.scratch.withUnsafeMutableBytes { tunnel.receive(into: $0) }
            switch got {
            case .wouldBlock: return true
            case .closed:
                upstreamEnded = true
                return switched || phase == .piping || answerHere(502, "the upstream closed without answering the upgrade")
            case .failed(let why):
                upstreamEnded = true
                return phase == .piping || answerHere(502, "upstream upgrade failed: \(why)")
            case .bytes(let n):
                lastActivity = loop.now()
                WorkerStats.add(services.counters.upgradedBytes, n)
                services.scratch.withUnsafeBytes { took(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                if phase == .closed { return false }
            }
        }
        return true
    }

    /// Upstream bytes: the answer's head first, then what follows it.
    private func took(_ bytes: UnsafeRawBufferPointer) {
        guard phase == .awaitingHead else { return pass(bytes) }
        head.append(contentsOf: bytes)
        switch Upgrade.responseHead(head[...]) {
        case .incomplete: return
        case .invalid(let why): _ = answerHere(502, why)
        case .complete(let status, let headLength, let bodyLength):
            phase = .piping
            switched = status == 101
            if switched { WorkerStats.bump(services.counters.upgrades) }
            remaining = bodyLength
            access.note(status: status, result: .pass, queuedWhole: false, cacheStatus: [], bodyBytes: nil)
            access.upstream = (status, Int(EventLoop.nowMicroseconds() &- opened), server)
            armTimer(after: idleMilliseconds)
            toClient.append(contentsOf: head[0..<headLength])
            let rest = head[headLength...]
            head = []
            rest.withUnsafeBytes { pass($0) }
        }
    }

    private func pass(_ bytes: UnsafeRawBufferPointer) {
        var bytes = bytes
        if let left = remaining {
            bytes = UnsafeRawBufferPointer(rebasing: bytes.prefix(left))
            remaining = left - bytes.count
            if remaining == 0 { upstreamEnded = true }
        }
        answerBodyBytes += bytes.count
        toClient.append(contentsOf: bytes)
    }

    private func writeClient() -> Bool {
        while sentDown < toClient.count {
            let n: Int?
            do {
                n = try toClient.withUnsafeBytes { (all) throws(SystemError) -> Int? in
                    try stream.write(UnsafeRawBufferPointer(rebasing: all[sentDown...]))
                }
            } catch {
                return false
            }
            guard let n, n > 0 else { break }
            WorkerStats.add(services.counters.sentBytes, n)
            moved(n, &sentDown, &toClient)
        }
        return true
    }

    private func readClient() -> Bool {
        while !clientEnded && toUpstream.count - sentUp < Self.bound {
            let n: Int?
            do {
                n = try services.scratch.withUnsafeMutableBytes { (buffer) throws(SystemError) -> Int? in try stream.read(into: buffer) }
            } catch {
                return false
            }
            guard let n else { return true }
            if n == 0 {
                clientEnded = true
                return true
            }
            lastActivity = loop.now()
            WorkerStats.add(services.counters.receivedBytes, n)
            WorkerStats.add(services.counters.upgradedBytes, n)
            services.scratch.withUnsafeBytes { toUpstream.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return true
    }

    /// `n` more bytes of `buffer` went out; a buffer sent whole starts again.
    private func moved(_ n: Int, _ offset: inout Int, _ buffer: inout [UInt8]) {
        lastActivity = loop.now()
        offset += n
        if offset == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 64 << 10)
            offset = 0
        }
    }

    /// An answer made here before anything of the upstream's was sent
    /// (502, 504); the connection closes after it. Always false (what a
    /// failed step returns).
    @discardableResult
    private func answerHere(_ status: Int, _ message: String) -> Bool {
        WorkerStats.bump(parts.upstream.counters.upstreamErrors)
        parts.upstream.logger.warning("\(message) (\(request.method) \(request.target) to \(server))")
        tunnel.close()
        access.note(status: status, result: .other, queuedWhole: true, cacheStatus: [], bodyBytes: message.utf8.count + 1)
        phase = .piping
        upstreamEnded = true
        switched = false
        (toUpstream, sentUp) = ([], 0)
        toClient = ResponseSerializer.simple(status: status, body: message, close: true)
        sentDown = 0
        _ = writeClient()
        if sentDown == toClient.count { close() } else { pump() }
        return false
    }

    // MARK: time

    private func armTimer(after milliseconds: UInt64) {
        loop.cancel(timer)
        timer = loop.schedule(after: milliseconds) { [unowned self] in self.timerFired() }
    }

    /// Before the answer's head: upstream_timeout (504). After it: idle
    /// for upstream_idle_timeout both ways, closed.
    private func timerFired() {
        timer = .none
        guard phase != .closed else { return }
        if phase == .connecting || phase == .awaitingHead {
            _ = answerHere(504, "the upstream did not answer the upgrade within upstream_timeout")
            return
        }
        let idle = loop.now() &- lastActivity
        if idle >= idleMilliseconds { return close() }
        armTimer(after: idleMilliseconds - idle)
    }

    // MARK: ClientTransport, AnswerCarrier

    var isIdle: Bool { false }
    /// A drain lets the tunnel run until drain_timeout, then `abort`.
    func drain() {}
    func abort() { close() }

    func close() {
        guard phase != .closed else { return }
        if phase == .connecting || phase == .awaitingHead { access.note(status: 0, result: .other, queuedWhole: false, cacheStatus: [], bodyBytes: 0) }
        phase = .closed
        loop.cancel(timer)
        if !clientInterest.isEmpty { loop.unwatch(fd) }
        stream.close(notify: true)
        tunnel.close()
        let kept = tunnel
        loop.execute { _ = kept }  // (it may be calling us now: let go on a later turn)
        if access.takeTurn() { parts.log.record(request, access, sentBy: self) }
        services.connectionClosed(self)
    }

    func loggedVersion(of request: RequestHead) -> Int { 11 }
    var tlsServerName: String? { stream.tls?.serverName }
}
