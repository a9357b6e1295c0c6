import Bytes
import CacheStorage
import Prometheus
import Telemetry
import Upstream

/// The figures `/stats` and `/metrics` report, read once per request.
/// One upstream pool as `/stats` and `/metrics` show it.
public struct UpstreamPoolFigures: Equatable, Sendable {
    public var name: String
    public var balance: String
    public var servers: [UpstreamServer.Figures]

    public init(_ pool: UpstreamPool, now: UInt64) {
        name = pool.name
        balance = pool.balance.rawValue
        servers = pool.servers.map { $0.figures(now: now, checked: pool.healthCheck != nil) }
    }

    /// A non-negative number to one decimal ("12.5").
    static func tenths(_ value: Double) -> String {
        let n = Int((max(0, value) * 10).rounded())
        return "\(n / 10).\(n % 10)"
    }
}

public struct StatsSnapshot: Equatable, Sendable {
    /// Which Larder this is: its version, its node name (the fleet's, else
    /// the host's) and its upstream (the status page's header).
    public var version = ""
    public var node = ""
    public var upstream = ""

    public var hits: Int
    public var misses: Int
    public var staleHits: Int
    public var revalidations: Int
    public var collapsed: Int
    public var upstreamErrors: Int
    public var stored: Int
    public var backgroundRefreshes: Int
    /// Whole responses fetched in the background after a range miss.
    public var rangeFills = 0
    public var upgrades = 0, upgradedBytes = 0
    public var clientErrors: Int
    public var refusedConnections: Int
    /// Times a connection held back answers for a client leaving them unread.
    public var outputPauses = 0
    public var sendTimeouts = 0
    /// Request bodies streamed because held ones reached request_buffer_total.
    public var streamedBodies = 0
    /// Lookups made on an I/O thread because the disk would have been waited for.
    public var offloadedLookups = 0
    /// Body reads made on an I/O thread because the file was not in the page cache.
    public var offloadedReads = 0
    /// TLS handshakes completed, of them resumed sessions, failed ones, and
    /// plain HTTP requests sent to a TLS listener.
    public var tlsHandshakes = 0
    public var tlsResumed = 0
    public var tlsFailures = 0
    public var plainOnTLS = 0
    /// HTTP/2 connections, requests on them, streams ended by a reset, and
    /// connections ended for a protocol error or a flood.
    public var http2Connections = 0
    public var http2Requests = 0
    public var http2Resets = 0
    public var http2Refusals = 0
    public var http3Connections = 0
    public var http3Requests = 0
    public var http3Resets = 0
    public var quicRetries = 0
    public var quicStatelessResets = 0
    public var quicDropped = 0
    /// Requests refused by an access list (403) and by a rate limit (429).
    public var accessDenied = 0
    public var rateLimited = 0
    /// Bytes read from clients and written to them.
    public var receivedBytes = 0
    public var sentBytes = 0
    /// Latency histograms, by `LatencyHistograms.Series` (empty: none kept).
    public var latency: [LatencyHistograms.Snapshot] = []
    /// Answers by status class and result: `[class][result]` (`ResponseCounts`).
    public var responses: [[Int]] = []
    /// Each upstream pool's servers, the default pool first.
    public var upstreams: [UpstreamPoolFigures] = []
    /// Admin connections refused over admin_max_connections.
    public var adminRefusedConnections = 0
    /// Admin requests refused for a missing or wrong token.
    public var adminFailedSignIns = 0
    /// Access log bytes dropped because its writer was too far behind.
    public var accessLogDroppedBytes = 0
    public var openConnections = 0
    /// Disk reads and lookups on the I/O threads now, waiting or running.
    public var ioJobs = 0
    /// The I/O threads there may be (`io_threads`).
    public var ioThreads = 0
    public var purged: Int
    /// Every tier's figures, fastest first (the first is the memory tier).
    public var tiers: [TierStats]
    public var uptimeSeconds: Int64
    /// nil for a node on its own.
    public var fleet: FleetStatus? = nil

    public var memory: TierStats { tiers[0] }
    public var diskEvictions: Int { disk?.evictions ?? 0 }
    public var diskWriteFailures: Int { disk?.writeFailures ?? 0 }
    public var disk: TierStats? { tiers.first { $0.name == "disk" } }

