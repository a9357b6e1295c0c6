import CacheStorage
import Clocks
#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import HTTP1
import Logging
import Synchronization
import Upstream
import HTTPHeaders

/// One event loop on one thread: its own listener (SO_REUSEPORT), its own
/// curl multi handle, its connections. Workers share only the memory tier
/// and the statistics.
public final class Worker: IOHandler {
    public let loop: EventLoop
    /// Read on the loop's thread only; `reconfigure` replaces it there.
    public private(set) var configuration: ProxyConfiguration
    let store: TieredStore
    /// This worker's copies of its recent memory hits (no lock for a hot key).
    let localHits = LocalHits()
    let collapser: Collapser
    let stats: ProxyStats
    /// This worker's number (0, 1, ...), for the access log.
    public var index = 0
    /// Followers of the log (`attach`, before the worker runs).
    private var logFeed: LogFeed?
    private var logQueue: LineQueue?
    /// The feed's follower count (it outlives the workers).
    private var followers: UnsafeMutablePointer<Atomic<Int>>?

    /// Which answers the status page and `larder top` count (`attach`).
    @exclusivity(unchecked) private var sampler = RequestSampler(nil)

    /// Lines go to `feed` while someone follows it; answers are sampled
    /// into `samples`. Call before `run`.
    public func attach(_ feed: LogFeed, samples: RequestSamples? = nil) {
        logFeed = feed
        logQueue = feed.makeQueue()
        followers = feed.followers
        sampler = RequestSampler(samples?.makeQueue())
    }

    /// Queues one answer for the admin thread's counts when it is sampled
    /// (every miss, pass and error; one hit in `RequestSamples.hitStride`).
    @inline(__always)
    func sample(_ request: RequestHead, _ access: AccessRecord) {
        guard let weight = sampler.weight(access.result, status: access.status) else { return }
        sampler.push(RequestSample(time: clock.now(), method: request.method, target: request.target,
                                   status: access.status, result: access.result, weight: weight,
                                   cache: access.status >= 500 ? access.cacheColumn : nil))
    }

    /// Whether someone follows the log.
    private var isFollowed: Bool { (followers?.pointee.load(ordering: .relaxed) ?? 0) > 0 }

    /// Whether a request's line is wanted: the access log is on or someone follows.
    var recordsRequests: Bool { accessLog != nil || isFollowed }
    /// This worker's own counters (only its thread writes them).
    let counters: WorkerStats
    let logger: Logger
    /// Stored gzip bodies found not decodable (`Exchange+Decoding`).
    let undecodable = UndecodableBodies.shared
    let upstream: any UpstreamRequester
    /// The fleet's shared tier (`[fleet]`), asked after the local tiers
    /// miss; set before the worker runs.
    public var sharedTier: (any SharedTier)?
    /// nil: access logging is off.
    let accessLog: AccessLog?
    /// Lines for the access log, written in batches (32 KiB, or a second).
    private let accessBuffer = ByteBuffer(capacity: AccessLog.flushBytes + 4096)
    private var accessFormat = AccessLineFormatter()
    private var accessFlushPending = false
    /// Read buffer shared by this worker's connections (one thread, one at a
    /// time; exclusivity checks off: see `ClientConnection.input`).
    @exclusivity(unchecked) var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    /// Where a hit's last head fields are assembled before being copied to
    /// the connection's queue (no array allocated per hit).
    @exclusivity(unchecked) var headScratch: [UInt8] = { var a: [UInt8] = []; a.reserveCapacity(256); return a }()
    var dateHeader = DateHeader()
    /// The wall clock of every age, freshness and stored time here.
    let clock: WallClock
    private(set) var builder: StoredResponseBuilder
    private var listener: Int32
    private var connections: [ObjectIdentifier: ClientConnection] = [:]
    private(set) var draining = false
    private var onDrained: (() -> Void)?

