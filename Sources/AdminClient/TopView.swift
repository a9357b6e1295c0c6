import Configuration
import FoundationEssentials
import Proxy
import Telemetry
#if canImport(Glibc)
import Glibc
#endif

/// One reading of `/metrics` for `larder top`: every sample by its name
/// with labels, as written (`larder_hits_total`,
/// `larder_request_duration_seconds_count{result="hit"}`).
public struct TopSample {
    /// Monotonic seconds when it was read.
    public var time: Double
    public var values: [String: Double]

    public init(time: Double, metrics: String) {
        self.time = time
        var values: [String: Double] = [:]
        for line in metrics.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        self.values = values
    }

    public subscript(_ name: String) -> Double { values[name] ?? 0 }
}

/// What `larder top` shows, from two readings: pure, so the figures are
/// tested without a terminal.
public struct TopView {
    public let previous: TopSample?
    public let current: TopSample
    /// The last minute's top URLs (nil: not shown).
    public var urls: TopURLs? = nil

    public init(previous: TopSample?, current: TopSample, urls: TopURLs? = nil) {
        (self.previous, self.current, self.urls) = (previous, current, urls)
    }

    public static let results = LatencyHistograms.Result.allCases.map(\.label)

    /// Per second over the interval (0 without a previous reading).
    public func rate(_ name: String) -> Double {
        guard let previous, current.time > previous.time else { return 0 }
        return max(0, current[name] - previous[name]) / (current.time - previous.time)
    }

    public var requestsPerSecond: Double {
        Self.results.reduce(0) { $0 + rate("larder_request_duration_seconds_count{result=\"\($1)\"}") }
    }

    public var requestsSinceStart: Double {
        Self.results.reduce(0) { $0 + current["larder_request_duration_seconds_count{result=\"\($1)\"}"] }
    }

    /// Answers with a 5xx per second: "errors", as `/stats` and the status page count them.
    public var errorsPerSecond: Double {
        Self.results.reduce(0) { $0 + rate("larder_responses_total{code=\"5xx\",result=\"\($1)\"}") }
    }

    /// Hits (fresh and stale) over lookups in the interval; nil without lookups.
    public var hitRatioNow: Double? {
        let hits = rate("larder_hits_total") + rate("larder_stale_hits_total")
        let lookups = hits + rate("larder_misses_total")
        return lookups > 0 ? hits / lookups : nil
    }

    /// A quantile of a histogram over the interval (or since start without
    /// a previous reading), interpolated within its bucket as Prometheus'
    /// histogram_quantile does; nil without observations.
    public func quantile(_ q: Double, of name: String, labels: String = "") -> Double? {
        let prefix = labels.isEmpty ? "" : labels + ","
        var buckets: [(bound: Double, count: Double)] = []
        for key in current.values.keys where key.hasPrefix("\(name)_bucket{\(prefix)le=\"") {
            let bound = key.dropFirst("\(name)_bucket{\(prefix)le=\"".count).prefix { $0 != "\"" }
            let count = current[key] - (previous?[key] ?? 0)
            buckets.append((bound == "+Inf" ? .infinity : Double(bound) ?? .infinity, count))
        }
        buckets.sort { $0.bound < $1.bound }
        guard let total = buckets.last?.count, total > 0 else { return nil }
        let rank = q * total
        var lower = 0.0, below = 0.0
        for bucket in buckets {
            if bucket.count >= rank {
                if bucket.bound == .infinity { return lower }
                let inBucket = bucket.count - below
                return inBucket > 0 ? lower + (bucket.bound - lower) * (rank - below) / inBucket : bucket.bound
            }
            (lower, below) = (bucket.bound, bucket.count)
        }
        return lower
    }