    /// Hits (fresh and stale) over every lookup answered from cache or upstream.
    public var hitRatio: Double {
        let served = hits + staleHits
        let total = served + misses
        return total == 0 ? 0 : Double(served) / Double(total)
    }

    /// Answers with a 5xx: what "errors" means in `/stats`, `larder top` and
    /// on the status page.
    public var errors: Int { responses.count == ResponseCounts.classes.count ? responses[4].reduce(0, +) : 0 }

    /// [{"name": ..., "balance": ..., "servers": [{"url": ..., "up": true, ...}]}]
    private var upstreamsJSON: String {
        "[" + upstreams.map { pool in
            "{\"name\": \(JSON.string(pool.name)), \"balance\": \(JSON.string(pool.balance)), \"servers\": ["
                + pool.servers.map { s in
                    "{\"url\": \(JSON.string(s.base)), \"up\": \(s.up), \"requests\": \(s.requests), \"errors\": \(s.errors), "
                        + "\"marked_down\": \(s.markedDown), " + (s.healthy.map { "\"healthy\": \($0), " } ?? "")
                        + "\"average_ms\": \(UpstreamPoolFigures.tenths(s.averageMilliseconds))}"
                }.joined(separator: ", ") + "]}"
        }.joined(separator: ", ") + "]"
    }

    /// {"2xx": {"hit": n, "miss": n, ...}, ...}
    private var responsesJSON: String {
        guard responses.count == ResponseCounts.classes.count else { return "{}" }
        let results = LatencyHistograms.Result.allCases
        return "{" + ResponseCounts.classes.indices.map { c in
            "\"\(ResponseCounts.classes[c])\": {" + results.map { "\"\($0.label)\": \(responses[c][$0.rawValue])" }.joined(separator: ", ") + "}"
        }.joined(separator: ", ") + "}"
    }

    public var json: String {
        let ratio = (hitRatio * 10000).rounded() / 10000
        // One object per tier under its name ("disk": null without one).
        var sections = tiers.map { tier in
            "\"\(tier.name)\": {\"objects\": \(tier.objects), \"bytes\": \(tier.bytes), \"limit_bytes\": \(tier.limitBytes), "
                + "\"evictions\": \(tier.evictions), \"index_complete\": \(tier.ready)"
                + (tier.name == "disk" ? ", \"write_failures\": \(tier.writeFailures)}" : "}")
        }
        if disk == nil { sections.append("\"disk\": null") }
        return """
            {"hits": \(hits), "misses": \(misses), "stale_hits": \(staleHits), "revalidations": \(revalidations), \
            "collapsed": \(collapsed), "upstream_errors": \(upstreamErrors), "stored": \(stored), \
            "background_refreshes": \(backgroundRefreshes), "range_fills": \(rangeFills), "upgrades": \(upgrades), "upgraded_bytes": \(upgradedBytes), "client_errors": \(clientErrors), \
            "refused_connections": \(refusedConnections), "output_pauses": \(outputPauses), \
            "send_timeouts": \(sendTimeouts), "streamed_request_bodies": \(streamedBodies), \
            "offloaded_lookups": \(offloadedLookups), "offloaded_reads": \(offloadedReads), \
            "tls_handshakes": \(tlsHandshakes), "tls_resumed": \(tlsResumed), "tls_handshake_failures": \(tlsFailures), \
            "plain_http_on_tls": \(plainOnTLS), "http2_connections": \(http2Connections), \
            "http2_requests": \(http2Requests), "http2_stream_resets": \(http2Resets), \
            "http2_connections_refused": \(http2Refusals), \
            "http3_connections": \(http3Connections), "http3_requests": \(http3Requests), \
            "http3_stream_resets": \(http3Resets), "quic_retries": \(quicRetries), \
            "quic_stateless_resets": \(quicStatelessResets), "quic_datagrams_dropped": \(quicDropped), \
            "access_denied": \(accessDenied), "rate_limited": \(rateLimited), \
            "admin_refused_connections": \(adminRefusedConnections), "admin_failed_sign_ins": \(adminFailedSignIns), \
            "access_log_dropped_bytes": \(accessLogDroppedBytes), \
            "open_connections": \(openConnections), "io_jobs": \(ioJobs), "io_threads": \(ioThreads), "purged": \(purged), \
            "responses": \(responsesJSON), "errors": \(errors), "upstreams": \(upstreamsJSON), \
            "hit_ratio": \(ratio), \(sections.joined(separator: ", ")), "fleet": \(fleet?.json ?? "null"), \
            "uptime_seconds": \(uptimeSeconds), "version": \(JSON.string(version)), "node": \(JSON.string(node)), \
            "upstream": \(JSON.string(upstream))}
            """
    }
}

