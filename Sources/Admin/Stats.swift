import Prometheus

/// The figures `/stats` and `/metrics` report, read once per request.
public struct StatsSnapshot: Equatable, Sendable {
    public struct Disk: Equatable, Sendable {
        public var objects: Int
        public var bytes: Int
        public var limitBytes: Int
        public var indexComplete: Bool
    }

    public var hits: Int
    public var misses: Int
    public var staleHits: Int
    public var revalidations: Int
    public var collapsed: Int
    public var upstreamErrors: Int
    public var stored: Int
    public var backgroundRefreshes: Int
    public var clientErrors: Int
    public var refusedConnections: Int
    public var purged: Int
    public var memoryObjects: Int
    public var memoryBytes: Int
    public var memoryLimitBytes: Int
    public var memoryEvictions: Int
    public var disk: Disk?
    public var uptimeSeconds: Int64

    /// Hits (fresh and stale) over every lookup answered from cache or upstream.
    public var hitRatio: Double {
        let served = hits + staleHits
        let total = served + misses
        return total == 0 ? 0 : Double(served) / Double(total)
    }

    public var json: String {
        let ratio = (hitRatio * 10000).rounded() / 10000
        let disk = self.disk.map {
            "{\"objects\": \($0.objects), \"bytes\": \($0.bytes), \"limit_bytes\": \($0.limitBytes), \"index_complete\": \($0.indexComplete)}"
        } ?? "null"
        return """
            {"hits": \(hits), "misses": \(misses), "stale_hits": \(staleHits), "revalidations": \(revalidations), \
            "collapsed": \(collapsed), "upstream_errors": \(upstreamErrors), "stored": \(stored), \
            "background_refreshes": \(backgroundRefreshes), "client_errors": \(clientErrors), \
            "refused_connections": \(refusedConnections), "purged": \(purged), \
            "hit_ratio": \(ratio), \
            "memory": {"objects": \(memoryObjects), "bytes": \(memoryBytes), "limit_bytes": \(memoryLimitBytes), \
            "evictions": \(memoryEvictions)}, \
            "disk": \(disk), "uptime_seconds": \(uptimeSeconds)}
            """
    }
}

/// Prometheus text exposition through swift-prometheus. Larder's counters
/// live in atomics the workers bump; at each scrape the registry's counters
/// are advanced by what changed since the last one.
final class Metrics {
    private let registry = PrometheusCollectorRegistry()
    private var counters: [(Counter, KeyPath<StatsSnapshot, Int>)] = []
    private var last: [Int]
    private let gauges: (memoryObjects: Gauge, memoryBytes: Gauge, memoryLimit: Gauge,
                         diskObjects: Gauge, diskBytes: Gauge, diskLimit: Gauge, uptime: Gauge, hitRatio: Gauge)
    /// Responses purged through the admin API (kept here: only the admin purges).
    var purged = 0

    init() {
        let counterSpecs: [(String, String, KeyPath<StatsSnapshot, Int>)] = [
            ("larder_hits_total", "Requests answered with a fresh stored response", \.hits),
            ("larder_stale_hits_total", "Requests answered with a stale stored response", \.staleHits),
            ("larder_misses_total", "Cacheable requests forwarded upstream", \.misses),
            ("larder_revalidations_total", "Stored responses revalidated with a 304", \.revalidations),
            ("larder_collapsed_total", "Requests that waited on another request's fetch", \.collapsed),
            ("larder_upstream_errors_total", "Upstream transfers that failed", \.upstreamErrors),
            ("larder_stored_total", "Responses stored", \.stored),
            ("larder_background_refreshes_total", "Background refreshes started", \.backgroundRefreshes),
            ("larder_client_errors_total", "Malformed or refused client requests", \.clientErrors),
            ("larder_refused_connections_total", "Connections answered 503 over max_connections", \.refusedConnections),
            ("larder_purged_objects_total", "Stored responses removed or marked stale by purges", \.purged),
        ]
        for (name, help, path) in counterSpecs { counters.append((registry.makeCounter(name: name, help: help), path)) }
        last = Array(repeating: 0, count: counters.count)
        gauges = (
            registry.makeGauge(name: "larder_memory_objects", help: "Responses in the memory tier"),
            registry.makeGauge(name: "larder_memory_bytes", help: "Bytes charged to the memory tier"),
            registry.makeGauge(name: "larder_memory_limit_bytes", help: "Memory tier limit"),
            registry.makeGauge(name: "larder_disk_objects", help: "Responses in the disk tier"),
            registry.makeGauge(name: "larder_disk_bytes", help: "Bytes charged to the disk tier"),
            registry.makeGauge(name: "larder_disk_limit_bytes", help: "Disk tier limit (0: no disk tier)"),
            registry.makeGauge(name: "larder_uptime_seconds", help: "Seconds since start"),
            registry.makeGauge(name: "larder_hit_ratio", help: "Hits over lookups since start (0 to 1)")
        )
    }

    func render(_ snapshot: StatsSnapshot) -> String {
        for (i, (counter, path)) in counters.enumerated() {
            let value = snapshot[keyPath: path]
            if value > last[i] { counter.increment(by: Int64(value - last[i])) }
            last[i] = value
        }
        gauges.memoryObjects.set(Double(snapshot.memoryObjects))
        gauges.memoryBytes.set(Double(snapshot.memoryBytes))
        gauges.memoryLimit.set(Double(snapshot.memoryLimitBytes))
        gauges.diskObjects.set(Double(snapshot.disk?.objects ?? 0))
        gauges.diskBytes.set(Double(snapshot.disk?.bytes ?? 0))
        gauges.diskLimit.set(Double(snapshot.disk?.limitBytes ?? 0))
        gauges.uptime.set(Double(snapshot.uptimeSeconds))
        gauges.hitRatio.set(snapshot.hitRatio)
        return registry.emitToString()
    }
}
