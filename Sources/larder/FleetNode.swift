import Admin
import CacheStorage
import Configuration
import EventLoop
import Fleet
import FoundationEssentials
import Logging
import Redis
import Synchronization
import Threads
import TLS

/// This node's part in a fleet: the purge stream on a thread and loop of
/// its own (a worker never waits on Redis, and purges from other nodes
/// arrive with or without the admin API). Purges from other nodes are
/// applied to the store as the admin API applies its own.
final class FleetNode: PurgeFanOut, @unchecked Sendable {
    let config: FleetConfig
    private let loop: EventLoop
    private var feed: PurgeFeed!
    /// Signalled when the node has caught up with the fleet's purges.
    private let joined = Condition()
    /// What `/stats` shows, kept current from the fleet's loop.
    private let current: Locked<FleetStatus>
    private let password: String?
    /// Where the Redis master is: `redis`, or what the sentinels name.
    let master: RedisMaster
    private var sentinels: SentinelWatcher?
    private let purgeScopes: (String) -> [PurgeScope]
    private let logger: Logger
    /// Where this node stands in the purge stream (for shared-tier stores).
    let mark = FleetMark()
    let sharedCounts = SharedTierCounts()
    /// Every worker meets the same fault: logged once for all every 10 s.
    private lazy var sharedFaults = FaultLog { [logger] in logger.warning("\($0)") }

    /// `cacheDirectory`: the disk tier's, where the fleet's identity is remembered.
    init(_ config: FleetConfig, password: String?, sentinelPassword: String? = nil, tls: TLSClientContext? = nil, store: TieredStore,
         purgeScopes: @escaping (String) -> [PurgeScope], cacheDirectory: String?, logger: Logger) throws {
        self.config = config
        self.password = password
        self.logger = logger
        loop = try EventLoop()
        master = config.followsSentinel ? RedisMaster(followingSentinelAt: EventLoop.nowMilliseconds())
            : RedisMaster(fixed: config.address, tls: tls)
        let current = Locked(FleetStatus(name: config.name, node: config.node, connected: false, purgesSent: 0, purgesReceived: 0,
                                         purgesQueued: 0, lastError: nil))
        self.current = current
        self.purgeScopes = purgeScopes
        var settings = PurgeFeed.Settings(master: master, password: password, name: config.name, node: config.node)
        settings.connectTimeoutMilliseconds = config.connectTimeoutMilliseconds
        settings.timeoutMilliseconds = config.timeoutMilliseconds
        // A purge counts as delivered once a replica holds it too: a failover keeps it.
        settings.replicas = config.followsSentinel ? 1 : 0
        feed = PurgeFeed(settings, loop: loop, apply: { purge in
            let (count, failures) = AdminAPI.apply(purge.scope, soft: purge.soft, to: store, purgeScopes: purgeScopes)
            current.withLock { $0.purgesReceived += 1 }
            let failed = failures.isEmpty ? "" : "; \(failures.count) files failed (\(failures[0]))"
            logger.notice("fleet: \(purge.soft ? "soft-" : "")purged \(purge.scope) from node \(purge.node) (\(count) responses)\(failed)")
        }, dropEverything: { reason in
            let (count, _) = store.purgeReportingFailures(.all, soft: false)
            logger.warning("fleet: removed everything stored (\(count) responses): \(reason)")
        }, log: { text in
            current.withLock { $0.lastError = text }
            logger.warning("\(text)")
        })
        let feed = self.feed!
        feed.mark = mark
        if config.followsSentinel {
            var watching = SentinelWatcher.Settings(sentinels: config.sentinels, masterName: config.masterName ?? "",
                                                    password: sentinelPassword)
            watching.connectTimeoutMilliseconds = config.connectTimeoutMilliseconds
            watching.timeoutMilliseconds = config.timeoutMilliseconds
            sentinels = SentinelWatcher(watching, master: master, loop: loop, log: { text in
                current.withLock { $0.lastError = text }
                logger.warning("\(text)")
            })
        }
        if let file = FleetIdentityFile(cacheDirectory: cacheDirectory, name: config.name) {
            feed.knownFleetID = file.read()
            feed.rememberFleetID = { identity in
                if let failure = file.write(identity) { logger.warning("fleet: \(failure)") }
            }
        }
        let joined = self.joined
        feed.onConnectionChange = { connected in
            current.withLock { $0.connected = connected }
            if connected {
                joined.lock()
                joined.broadcast()
                joined.unlock()
            }
        }
    }

    /// Waits (at most `milliseconds`) until what this node missed while
    /// away is applied: a restarted node then serves nothing purged
    /// meanwhile. False when Redis did not answer in time (it serves alone).
    func waitUntilJoined(milliseconds: UInt64) -> Bool {
        let deadline = Condition.deadline(afterMilliseconds: milliseconds)
        joined.lock()
        defer { joined.unlock() }
        while !status.connected {
            guard joined.wait(until: deadline) else { return status.connected }
        }
        return true
    }