/// Prometheus text exposition through swift-prometheus. Larder's counters
/// live in atomics the workers bump; at each scrape the registry's counters
/// are advanced by what changed since the last one.
final class Metrics {
    private let registry = PrometheusCollectorRegistry()
    /// For larder_build_info and process_start_time_seconds.
    var version = ""
    var startedAt: Int64 = 0
    private var counters: [(Counter, KeyPath<StatsSnapshot, Int>)] = []
    private var last: [Int]
    private let gauges: (memoryObjects: Gauge, memoryBytes: Gauge, memoryLimit: Gauge,
                         diskObjects: Gauge, diskBytes: Gauge, diskLimit: Gauge, uptime: Gauge, hitRatio: Gauge)
    /// Responses purged through the admin API (kept here: only the admin purges).
    var purged = 0
    private let openConnections: Gauge, diskQueue: Gauge, ioJobs: Gauge

    init() {
        func describe(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            metricName(nil, metric, unit, help)
        }
        let counterSpecs: [(String, String, KeyPath<StatsSnapshot, Int>)] = [
            ("hits", "Requests answered with a fresh stored response", \.hits),
            ("stale_hits", "Requests answered with a stale stored response", \.staleHits),
            ("misses", "Cacheable requests forwarded upstream", \.misses),
            ("revalidations", "Stored responses revalidated with a 304", \.revalidations),
            ("collapsed", "Requests that waited on another request's fetch", \.collapsed),
            ("upstream_errors", "Upstream transfers that failed", \.upstreamErrors),
            ("stored", "Responses stored", \.stored),
            ("background_refreshes", "Background refreshes started", \.backgroundRefreshes),
            ("range_fills", "Whole responses fetched in the background after a range miss", \.rangeFills),
            ("upgrades", "Upgraded connections (WebSocket) tunnelled after the upstream's 101", \.upgrades),
            ("upgraded_bytes", "Bytes tunnelled through upgraded connections, both ways", \.upgradedBytes),
            ("client_errors", "Malformed or refused client requests", \.clientErrors),
            ("refused_connections", "Connections answered 503 over max_connections", \.refusedConnections),
            ("output_pauses", "Times a connection held back answers while its client left 1 MiB unread", \.outputPauses),
            ("send_timeouts", "Connections closed after send_timeout without the client reading", \.sendTimeouts),
            ("streamed_request_bodies", "Request bodies streamed because held ones reached request_buffer_total", \.streamedBodies),
            ("offloaded_lookups", "Disk lookups made on an I/O thread because the file was not in the page cache", \.offloadedLookups),
            ("offloaded_reads", "Body reads made on an I/O thread because the file was not in the page cache", \.offloadedReads),
            ("tls_handshakes", "TLS handshakes completed with clients", \.tlsHandshakes),
            ("tls_resumed", "TLS handshakes that resumed a session", \.tlsResumed),
            ("tls_handshake_failures", "TLS handshakes that failed or timed out", \.tlsFailures),
            ("plain_http_on_tls", "Plain HTTP requests sent to a TLS listener (answered 400)", \.plainOnTLS),
            ("http2_connections", "HTTP/2 connections taken (h2 and h2c)", \.http2Connections),
            ("http2_requests", "Requests on HTTP/2 connections", \.http2Requests),
            ("http2_stream_resets", "HTTP/2 streams that ended in a reset", \.http2Resets),
            ("http2_connections_refused", "HTTP/2 connections ended for a protocol error or a flood", \.http2Refusals),
            ("http3_connections", "HTTP/3 (QUIC) connections taken", \.http3Connections),
            ("http3_requests", "HTTP/3 request streams", \.http3Requests),
            ("http3_stream_resets", "HTTP/3 streams the client reset or asked to stop", \.http3Resets),
            ("quic_retries", "QUIC Retry packets sent (address validation under load)", \.quicRetries),
            ("quic_stateless_resets", "QUIC Stateless Resets sent for unknown connections", \.quicStatelessResets),
            ("quic_datagrams_dropped", "UDP datagrams on QUIC listeners dropped unread (not QUIC, refused Initials)", \.quicDropped),
            ("access_denied", "Requests refused by an access list (allow, deny: 403)", \.accessDenied),
            ("rate_limited", "Requests refused by a rate limit (429)", \.rateLimited),
            ("admin_refused_connections", "Admin connections refused over admin_max_connections", \.adminRefusedConnections),
            ("admin_failed_sign_ins", "Admin requests refused for a missing or wrong token (401)", \.adminFailedSignIns),
            ("access_log_dropped_bytes", "Access log bytes dropped because its writer was too far behind", \.accessLogDroppedBytes),
            ("purged_objects", "Stored responses removed or marked stale by purges", \.purged),
            ("client_received_bytes", "Bytes read from clients", \.receivedBytes),
            ("client_sent_bytes", "Bytes written to clients", \.sentBytes),
            ("memory_evictions", "Responses evicted from the memory tier", \.memory.evictions),
            ("disk_evictions", "Responses evicted from the disk tier", \.diskEvictions),
            ("disk_write_failures", "Responses that were to be written to the disk tier and were not (a full or failing disk)",
             \.diskWriteFailures),
        ]
        for (metric, help, path) in counterSpecs {
            counters.append((registry.makeCounter(descriptor: describe(metric, "total", help)), path))
        }
        last = Array(repeating: 0, count: counters.count)
        gauges = (
            registry.makeGauge(descriptor: describe("memory", "objects", "Responses in the memory tier")),
            registry.makeGauge(descriptor: describe("memory", "bytes", "Bytes charged to the memory tier")),
            registry.makeGauge(descriptor: describe("memory_limit", "bytes", "Memory tier limit")),
            registry.makeGauge(descriptor: describe("disk", "objects", "Responses in the disk tier")),
            registry.makeGauge(descriptor: describe("disk", "bytes", "Bytes charged to the disk tier")),
            registry.makeGauge(descriptor: describe("disk_limit", "bytes", "Disk tier limit (0: no disk tier)")),
            registry.makeGauge(descriptor: describe("uptime", "seconds", "Seconds since start")),
            registry.makeGauge(descriptor: describe("hit", "ratio", "Hits over lookups since start (0 to 1)"))
        )
        openConnections = registry.makeGauge(descriptor: describe("open_connections", "", "Client connections open now"))
        diskQueue = registry.makeGauge(descriptor: describe("disk_write_queue", "bytes", "Bytes waiting to be written to the disk tier"))
        ioJobs = registry.makeGauge(descriptor: describe("io_jobs", "", "Disk reads and lookups on the I/O threads, waiting or running"))
    }

