import Bytes
import CacheStorage

/// The other nodes of a fleet: every purge applied through this node's
/// admin API goes to them (`larder serve` implements it with the fleet's
/// purge stream). `delivered` may run on any thread.
public protocol PurgeFanOut: AnyObject, Sendable {
    func send(_ scope: PurgeScope, soft: Bool, delivered: @escaping @Sendable (PurgeDelivery) -> Void)
    /// For `/stats`; any thread.
    var status: FleetStatus { get }
}

/// `/stats`' `fleet` section.
public struct FleetStatus: Equatable, Sendable {
    public var name: String
    public var node: String
    /// Whether this node reads the fleet's purges now.
    public var connected: Bool
    public var purgesSent: Int
    public var purgesReceived: Int
    /// Purges waiting for Redis to come back.
    public var purgesQueued: Int
    /// Purges missed while away, applied when this node came back.
    public var purgesReplayed = 0
    /// Live nodes (heard from within 5 s), this one included; 0 until known.
    public var nodes = 0
    /// The last Redis round trip of the purge stream's connection.
    public var roundTripMicroseconds: Int?
    /// Redis's clock minus this node's (FleetClock), when measured.
    public var clockOffsetMilliseconds: Int64?
    /// The shared tier, all workers together: lookups, those that found
    /// something, responses offered, offers refused (a purge came first).
    public var sharedLookups = 0
    public var sharedHits = 0
    public var sharedStores = 0
    public var sharedStoresRefused = 0
    public var sharedErrors = 0
    /// Workers whose shared-tier connection to Redis is up.
    public var sharedConnections = 0
    public var lastError: String?
    /// The Redis master in use (nil: none reached now), the failovers seen
    /// (the master's address changed), and the time spent without one.
    public var master: String?
    public var followsSentinel = false
    public var failovers = 0
    public var withoutMasterMilliseconds: UInt64 = 0

    public init(name: String, node: String, connected: Bool, purgesSent: Int, purgesReceived: Int, purgesQueued: Int,
                lastError: String?) {
        (self.name, self.node, self.connected) = (name, node, connected)
        (self.purgesSent, self.purgesReceived, self.purgesQueued, self.lastError) = (purgesSent, purgesReceived, purgesQueued, lastError)
    }

    var json: String {
        "{\"name\": \(JSON.string(name)), \"node\": \(JSON.string(node)), \"connected\": \(connected), "
            + "\"nodes\": \(nodes), \"redis_rtt_ms\": \(roundTripMicroseconds.map { String(Double($0) / 1000) } ?? "null"), "
            + "\"clock_offset_ms\": \(clockOffsetMilliseconds.map { String($0) } ?? "null"), "
            + "\"purges_sent\": \(purgesSent), \"purges_received\": \(purgesReceived), \"purges_queued\": \(purgesQueued), "
            + "\"purges_replayed\": \(purgesReplayed), \"shared_lookups\": \(sharedLookups), \"shared_hits\": \(sharedHits), "
            + "\"shared_stores\": \(sharedStores), \"shared_stores_refused\": \(sharedStoresRefused), "
            + "\"shared_errors\": \(sharedErrors), \"shared_connections\": \(sharedConnections), "
            + "\"master\": \(master.map(JSON.string) ?? "null"), \"sentinel\": \(followsSentinel), \"failovers\": \(failovers), "
            + "\"seconds_without_master\": \(String(Double(withoutMasterMilliseconds) / 1000)), "
            + "\"last_error\": \(lastError.map(JSON.string) ?? "null")}"
    }
}

/// What the admin answer says of a purge's way through the fleet.
public struct PurgeDelivery: Equatable, Sendable {
    /// Live nodes, this one included, and how many of them applied it
    /// before the answer stopped waiting.
    public var nodes: Int
    public var acknowledged: Int
    /// Redis was unreachable: the purge goes out when it is back.
    public var queued: Bool
    public var error: String?
    /// Replicas of the Redis master that held it before the answer (with
    /// Sentinel: `WAIT 1`); nil when not asked.
    public var replicas: Int?

    public init(nodes: Int, acknowledged: Int, queued: Bool = false, error: String? = nil, replicas: Int? = nil) {
        self.nodes = nodes
        self.acknowledged = acknowledged
        self.queued = queued
        self.error = error
        self.replicas = replicas
    }

    var json: String {
        var text = "{\"nodes\": \(nodes), \"acknowledged\": \(acknowledged)"
        if queued { text += ", \"queued\": true" }
        if let replicas { text += ", \"replicas\": \(replicas)" }
        if let error { text += ", \"error\": \(JSON.string(error))" }
        return text + "}"
    }
}
