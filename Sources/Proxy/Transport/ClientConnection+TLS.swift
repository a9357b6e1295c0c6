import EventLoop
#if canImport(Glibc)
import Glibc
#endif
import TLS
import Telemetry

extension ClientConnection {
    /// Reads what the client sent: decrypted through TLS, or as it came.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int? {
        guard let tls else { return try Socket.read(fd, into: buffer) }
        do {
            return try tls.read(into: buffer)
        } catch {
            throw SystemError(errno: EPROTO, operation: "TLS read (\(error))")
        }
    }

    /// The TLS handshake's next step (within handshake_timeout, the idle
    /// deadline until it is done); requests are read once it is done.
    func continueHandshake(_ tls: TLSSession) {
        guard plainHTTPChecked() else { return }
        switch tls.handshake() {
        case .done:
            WorkerStats.bump(services.counters.tlsHandshakes)
            if tls.resumed { WorkerStats.bump(services.counters.tlsResumed) }
            if tls.alpn == "h2" { return services.switchToHTTP2(self) }
            setDeadline(.idle, after: settings.headerTimeoutMilliseconds)
            setInterest([.read])
            // A request that came with the handshake's last flight is read now.
            readAvailable()
        case .wantRead:
            setInterest([.read])
        case .wantWrite:
            setInterest([.read, .write])
        case .failed(let why):
            WorkerStats.bump(services.counters.tlsFailures)
            services.logger.debug("TLS handshake with \(peer) failed: \(why)")
            close()
        }
    }

    /// Before the handshake: a TLS connection starts with a handshake
    /// record (0x16). A client that speaks plain HTTP to this port gets a
    /// plain 400 that says so (as nginx answers), then the connection
    /// closes. False while nothing has arrived (or it was answered).
    private func plainHTTPChecked() -> Bool {
        if tlsSniffed { return true }
        let first: Int?
        do {
            first = try Socket.peek(fd)
        } catch {
            close()
            return false
        }
        guard let first else { return false }
        if first == 0x16 {
            tlsSniffed = true
            return true
        }
        if first < 0 {
            close()
            return false
        }
        WorkerStats.bump(services.counters.plainOnTLS)
        self.tls = nil
        sendError(400, "this port speaks TLS (HTTPS): use https://", close: true)
        return false
    }

    /// Hands the socket over (to HTTP/2): what was read and not parsed, and
    /// the TLS session; this object lets go of the socket without closing it.
    func detach() -> (input: [UInt8], tls: TLSSession?) {
        let rest = Array(input[inputStart...])
        flow.close()
        loop.cancel(timer)
        timer = .none
        loop.unwatch(fd)
        let session = tls
        tls = nil
        return (rest, session)
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