    public convenience init(listener: Int32, configuration: ProxyConfiguration, store: TieredStore, collapser: Collapser,
                            stats: ProxyStats, logger: Logger, accessLog: AccessLog? = nil,
                            clock: WallClock = WallClock()) throws(SystemError) {
        try self.init(listener: listener, configuration: configuration, store: store, collapser: collapser, stats: stats,
                      logger: logger, accessLog: accessLog, clock: clock) { UpstreamClient(loop: $0, settings: $1) }
    }

    /// `upstream`: how the worker reaches the upstream, made on its loop
    /// (ProxyTests give a stand-in; otherwise libcurl); `clock`: the wall
    /// clock its requests read (ProxyTests move one by hand).
    init(listener: Int32, configuration: ProxyConfiguration, store: TieredStore, collapser: Collapser, stats: ProxyStats,
         logger: Logger, accessLog: AccessLog?, clock: WallClock = WallClock(),
         upstream: (EventLoop, UpstreamSettings) -> any UpstreamRequester) throws(SystemError) {
        self.clock = clock
        self.accessLog = accessLog
        loop = try EventLoop()
        self.listener = listener
        self.configuration = configuration
        self.store = store
        self.collapser = collapser
        self.stats = stats
        counters = stats.makeWorkerStats()
        self.logger = logger
        self.upstream = upstream(loop, configuration.upstream)
        builder = StoredResponseBuilder(configuration)
        let latency = counters.latency
        loop.turnEnded = { latency.record(.loopTurn, microseconds: Int(clamping: $0)) }
    }

    /// Runs the loop on the calling thread until the worker has drained.
    public func run() {
        do {
            try loop.watch(listener, .read, self)
        } catch {
            logger.error("cannot watch listener: \(error)")
            return
        }
        loop.run()
    }

    /// Accepts pending connections.
    public func ready(_ events: IOEvents) {
        guard !draining else { return }
        for _ in 0..<64 {
            let accepted: (fd: Int32, peer: String)?
            do {
                accepted = try Socket.accept(listener)
            } catch {
                // EMFILE and friends: the listener stays readable, so pause
                // accepting briefly rather than spin (and log once per pause).
                logger.warning("accept failed: \(error); pausing accepts for 100 ms")
                loop.setInterest(listener, [])
                loop.schedule(after: 100) { [weak self] in
                    guard let self, !self.draining else { return }
                    self.loop.setInterest(self.listener, .read)
                }
                return
            }
            guard let accepted else { return }
            if stats.openConnections.wrappingAdd(1, ordering: .relaxed).newValue > configuration.maxConnections {
                stats.openConnections.wrappingSubtract(1, ordering: .relaxed)
                refuse(accepted.fd)
                continue
            }
            let connection = ClientConnection(fd: accepted.fd, peer: accepted.peer, worker: self)
            connections[ObjectIdentifier(connection)] = connection
            connection.start()
        }
    }