    func render(_ snapshot: StatsSnapshot) -> String {
        for (i, (counter, path)) in counters.enumerated() {
            let value = snapshot[keyPath: path]
            if value > last[i] { counter.increment(by: Int64(value - last[i])) }
            last[i] = value
        }
        gauges.memoryObjects.set(Double(snapshot.memory.objects))
        gauges.memoryBytes.set(Double(snapshot.memory.bytes))
        gauges.memoryLimit.set(Double(snapshot.memory.limitBytes))
        gauges.diskObjects.set(Double(snapshot.disk?.objects ?? 0))
        gauges.diskBytes.set(Double(snapshot.disk?.bytes ?? 0))
        gauges.diskLimit.set(Double(snapshot.disk?.limitBytes ?? 0))
        gauges.uptime.set(Double(snapshot.uptimeSeconds))
        gauges.hitRatio.set(snapshot.hitRatio)
        openConnections.set(Double(snapshot.openConnections))
        diskQueue.set(Double(snapshot.disk?.queuedBytes ?? 0))
        ioJobs.set(Double(snapshot.ioJobs))
        if let fleet = snapshot.fleet {
            if fleetMetrics == nil { fleetMetrics = FleetMetrics(registry) }
            fleetMetrics?.update(fleet)
        }
        return registry.emitToString() + LatencyText.render(snapshot.latency) + ResponseText.render(snapshot.responses)
            + UpstreamText.render(snapshot.upstreams)
            + ProcessText.render(version: version, startedAt: startedAt)
    }

