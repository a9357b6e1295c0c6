import CacheStorage
import Clocks
#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import HTTP1
import Logging
import Synchronization
import Telemetry
import Upstream
import HTTPHeaders
import TLS
import Transport

/// One event loop on one thread: its own socket per listener
/// (SO_REUSEPORT), its own curl multi handle, its connections. Workers
/// share only the memory tier and the statistics.
public final class Worker: ConnectionOwner, AcceptorOwner, QUICListenerOwner {
    public let loop: EventLoop
    /// Read on the loop's thread only; `reconfigure` replaces it there.
    public private(set) var configuration: ProxyConfiguration
    /// The cache as this worker's requests use it.
    let cache: CacheAccess
    let stats: ProxyStats
    /// This worker's number (0, 1, ...), for the access log.
    public var index: Int {
        get { log.worker }
        set { log.worker = newValue }
    }
    /// What is recorded of each answer (latencies, samples, log lines).
    let log: RequestLog

    /// Lines go to `feed` while someone follows it; answers are sampled
    /// into `samples`. Call before `run`.
    public func attach(_ feed: LogFeed, samples: RequestSamples? = nil) { log.attach(feed, samples: samples) }
    /// This worker's own counters (only its thread writes them).
    let counters: WorkerStats
    let logger: Logger
    /// The upstream as this worker's requests reach it.
    let upstream: UpstreamAccess
    /// What its connections' exchanges are made with.
    var exchangeParts: ExchangeParts { services.exchangeParts }
    /// What connections accepted from now on are bound by.
    private var connectionSettings: ConnectionSettings
    /// The fleet's shared tier (`[fleet]`), asked after the local tiers
    /// miss; set before the worker runs.
    public var sharedTier: (any SharedTier)? {
        get { cache.store.shared }
        set { cache.store.shared = newValue }
    }
    /// Where purges this worker's responses make (Cache-Group-Invalidation)
    /// go besides its own tiers: the fleet. Set before the worker runs.
    public var announcePurge: (@Sendable (PurgeScope) -> Void)? {
        get { cache.store.announce }
        set { cache.store.announce = newValue }
    }
    /// What its connections use of it.
    let services: ConnectionServices
    private var acceptors: [Acceptor] = []
    private var quicListeners: [QUICListener] = []
    private var connections: [ObjectIdentifier: any ClientTransport] = [:]
    /// Stopping: no connection is taken, answers end theirs (`services` tells them).
    var draining: Bool { services.draining }
    private var onDrained: (() -> Void)?

    public convenience init(listeners: [ProxyListener], configuration: ProxyConfiguration, store: TieredStore,
                            collapser: Collapser, stats: ProxyStats, logger: Logger, accessLog: AccessLog? = nil,
                            clock: WallClock = WallClock()) throws(SystemError) {
        try self.init(listeners: listeners, configuration: configuration, store: store, collapser: collapser, stats: stats,
                      logger: logger, accessLog: accessLog, clock: clock) { UpstreamClient(loop: $0, settings: $1) }
    }

    public convenience init(listener: Int32, configuration: ProxyConfiguration, store: TieredStore, collapser: Collapser,
                            stats: ProxyStats, logger: Logger, accessLog: AccessLog? = nil,
                            clock: WallClock = WallClock()) throws(SystemError) {
        try self.init(listeners: [ProxyListener(fd: listener)], configuration: configuration, store: store,
                      collapser: collapser, stats: stats, logger: logger, accessLog: accessLog, clock: clock)
    }

