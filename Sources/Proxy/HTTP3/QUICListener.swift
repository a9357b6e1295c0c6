import EventLoop
import HTTP3
import Logging
import Telemetry
import Threads

/// What a QUIC listener is given by its worker.
protocol QUICListenerOwner: AnyObject {
    var services: ConnectionServices { get }
    /// What connections accepted now are bound by.
    var quicConnectionSettings: ConnectionSettings { get }
    /// A new connection, counted against max_connections; false: refused.
    func admitQUIC() -> Bool
    /// An admitted connection that could not start (its count is given back).
    func notStarted()
    /// The worker keeps (drains, aborts) this connection from now on.
    func adopt(_ connection: any ClientTransport)
}

/// The HTTP/3 side of one TLS listener on one worker: its UDP socket (the
/// listener's port, SO_REUSEPORT: the kernel keeps a client's datagrams on
/// one worker), datagrams routed by destination connection ID to their
/// `HTTP3Connection`, and what needs no connection: Version Negotiation,
/// Stateless Resets and, while many handshakes are pending, Retry (the
/// client proves its address before any state is kept for it).
final class QUICListener: IOHandler {
    let fd: Int32
    let localAddress: DatagramPeer
    private let slot: QUICCredentialsSlot
    private unowned let owner: any QUICListenerOwner
    private var services: ConnectionServices { owner.services }
    private var routes: [ConnectionID: HTTP3Connection] = [:]
    /// Connections whose handshake is not done yet (Retry beyond `retryAbove` of them).
    private var handshaking = Set<ObjectIdentifier>()
    let retryAbove: Int
    /// Stateless Resets sent this second, at most `resetsPerSecond`.
    private var resets = (second: UInt64(0), count: 0)
    static let resetsPerSecond = 100
    /// Datagrams in: `slots` of `slotBytes`; packets out: one GSO batch.
    static let slots = 32, slotBytes = 2048
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: slots * slotBytes, alignment: 16)
    private var lengths = [Int](repeating: 0, count: slots)
    private var peers = [DatagramPeer](repeating: DatagramPeer(), count: slots)
    let sendBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    private var segmentsWork = true
    private var accepting = true
    private var closed = false

    init(fd: Int32, slot: QUICCredentialsSlot, retryAbove: Int, owner: any QUICListenerOwner) {
        self.fd = fd
        self.slot = slot
        self.retryAbove = retryAbove
        self.owner = owner
        localAddress = UDPSocket.localAddress(fd)
    }

    deinit {
        receiveBuffer.deallocate()
        sendBuffer.deallocate()
    }

    func start() throws(SystemError) { try services.loop.watch(fd, .read, self) }

    func ready(_ events: IOEvents) {
        guard !closed else { return }
        for _ in 0..<8 {
            let count: Int
            do {
                count = try lengths.withUnsafeMutableBufferPointer { lengths in
                    try peers.withUnsafeMutableBufferPointer { peers throws(SystemError) in
                        try UDPSocket.receive(fd, into: receiveBuffer.baseAddress!, size: Self.slotBytes, count: Self.slots,
                                              lengths: lengths.baseAddress!, peers: peers.baseAddress!)
                    }
                }
            } catch {
                services.logger.debug("QUIC listener: \(error)")
                return
            }
            for i in 0..<count where lengths[i] <= Self.slotBytes {
                dispatch(UnsafeRawBufferPointer(rebasing: receiveBuffer[(i * Self.slotBytes)..<(i * Self.slotBytes + lengths[i])]),
                         from: peers[i])
            }
            if count < Self.slots { return }
        }
    }

    private func dispatch(_ datagram: UnsafeRawBufferPointer, from peer: DatagramPeer) {
        guard let header = QUICPackets.header(datagram) else { return dropped() }
        switch header {
        case .short(let dcid):
            if let connection = routes[dcid] { return connection.receive(datagram, from: peer) }
            statelessReset(dcid, received: datagram.count, to: peer)
        case .long(_, let dcid, _):
            if let connection = routes[dcid] { return connection.receive(datagram, from: peer) }
            begin(datagram, from: peer)
        case .unsupportedVersion(let dcid, let scid):
            // Only for a datagram as large as an Initial: never an amplifier.
            guard datagram.count >= 1200 else { return dropped() }
            let n = QUICPackets.versionNegotiation(dcid: dcid, scid: scid, into: sendBuffer)
            sendAnswer(n, to: peer)
        }
    }

    /// A client's first Initial: a connection, a Retry first, or nothing.
    private func begin(_ datagram: UnsafeRawBufferPointer, from peer: DatagramPeer) {
        guard let header = QUICPackets.accept(datagram) else { return dropped() }
        guard accepting else { return refuse(header, to: peer) }
        let secret = slot.credentials.secret
        let now = HTTP3Connection.now()
        // A token that is not a valid Retry token of ours counts as none
        // (RFC 9000 section 8.1.3).
        let retried = QUICPackets.hasToken(header) ? QUICPackets.verifyRetry(header, from: peer, secret: secret, now: now) : nil
        if retried == nil && handshaking.count >= retryAbove {
            WorkerStats.bump(services.counters.quicRetries)
            let n = QUICPackets.retry(for: header, from: peer, secret: secret, now: now, into: sendBuffer)
            sendAnswer(n, to: peer)
            return
        }
        guard owner.admitQUIC() else { return refuse(header, to: peer) }
        let connection: HTTP3Connection
        do {
            connection = try HTTP3Connection(listener: self, header: header, from: peer, retried: retried, services: services,
                                             settings: owner.quicConnectionSettings, credentials: slot.credentials)
        } catch {
            services.logger.warning("cannot start an HTTP/3 connection: \(error)")
            owner.notStarted()
            return
        }
        WorkerStats.bump(services.counters.http3Connections)
        owner.adopt(connection)
        handshaking.insert(ObjectIdentifier(connection))
        routes[connection.quic.originalID] = connection
        for id in connection.quic.connectionIDs { routes[id] = connection }
        connection.receive(datagram, from: peer)
    }

    private func refuse(_ header: InitialPacket, to peer: DatagramPeer) {
        let n = QUICPackets.refusal(for: header, into: sendBuffer)
        sendAnswer(n, to: peer)
    }

    private func statelessReset(_ dcid: ConnectionID, received: Int, to peer: DatagramPeer) {
        let second = services.loop.now() / 1000
        if resets.second != second { resets = (second, 0) }
        guard resets.count < Self.resetsPerSecond else { return dropped() }
        resets.count += 1
        let n = QUICPackets.statelessReset(for: dcid, received: received, secret: slot.credentials.secret, into: sendBuffer)
        guard n > 0 else { return }
        WorkerStats.bump(services.counters.quicStatelessResets)
        sendAnswer(n, to: peer)
    }

    private func dropped() { WorkerStats.bump(services.counters.quicDropped) }

    // MARK: what connections ask

    /// Sends `bytes` as datagrams of `segment` bytes; false when the socket is full (QUIC recovers the rest).
    func send(_ bytes: UnsafeRawBufferPointer, segment: Int, to peer: DatagramPeer) -> Bool {
        do {
            return try UDPSocket.send(fd, bytes.baseAddress!, count: bytes.count, segment: segment, to: peer,
                                      segmentsWork: &segmentsWork)
        } catch {
            services.logger.debug("QUIC send: \(error)")
            return false
        }
    }

    /// One datagram of `count` bytes written in `sendBuffer` (an answer that needs no connection).
    private func sendAnswer(_ count: Int, to peer: DatagramPeer) {
        guard count > 0 else { return }
        _ = send(UnsafeRawBufferPointer(rebasing: sendBuffer[..<count]), segment: count, to: peer)
    }

    func route(_ id: ConnectionID, to connection: HTTP3Connection) { routes[id] = connection }
    func unroute(_ id: ConnectionID) { routes[id] = nil }

    func handshakeCompleted(_ connection: HTTP3Connection) { handshaking.remove(ObjectIdentifier(connection)) }

    func connectionClosed(_ connection: HTTP3Connection) {
        handshaking.remove(ObjectIdentifier(connection))
        routes[connection.quic.originalID] = nil
        for id in connection.quic.connectionIDs { routes[id] = nil }
        services.connectionClosed(connection)
        if !accepting && routes.isEmpty { close() }
    }

    /// Draining: no new connection; the socket stays open for those in
    /// flight (their datagrams still arrive on it), then closes.
    func stopAccepting() {
        accepting = false
        if routes.isEmpty { close() }
    }

    func close() {
        guard !closed else { return }
        closed = true
        services.loop.unwatch(fd)
        Socket.close(fd)
    }
}