    /// The screen: one line per subject.
    public func lines(admin: String, now: Date = Date()) -> [String] {
        let clock = Self.localClock(now)
        var out = ["larder top  \(admin)  up \(Self.duration(current["larder_uptime_seconds"]))  \(clock)   (q quits)", ""]
        let ratioNow = hitRatioNow.map { Self.percent($0) } ?? "-"
        out.append("requests/s   \(Self.number(requestsPerSecond))   hit ratio \(ratioNow) now, "
                   + "\(Self.percent(current["larder_hit_ratio"])) since start   requests \(Self.count(requestsSinceStart))")
        out.append("per second   hits \(Self.number(rate("larder_hits_total")))  misses \(Self.number(rate("larder_misses_total")))  "
                   + "stale \(Self.number(rate("larder_stale_hits_total")))  revalidated \(Self.number(rate("larder_revalidations_total")))  "
                   + "collapsed \(Self.number(rate("larder_collapsed_total")))  "
                   + "errors \(Self.number(errorsPerSecond))")
        out.append("totals       hits \(Self.count(current["larder_hits_total"]))  misses \(Self.count(current["larder_misses_total"]))  "
                   + "stored \(Self.count(current["larder_stored_total"]))  purged \(Self.count(current["larder_purged_objects_total"]))")
        out.append("latency      hit p99 \(ms(quantile(0.99, of: "larder_request_duration_seconds", labels: "result=\"hit\"")))  "
                   + "miss p50 \(ms(quantile(0.5, of: "larder_request_duration_seconds", labels: "result=\"miss\"")))  "
                   + "miss p99 \(ms(quantile(0.99, of: "larder_request_duration_seconds", labels: "result=\"miss\"")))")
        out.append("upstream     p50 \(ms(quantile(0.5, of: "larder_upstream_response_seconds")))  "
                   + "p99 \(ms(quantile(0.99, of: "larder_upstream_response_seconds")))")
        for tier in ["memory", "disk"] where current["larder_\(tier)_limit_bytes"] > 0 {
            let bytes = current["larder_\(tier)_bytes"], limit = current["larder_\(tier)_limit_bytes"]
            out.append("\(tier + String(repeating: " ", count: max(0, 13 - tier.count)))\(Self.bytes(bytes)) of \(Self.bytes(limit)) "
                       + "(\(Self.percent(bytes / limit)))  \(Self.count(current["larder_\(tier)_objects"])) objects  "
                       + "evictions/s \(Self.number(rate("larder_\(tier)_evictions_total")))")
        }
        out.append("connections  \(Self.count(current["larder_open_connections"])) open   "
                   + "in \(Self.bytes(rate("larder_client_received_bytes_total")))/s  out \(Self.bytes(rate("larder_client_sent_bytes_total")))/s")
        return out + protocolLines + serverLines + (urls?.lines ?? [])
    }

    /// HTTP/2 and HTTP/3 connections and streams per second, for those that
    /// carried any since the start.
    public var protocolLines: [String] {
        [("http2", "larder_http2_connections_total", "larder_http2_requests_total"),
         ("http3", "larder_http3_connections_total", "larder_http3_requests_total")].compactMap { name, connections, streams in
            let total = current[connections]
            guard total > 0 else { return nil }
            return "\(name)        connections/s \(Self.number(rate(connections)))  streams/s \(Self.number(rate(streams)))  "
                + "(\(Self.count(total)) connections, \(Self.count(current[streams])) streams since start)"
        }
    }

    /// One line per upstream server, when there is more than one:
    /// state, requests and errors per second, mean time to the head.
    public var serverLines: [String] {
        let prefix = "larder_upstream_server_up{"
        let labels = current.values.keys.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count).dropLast()) }.sorted()
        guard labels.count > 1 else { return [] }
        return [""] + labels.map { label in
            let heads = rate("larder_upstream_server_heads_total{\(label)}")
            let seconds = rate("larder_upstream_server_head_seconds_total{\(label)}")
            let name = label.firstMatch(of: #/upstream="([^"]*)",server="([^"]*)"/#).map { "\($0.1) \($0.2)" } ?? label
            return "server       \(name)  \(current["larder_upstream_server_up{\(label)}"] == 1 ? "up" : "DOWN")  "
                + "req/s \(Self.number(rate("larder_upstream_server_requests_total{\(label)}")))  "
                + "errors/s \(Self.number(rate("larder_upstream_server_errors_total{\(label)}")))  "
                + "avg \(heads > 0 ? fixedPoint(seconds / heads * 1000, digits: 1) + "ms" : "-")"
        }
    }

    /// One line of `key=value` pairs, for a log or a pipe.
    public func plainLine(now: Date = Date()) -> String {
        let ratio = hitRatioNow.map { fixedPoint($0, digits: 4) } ?? "-"
        return "time=\(now.formatted(Date.ISO8601FormatStyle())) requests_per_s=\(Self.number(requestsPerSecond)) hit_ratio=\(ratio) "
            + "hits_per_s=\(Self.number(rate("larder_hits_total"))) misses_per_s=\(Self.number(rate("larder_misses_total"))) "
            + "requests=\(Self.count(requestsSinceStart)) hits=\(Self.count(current["larder_hits_total"])) "
            + "misses=\(Self.count(current["larder_misses_total"])) "
            + "upstream_p99_ms=\(ms(quantile(0.99, of: "larder_upstream_response_seconds"))) "
            + "memory_bytes=\(Self.count(current["larder_memory_bytes"])) open_connections=\(Self.count(current["larder_open_connections"]))"
            + (urls.map { " top_url=\($0.byRequests.first?.name ?? "-") top_miss=\($0.byMisses.first?.name ?? "-")" } ?? "")
    }

    private func ms(_ seconds: Double?) -> String { seconds.map { fixedPoint($0 * 1000, digits: 2) + "ms" } ?? "-" }
    public static func number(_ value: Double) -> String { fixedPoint(value, digits: 1) }
    public static func count(_ value: Double) -> String { String(Int(value)) }
    public static func percent(_ fraction: Double) -> String { fixedPoint(fraction * 100, digits: 1) + "%" }

    public static func bytes(_ value: Double) -> String {
        for (unit, size) in [("GiB", 1_073_741_824.0), ("MiB", 1_048_576.0), ("KiB", 1024.0)] where value >= size {
            return fixedPoint(value / size, digits: 1) + " " + unit
        }
        return "\(Int(value)) B"
    }

    public static func duration(_ seconds: Double) -> String {
        let s = Int(seconds)
        if s >= 86400 { return "\(s / 86400)d\(s % 86400 / 3600)h" }
        if s >= 3600 { return "\(s / 3600)h\(twoDigits(s % 3600 / 60))m" }
        return "\(s / 60)m\(twoDigits(s % 60))s"
    }

    /// HH:mm:ss in the local time zone.
    public static func localClock(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "--:--:--" }
        return "\(twoDigits(Int(parts.tm_hour))):\(twoDigits(Int(parts.tm_min))):\(twoDigits(Int(parts.tm_sec)))"
    }
}