    var status: FleetStatus {
        var status = current.withLock { $0 }
        let counts = sharedCounts
        status.sharedLookups = counts.lookups.load(ordering: .relaxed)
        status.sharedHits = counts.found.load(ordering: .relaxed)
        status.sharedStores = counts.stores.load(ordering: .relaxed)
        status.sharedStoresRefused = counts.storesRefused.load(ordering: .relaxed)
        status.sharedErrors = counts.errors.load(ordering: .relaxed)
        status.sharedConnections = counts.connected.load(ordering: .relaxed)
        status.followsSentinel = master.followsSentinel
        status.master = status.connected ? master.current.map { "\($0.address)" } : nil
        (status.failovers, status.withoutMasterMilliseconds) = master.figures(now: EventLoop.nowMilliseconds())
        return status
    }

    /// After each purge sent, from the fleet's loop (received ones are
    /// counted as they are applied).
    private func refresh() {
        let (sent, queued, replayed, nodes, rtt) = (feed.sent, feed.queued, feed.replayed, feed.liveNodes, feed.roundTripMicroseconds)
        let offset = feed.clock.offsetMilliseconds
        current.withLock {
            $0.clockOffsetMilliseconds = offset
            $0.purgesSent = sent
            $0.purgesQueued = queued
            $0.purgesReplayed = replayed
            $0.nodes = nodes
            $0.roundTripMicroseconds = rtt
        }
    }

    /// Copies the feed's figures for `/stats` every second (the fleet's loop).
    private func keepStatusCurrent() {
        refresh()
        loop.schedule(after: 1_000) { [weak self] in self?.keepStatusCurrent() }
    }

    func start() throws(ThreadStartError) {
        let (loop, feed) = (self.loop, self.feed!)
        let sentinels = self.sentinels
        try startThread(name: "larder-fleet") { [self] in
            sentinels?.start()
            feed.start()
            keepStatusCurrent()
            loop.run()
        }
    }

    /// Leaves the fleet (bounded: Redis may be gone) and stops the thread.
    func stop() {
        let (loop, feed) = (self.loop, self.feed!)
        let condition = Condition()
        var left = false  // guarded by `condition`
        let sentinels = self.sentinels
        loop.execute {
            sentinels?.stop()
            feed.leave {
                loop.stop()
                condition.lock()
                left = true
                condition.broadcast()
                condition.unlock()
            }
        }
        let deadline = Condition.deadline(afterMilliseconds: config.timeoutMilliseconds + 500)
        condition.lock()
        while !left && condition.wait(until: deadline) {}
        condition.unlock()
    }

    /// The shared tier for a worker's loop (connected once that loop runs).
    func sharedTier(on loop: EventLoop) -> RedisSharedTier {
        // Resolved once here: a worker's loop must not wait on DNS when it reconnects.
        var settings = RedisSharedTier.Settings(master: master, password: password, name: config.name)
        settings.connectTimeoutMilliseconds = config.connectTimeoutMilliseconds
        settings.timeoutMilliseconds = config.timeoutMilliseconds
        settings.maxObjectBytes = config.maxObjectBytes
        settings.node = config.node
        let tier = RedisSharedTier(settings, loop: loop, mark: mark, clock: feed.clock, counts: sharedCounts, faults: sharedFaults)
        tier.start()
        return tier
    }

    func send(_ scope: PurgeScope, soft: Bool, delivered: @escaping @Sendable (PurgeDelivery) -> Void) {
        let (feed, node) = (self.feed!, config.node)
        // A URL purge removes its target's stored key and its route's (and
        // with virtual hosts and no host named, the path on every host).
        var keys: [String] = [], prefixes: [String] = [], tags: [String] = []
        if case .key(let target) = scope {
            for each in purgeScopes(target) {
                switch each {
                case .key(let key): keys.append(key)
                case .prefix(let prefix): prefixes.append(prefix)
                case .tag(let tag): tags.append(tag)
                case .regex, .all: break
                }
            }
        }
        loop.execute { [self] in
            feed.publish(FleetPurge(scope: scope, soft: soft, node: node), keys: keys, prefixes: prefixes, tags: tags) { [self] delivery in
                refresh()
                delivered(PurgeDelivery(nodes: delivery.nodes, acknowledged: delivery.acknowledged, queued: delivery.queued,
                                        error: delivery.error, replicas: delivery.replicas))
            }
        }
    }
}

extension FleetConfig {
    /// With `rediss://`: the certificate authorities Redis's certificate is
    /// checked against (`tls_ca_file`, else the system's), loaded now so a
    /// bad file is a configuration error (78), not a fault at each connect.
    func tlsContext() throws(ConfigError) -> TLSClientContext? {
        guard !followsSentinel, address.tls else { return nil }
        do {
            return try TLSClientContext.verifying(caFile: tlsCAFile)
        } catch {
            throw ConfigError(file: tlsCAFile ?? "(the system's certificate authorities)", line: nil, key: "fleet.tls_ca_file", message: error.description)
        }
    }
}