    /// Over max_connections: a short 503 (best effort, the socket buffer of
    /// a new connection takes it) and close; existing connections go on.
    private func refuse(_ fd: Int32) {
        WorkerStats.bump(counters.refusedConnections)
        Socket.refuse(fd, with: Self.busy)
        let now = EventLoop.nowMilliseconds()
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
            builder = StoredResponseBuilder(configuration)
            upstream.settings = configuration.upstream
        }
    }

    /// Background revalidations in flight on this worker, by key: at most one each.
    private var refreshing: [String: BackgroundRefresh] = [:]

    /// Starts a background revalidation of `entry` unless one is running.
    func revalidateInBackground(_ entry: CachedResponse, among variants: Variants, request: RequestHead, peer: String) {
        fetchInBackground(entry.key, validating: entry, among: variants, request: request, peer: peer)
    }

    /// A range of a response not stored whole was fetched for a client:
    /// the whole is fetched too, with no client waiting, so that later
    /// ranges are hits (one fetch per key across the workers).
    func fetchWholeInBackground(_ key: String, among variants: Variants, request: RequestHead, peer: String) {
        fetchInBackground(key, validating: nil, among: variants, request: request, peer: peer)
    }

    private func fetchInBackground(_ key: String, validating entry: CachedResponse?, among variants: Variants,
                                   request: RequestHead, peer: String) {
        // One background fetch per key across all workers.
        guard refreshing[key] == nil, !draining, collapser.beginRefresh(key) else { return }
        let refresh = BackgroundRefresh(worker: self, key: key, validating: entry, variants: variants, request: request) { [weak self] in
            self?.collapser.endRefresh(key)
            // Deferred: the refresh is still on the stack when it finishes.
            self?.loop.execute { self?.refreshing[key] = nil }
        }
        refreshing[key] = refresh
        if entry == nil { WorkerStats.bump(counters.rangeFills) } else { WorkerStats.bump(counters.backgroundRefreshes) }
        refresh.start(peer: peer)
    }

    /// When this worker's loop last answered a liveness probe (the service
    /// watchdog), in monotonic milliseconds.
    private let heartbeat = Atomic<UInt64>(0)
    public var lastHeartbeat: UInt64 { heartbeat.load(ordering: .acquiring) }

    /// Asks the loop to record `stamp` when it gets to it. Any thread.
    public func probe(_ stamp: UInt64) {
        loop.execute { [weak self] in self?.heartbeat.store(stamp, ordering: .releasing) }
    }

    /// Fetches whose client left while their response is still being
    /// stored or shared; held here until they finish.
    private var orphans: [ObjectIdentifier: UpstreamFetch] = [:]

    func adopt(_ fetch: UpstreamFetch) { orphans[ObjectIdentifier(fetch)] = fetch }

    /// Deferred: the fetch is still on the stack when it lets go. (Most
    /// fetches end with their client and were never held.)
    func release(_ fetch: UpstreamFetch) {
        let id = ObjectIdentifier(fetch)
        guard !orphans.isEmpty, orphans[id] != nil else { return }
        loop.execute { [weak self] in self?.orphans[id] = nil }
    }

    func connectionClosed(_ connection: ClientConnection) {
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
            draining = true
            onDrained = completion
            loop.unwatch(listener)
            Socket.close(listener)
            for connection in connections.values where connection.isIdle { connection.close() }
            if connections.isEmpty { finishDrain(); return }
            loop.schedule(after: timeoutMilliseconds) { [weak self] in
                guard let self else { return }
                for connection in self.connections.values { connection.abort() }
                self.finishDrain()
            }
        }
    }

    /// When the loop's last poll returned (what it handles now arrived then).
    /// Read here, where the loop needs no reference counting, on every request.
    var wakeMicroseconds: UInt64 { loop.wakeMicroseconds }

    /// One answer's latencies, into this worker's histograms.
    @inline(__always)
    func recordLatency(_ result: LatencyHistograms.Result, firstByte: Int, total: Int) {
        counters.latency.record(result, firstByte: firstByte, total: total)
    }

    /// Hands one request's line to the log's followers and the access log
    /// (in batches). Its texts are copied as bytes, never made Strings.
    func logAccess(_ figures: AccessLine.Figures, client: String, method: String, target: String, cache: [UInt8]) {
        let followed = isFollowed
        guard followed || accessLog != nil else { return }
        AccessLine.with(figures, client: client, method: method, target: target, cache: cache) { line in
            if followed, let logQueue, logQueue.push(line) { loop.atBatchEnd(logQueue) }
            guard let accessLog else { return }
            if accessLog.json { accessFormat.appendJSON(line, to: accessBuffer) } else { accessFormat.appendText(line, to: accessBuffer) }
        }
        guard let accessLog else { return }
        if accessBuffer.count >= AccessLog.flushBytes {
            accessLog.write(accessBuffer.bytes)
            accessBuffer.removeAll()
        } else if !accessFlushPending {
            accessFlushPending = true
            loop.schedule(after: 1000) { [weak self] in self?.flushAccessLog() }
        }
    }

    private func flushAccessLog() {
        accessFlushPending = false
        guard let accessLog, !accessBuffer.isEmpty else { return }
        accessLog.write(accessBuffer.bytes)
        accessBuffer.removeAll()
    }

    private func finishDrain() {
        flushAccessLog()
        guard let done = onDrained else { return }
        onDrained = nil
        loop.stop()
        done()
    }
}
