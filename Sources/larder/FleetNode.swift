import Admin
import CacheStorage
import EventLoop
import Fleet
import Foundation
import Logging

/// This node's part in a fleet: the purge stream on a thread and loop of
/// its own (a worker never waits on Redis, and purges from other nodes
/// arrive with or without the admin API). Purges from other nodes are
/// applied to the store as the admin API applies its own.
final class FleetNode: PurgeFanOut, @unchecked Sendable {
    let config: FleetConfig
    private let loop: EventLoop
    private var feed: PurgeFeed!
    /// Signalled when the node has caught up with the fleet's purges.
    private let joined = NSCondition()
    /// What `/stats` shows, kept current from the fleet's loop.
    private let current: Locked<FleetStatus>

    init(_ config: FleetConfig, password: String?, store: TieredStore, cacheKey: @escaping (String) -> String,
         logger: Logger) throws {
        self.config = config
        loop = try EventLoop()
        let current = Locked(FleetStatus(name: config.name, node: config.node, connected: false, purgesSent: 0, purgesReceived: 0,
                                         purgesQueued: 0, lastError: nil))
        self.current = current
        var settings = PurgeFeed.Settings(address: config.address, password: password, name: config.name, node: config.node)
        settings.connectTimeoutMilliseconds = config.connectTimeoutMilliseconds
        settings.timeoutMilliseconds = config.timeoutMilliseconds
        feed = PurgeFeed(settings, loop: loop, apply: { purge in
            let (count, failures) = AdminAPI.apply(purge.scope, soft: purge.soft, to: store, cacheKey: cacheKey)
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
        let deadline = Date().addingTimeInterval(Double(milliseconds) / 1000)
        joined.lock()
        defer { joined.unlock() }
        while !status.connected {
            guard joined.wait(until: deadline) else { return status.connected }
        }
        return true
    }

    var status: FleetStatus {
        current.withLock { $0 }
    }

    /// After each purge sent, from the fleet's loop (received ones are
    /// counted as they are applied).
    private func refresh() {
        let (sent, queued) = (feed.sent, feed.queued)
        current.withLock {
            $0.purgesSent = sent
            $0.purgesQueued = queued
        }
    }

    func start() {
        let (loop, feed) = (self.loop, self.feed!)
        let thread = Thread {
            feed.start()
            loop.run()
        }
        thread.name = "larder-fleet"
        thread.start()
    }

    func stop() {
        let (loop, feed) = (self.loop, self.feed!)
        loop.execute {
            feed.stop()
            loop.stop()
        }
    }

    func send(_ scope: PurgeScope, soft: Bool, delivered: @escaping @Sendable (PurgeDelivery) -> Void) {
        let (feed, node) = (self.feed!, config.node)
        loop.execute { [self] in
            feed.publish(FleetPurge(scope: scope, soft: soft, node: node)) { [self] delivery in
                refresh()
                delivered(PurgeDelivery(nodes: delivery.nodes, acknowledged: delivery.acknowledged, queued: delivery.queued,
                                        error: delivery.error))
            }
        }
    }
}