    /// `upstream`: how the worker reaches the upstream, made on its loop
    /// (ProxyTests give a stand-in; otherwise libcurl); `clock`: the wall
    /// clock its requests read (ProxyTests move one by hand).
    init(listeners: [ProxyListener], configuration: ProxyConfiguration, store: TieredStore, collapser: Collapser,
         stats: ProxyStats, logger: Logger, accessLog: AccessLog?, clock: WallClock = WallClock(),
         upstream: (EventLoop, UpstreamSettings) -> any UpstreamRequester) throws(SystemError) {
        loop = try EventLoop()
        loop.isWorkerLoop = true
        self.configuration = configuration
        self.stats = stats
        counters = stats.makeWorkerStats()
        self.logger = logger
        connectionSettings = ConnectionSettings(configuration)
        cache = CacheAccess(store: store, collapser: collapser, clock: clock, counters: counters, configuration: configuration,
                            loop: loop)
        self.upstream = UpstreamAccess(requester: upstream(loop, configuration.upstream), loop: loop, cache: cache, stats: stats,
                                       counters: counters, logger: logger, configuration: configuration)
        let latency = counters.latency
        log = RequestLog(loop: loop, clock: clock, latency: latency, responses: counters.responses, accessLog: accessLog)
        // A turn is a period of the memory tier's reclamation: what it took
        // out while this worker's hits may have been reading it is freed now.
        let localHits = cache.store.localHits
        loop.turnEnded = {
            localHits.endPeriod()
            latency.record(.loopTurn, microseconds: Int(clamping: $0))
        }
        services = ConnectionServices(loop: loop, counters: counters, logger: logger,
                                      responder: .proxy(ExchangeParts(cache: cache, upstream: self.upstream, log: log)))
        acceptors = listeners.map { Acceptor($0, worker: self) }
        services.owner = self
        quicListeners = listeners.compactMap { listener in
            listener.quic.map { QUICListener(fd: $0.fd, slot: $0.credentials, retryAbove: configuration.quicRetryAbove, owner: self) }
        }
    }

    convenience init(listener: Int32, configuration: ProxyConfiguration, store: TieredStore, collapser: Collapser,
                     stats: ProxyStats, logger: Logger, accessLog: AccessLog?, clock: WallClock = WallClock(),
                     upstream: (EventLoop, UpstreamSettings) -> any UpstreamRequester) throws(SystemError) {
        try self.init(listeners: [ProxyListener(fd: listener)], configuration: configuration, store: store,
                      collapser: collapser, stats: stats, logger: logger, accessLog: accessLog, clock: clock,
                      upstream: upstream)
    }

    /// Runs the loop on the calling thread until the worker has drained.
    public func run() {
        do {
            for acceptor in acceptors { try acceptor.start() }
            for listener in quicListeners { try listener.start() }
        } catch {
            logger.error("cannot watch listener: \(error)")
            return
        }
        loop.run()
    }

    /// A connection an acceptor took: served, or refused over max_connections.
    func releaseDescriptors() -> Int { cache.store.releaseDescriptors() }

    func admit(_ fd: Int32, peer: String, tls: TLSContext?, http2: Bool, altService: String?) {
        guard !draining else { Socket.close(fd); return }
        if stats.openConnections.wrappingAdd(1, ordering: .relaxed).newValue > configuration.maxConnections {
            stats.openConnections.wrappingSubtract(1, ordering: .relaxed)
            refuse(fd, tls: tls != nil)
            return
        }
        var session: TLSSession?
        if let tls {
            session = TLSSession(context: tls, fd: fd)
            if session == nil {
                stats.openConnections.wrappingSubtract(1, ordering: .relaxed)
                Socket.close(fd)
                return
            }
        }
        var settings = connectionSettings
        settings.altService = tls == nil ? nil : altService
        let connection = ClientConnection(fd: fd, peer: peer, services: services, settings: settings, tls: session, http2: http2)
        connections[ObjectIdentifier(connection)] = connection
        connection.start()
    }

    // MARK: QUICListenerOwner

    var quicConnectionSettings: ConnectionSettings { connectionSettings }

    func admitQUIC() -> Bool {
        guard !draining else { return false }
        if stats.openConnections.wrappingAdd(1, ordering: .relaxed).newValue > configuration.maxConnections {
            stats.openConnections.wrappingSubtract(1, ordering: .relaxed)
            WorkerStats.bump(counters.refusedConnections)
            return false
        }
        return true
    }