    /// Made at the first scrape of a node in a fleet (a node alone shows none).
    private var fleetMetrics: FleetMetrics?
}

/// Names are larder_[subsystem_]<metric>_<unit>: the unit (total, bytes,
/// ...) is part of the name.
private func metricName(_ subsystem: String?, _ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
    MetricNameDescriptor(namespace: "larder", subsystem: subsystem, metricName: metric, unitName: unit, helpText: help)
}

/// `larder_fleet_*`: the fleet section of `/stats` for Prometheus.
private final class FleetMetrics {
    private var counters: [(Counter, KeyPath<FleetStatus, Int>, last: Int)] = []
    private let connected: Gauge, nodes: Gauge, roundTrip: Gauge, queued: Gauge, sharedConnections: Gauge, clockOffset: Gauge
    private let withoutMaster: Counter
    private var withoutMasterLast: UInt64 = 0

    init(_ registry: PrometheusCollectorRegistry) {
        func describe(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            metricName("fleet", metric, unit, help)
        }
        let specs: [(String, String, KeyPath<FleetStatus, Int>)] = [
            ("purges_sent", "Purges this node sent to the fleet", \.purgesSent),
            ("purges_received", "Purges from other nodes applied here", \.purgesReceived),
            ("purges_replayed", "Purges missed while away, applied on return", \.purgesReplayed),
            ("shared_lookups", "Lookups in the fleet's shared tier", \.sharedLookups),
            ("shared_hits", "Shared-tier lookups that found the URL", \.sharedHits),
            ("shared_stores", "Responses stored in the shared tier", \.sharedStores),
            ("shared_stores_refused", "Shared-tier stores refused: a purge came first", \.sharedStoresRefused),
            ("shared_errors", "Shared-tier faults (Redis errors, lost connections)", \.sharedErrors),
            ("failovers", "Times the Redis master moved (Sentinel named another)", \.failovers),
        ]
        counters = specs.map { (registry.makeCounter(descriptor: describe($0.0, "total", $0.1)), $0.2, 0) }
        connected = registry.makeGauge(descriptor: describe("connected", "", "1 while this node reads the fleet's purges"))
        nodes = registry.makeGauge(descriptor: describe("nodes", "", "Live nodes seen, this one included"))
        roundTrip = registry.makeGauge(descriptor: describe("redis_rtt", "seconds", "The last Redis round trip"))
        queued = registry.makeGauge(descriptor: describe("purges_queued", "", "Purges waiting for Redis"))
        sharedConnections = registry.makeGauge(descriptor: describe("shared_connections", "", "Workers connected to Redis"))
        clockOffset = registry.makeGauge(descriptor: describe("clock_offset", "seconds", "Redis's clock minus this node's"))
        withoutMaster = registry.makeCounter(descriptor: describe("without_master", "seconds_total",
                                                                  "Time this node's purge stream had no Redis master"))
    }

    func update(_ status: FleetStatus) {
        for i in counters.indices {
            let value = status[keyPath: counters[i].1]
            if value > counters[i].last { counters[i].0.increment(by: Int64(value - counters[i].last)) }
            counters[i].last = value
        }
        connected.set(Double(status.connected ? 1 : 0))
        nodes.set(Double(status.nodes))
        roundTrip.set(Double(status.roundTripMicroseconds ?? 0) / 1_000_000)
        queued.set(Double(status.purgesQueued))
        sharedConnections.set(Double(status.sharedConnections))
        clockOffset.set(Double(status.clockOffsetMilliseconds ?? 0) / 1000)
        if status.withoutMasterMilliseconds > withoutMasterLast {
            withoutMaster.increment(by: Double(status.withoutMasterMilliseconds - withoutMasterLast) / 1000)
        }
        withoutMasterLast = status.withoutMasterMilliseconds
    }
}
