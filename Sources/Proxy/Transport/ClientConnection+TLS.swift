import EventLoop
import HTTP1
#if canImport(Glibc)
import Glibc
#endif
import Telemetry
import Transport

extension ClientConnection {
    /// The TLS handshake's next step (within handshake_timeout, the idle
    /// deadline until it is done); requests are read once it is done. A
    /// client that speaks plain HTTP to this port gets a plain 400 that
    /// says so (as nginx answers), then the connection closes.
    func continueHandshake() {
        switch stream.open() {
        case .open:
            WorkerStats.bump(services.counters.tlsHandshakes)
            guard let tls = stream.tls else { break }
            if tls.resumed { WorkerStats.bump(services.counters.tlsResumed) }
            if tls.alpn == "h2" { return switchToHTTP2() }
        case .wantRead:
            return setInterest([.read])
        case .wantWrite:
            return setInterest([.read, .write])
        case .plainText:
            WorkerStats.bump(services.counters.plainOnTLS)
            return sendError(400, "this port speaks TLS (HTTPS): use https://", close: true)
        case .closed:
            return close()
        case .failed(let why):
            WorkerStats.bump(services.counters.tlsFailures)
            services.logger.debug("TLS handshake with \(peer) failed: \(why)")
            return close()
        }
        setDeadline(.idle, after: settings.headerTimeoutMilliseconds)
        setInterest([.read])
        // A request that came with the handshake's last flight is read now.
        readAvailable()
    }

    /// The connection speaks HTTP/2 from now on (ALPN h2, or the h2c
    /// preface): its stream, and what was read and not parsed, go to the
    /// worker for an HTTP/2 connection; this object lets go of the socket
    /// without closing it.
    func switchToHTTP2() {
        let rest = Array(input[inputStart...])
        flow.close()
        cancelTimer()
        loop.unwatch(fd)
        services.switchToHTTP2(replacing: self, stream: stream, input: rest, peer: peer, settings: settings)
    }

    /// An Upgrade request (WebSocket): tunnelled (`UpgradeTunnel`) where
    /// `websocket` allows, the socket going on with the tunnel; else 501.
    /// Answers still being written to this client (pipelined before it)
    /// must be out first.
    func beginUpgrade(_ head: RequestHead, _ upgrade: String, _ parts: ExchangeParts) {
        let configuration = parts.upstream.configuration
        let route = Upgrade.route(of: head, in: configuration.routes)
        // The access list and the rate limit hold for tunnels too.
        if let rules = route != nil ? route!.rules : configuration.edge, rules.gates,
           let refusal = EdgeGate.refusal(rules, request: head,
                                          client: EdgeGate.client(of: head, socket: peerAddress, trusted: configuration.trustedProxies),
                                          now: loop.wakeMicroseconds) {
            EdgeGate.count(refusal, in: counters)
            return sendError(refusal.status, refusal.message, close: true)
        }
        guard route?.websocket ?? configuration.websocket else {
            return sendError(501, "upgrades (\(upgrade)) are not tunnelled here (websocket = false)", close: true)
        }
        if !output.isEmpty { flush() }
        guard !closed, output.isEmpty else {
            return sendError(400, "an upgrade must wait for the answers before it", close: true)
        }
        let rest = Array(input[inputStart...])
        flow.close()
        cancelTimer()
        loop.unwatch(fd)
        let tunnel = UpgradeTunnel(fd: fd, peer: peer, stream: stream, request: head, upgrade: upgrade, input: rest,
                                   services: services)
        services.replace(self, with: tunnel)
        tunnel.start()
    }

    private func setInterest(_ wanted: IOEvents) {
        guard !closed, wanted != interest else { return }
        interest = wanted
        services.loop.setInterest(fd, wanted)
    }
}

/// The client connection preface of HTTP/2 (RFC 9113 section 3.4): h2c by
/// prior knowledge begins with it.
enum HTTP2Preface {
    static let bytes = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whether `input` from `start` is the preface (true), a beginning of
    /// it (false: wait for more), or not it (nil).
    static func match(_ input: [UInt8], from start: Int) -> Bool? {
        let available = input.count - start
        guard available > 0, input[start] == bytes[0] else { return nil }
        let n = min(available, bytes.count)
        for i in 0..<n where input[start + i] != bytes[i] { return nil }
        return n == bytes.count
    }
}