    func notStarted() { stats.openConnections.wrappingSubtract(1, ordering: .relaxed) }

    func adopt(_ connection: any ClientTransport) { connections[ObjectIdentifier(connection)] = connection }

    /// Over max_connections: a short 503 (best effort, the socket buffer of
    /// a new connection takes it) and close; existing connections go on.
    private func refuse(_ fd: Int32, tls: Bool) {
        WorkerStats.bump(counters.refusedConnections)
        // A TLS client could not read a plain 503: it is closed without one.
        if tls { Socket.close(fd) } else { Socket.refuse(fd, with: Self.busy) }
        let now = loop.now()
        if now - lastRefusalLog > 10_000 {
            lastRefusalLog = now
            logger.warning("max_connections (\(configuration.maxConnections)) reached: refusing new connections with 503")
        }
    }

    private var lastRefusalLog: UInt64 = 0
    private static let busy = ResponseSerializer.simple(status: 503, body: "too many connections; retry", close: true,
                                                        extra: ["retry-after": "1"])

    /// New settings for new requests (SIGHUP). Safe from any thread.
    public func reconfigure(_ configuration: ProxyConfiguration) {
        loop.execute { [self] in
            self.configuration = configuration
            connectionSettings = ConnectionSettings(configuration)
            cache.configure(configuration)
            upstream.configure(configuration)
        }
    }

    /// When this worker's loop last answered a liveness probe (the service
    /// watchdog), in monotonic milliseconds.
    private let heartbeat = Atomic<UInt64>(0)
    public var lastHeartbeat: UInt64 { heartbeat.load(ordering: .acquiring) }

    /// Asks the loop to record `stamp` when it gets to it. Any thread.
    public func probe(_ stamp: UInt64) {
        loop.execute { [weak self] in self?.heartbeat.store(stamp, ordering: .releasing) }
    }

    /// A connection that began as HTTP/1.1 speaks HTTP/2 (ALPN h2, or the
    /// h2c preface): the socket goes on with an `HTTP2Connection`.
    func switchToHTTP2(replacing connection: any ClientTransport, stream: ByteStream, input: [UInt8], peer: String,
                       settings: ConnectionSettings) {
        connections[ObjectIdentifier(connection)] = nil
        let http2 = HTTP2Connection(stream: stream, peer: peer, services: services, settings: settings)
        connections[ObjectIdentifier(http2)] = http2
        http2.start(initial: input)
    }

    func replace(_ connection: any ClientTransport, with next: any ClientTransport) {
        connections[ObjectIdentifier(connection)] = nil
        connections[ObjectIdentifier(next)] = next
    }

    func connectionClosed(_ connection: any ClientTransport) {
        connections[ObjectIdentifier(connection)] = nil
        stats.openConnections.wrappingSubtract(1, ordering: .relaxed)
        if draining && connections.isEmpty { finishDrain() }
    }

    /// Stops accepting, lets requests in flight finish, closes idle
    /// connections, and stops the loop when none remain or after `timeout`.
    /// Safe to call from any thread.
    public func shutdown(timeoutMilliseconds: UInt64, completion: @escaping @Sendable () -> Void) {
        loop.execute { [self] in
            guard !draining else { return }
            services.draining = true
            upstream.draining = true
            onDrained = completion
            for acceptor in acceptors { acceptor.close() }
            for listener in quicListeners { listener.stopAccepting() }
            for connection in connections.values { connection.drain() }
            if connections.isEmpty { finishDrain(); return }
            loop.schedule(after: timeoutMilliseconds) { [weak self] in
                guard let self else { return }
                for connection in self.connections.values { connection.abort() }
                self.finishDrain()
            }
        }
    }

    private func finishDrain() {
        for listener in quicListeners { listener.close() }
        log.flush()
        guard let done = onDrained else { return }
        onDrained = nil
        loop.stop()
        done()
    }
}
