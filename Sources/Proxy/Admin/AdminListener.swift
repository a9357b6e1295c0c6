import Admin
import EdgeControls
import EventLoop
import HTTP1
import Logging
import TLS
import Telemetry
import Transport

/// The admin API's listener, on a thread and loop of its own (a slow purge
/// never stalls a proxy worker). Its connections are the proxy's HTTP/1.1
/// transport (`ClientConnection`: the same parsing, pipelining, deadlines,
/// output and closing), the admin API answering their requests
/// (`AdminExchange`). Past admin_max_connections a new connection gets a
/// 503 and is closed, so idle admin clients cannot use up the descriptors
/// the proxy needs.
public final class AdminListener: AcceptorOwner, ConnectionOwner {
    public let loop: EventLoop
    let logger: Logger
    private let api: AdminAPI
    private let following: LogFollowing
    private let settings: ConnectionSettings
    private let maxConnections: Int
    private var acceptor: Acceptor?
    private var services: ConnectionServices?
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    private var lastRefusalLog: UInt64 = 0
    /// The admin connections' own byte counts (not the proxy's figures).
    private let counters = WorkerStats.unreported()
    private let listener: Int32

    /// `sendTimeoutMilliseconds`: how long a log follower may read nothing
    /// before it is dropped (send_timeout).
    public init(listener: Int32, api: AdminAPI, maxConnections: Int = 64, feed: LogFeed? = nil,
                sendTimeoutMilliseconds: UInt64 = 60_000, allow: AddressList? = nil, logger: Logger) throws(SystemError) {
        loop = try EventLoop()
        self.listener = listener
        self.api = api
        self.logger = logger
        self.maxConnections = maxConnections
        following = LogFollowing(feed: feed, maxConnections: maxConnections, loop: loop)
        settings = ConnectionSettings(adminSendTimeoutMilliseconds: sendTimeoutMilliseconds)
        let services = ConnectionServices(loop: loop, counters: counters, logger: logger,
                                          responder: .handler { [api, following] head, connection in
                                              AdminExchange(head, api: api, following: following, logger: logger,
                                                            connection: connection, allow: allow)
                                          })
        self.services = services
        services.owner = self
    }

    /// Serves on the calling thread until `stop`.
    public func run() {
        let acceptor = Acceptor(ProxyListener(fd: listener, http2: false), worker: self)
        self.acceptor = acceptor
        do {
            try acceptor.start()
        } catch {
            logger.warning("cannot watch the admin listener: \(error)")
            return
        }
        tick()
        loop.run()
    }

    public func stop() { loop.execute { [self] in loop.stop() } }

    /// The status page's history and top URLs advance once a second.
    private func tick() {
        api.tick()
        loop.schedule(after: 1000) { [weak self] in self?.tick() }
    }

    func releaseDescriptors() -> Int { api.releaseDescriptors() }

    func admit(_ fd: Int32, peer: String, tls: TLSContext?, http2: Bool, altService: String?) {
        if connections.count >= maxConnections {
            // Connections answered and closing (lingering) give their places first.
            for connection in connections.values where connection.isLingering { connection.close() }
        }
        guard let services, connections.count < maxConnections else { return refuse(fd) }
        let connection = ClientConnection(fd: fd, peer: peer, services: services, settings: settings)
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    private func refuse(_ fd: Int32) {
        api.refusedConnection()
        Socket.refuse(fd, with: AdminAPI.busy)
        let now = loop.now()
        if now - lastRefusalLog > 10_000 {
            lastRefusalLog = now
            logger.warning("admin_max_connections (\(maxConnections)) reached: refusing new admin connections with 503")
        }
    }

    func switchToHTTP2(replacing connection: any ClientTransport, stream: ByteStream, input: [UInt8], peer: String,
                       settings: ConnectionSettings) {
        connection.close()  // (never: the admin listener is plain HTTP/1.1, with no h2c)
    }

    func connectionClosed(_ connection: any ClientTransport) { connections[ObjectIdentifier(connection)] = nil }

    /// (Admin connections never upgrade: their requests are the API's.)
    func replace(_ connection: any ClientTransport, with next: any ClientTransport) {
        connections[ObjectIdentifier(connection)] = nil
        next.abort()
    }
}

extension ConnectionSettings {
    /// An admin connection's: small requests without bodies worth reading,
    /// 5 s for the first request and 30 s idle after an answer, a log
    /// follower's output bounded by `LogFollowing.backlogBytes`.
    init(adminSendTimeoutMilliseconds: UInt64) {
        limits = ParseLimits(maxBodyBytes: AdminAPI.maxBodyBytes)
        pipelineBufferBytes = 64 * 1024
        outputBoundBytes = LogFollowing.backlogBytes
        headerTimeoutMilliseconds = AdminAPI.firstRequestTimeoutMilliseconds
        bodyTimeoutMilliseconds = AdminAPI.firstRequestTimeoutMilliseconds
        keepAliveTimeoutMilliseconds = AdminAPI.idleTimeoutMilliseconds
        sendTimeoutMilliseconds = adminSendTimeoutMilliseconds
        handshakeTimeoutMilliseconds = AdminAPI.firstRequestTimeoutMilliseconds
        http2MaxConcurrentStreams = 1
    }
}
