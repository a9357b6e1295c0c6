import Bytes
import Telemetry

/// The endpoints the status page and `larder top` read: `/history` (a
/// point a second, 15 minutes), `/top` (the last minute's requests by URL
/// and by prefix), `/errors` (the last errors), and the page itself.
extension AdminAPI {
    /// Drains the workers' samples and adds a history point; the admin
    /// server calls it every second.
    public func tick() {
        absorbSamples()
        let snapshot = snapshot()
        let requests = snapshot.latency.isEmpty ? 0 : LatencyHistograms.Result.allCases.reduce(0) { sum, result in
            sum + snapshot.latency[LatencyHistograms.Series.total(result).rawValue].count
        }
        activity.tick(now: clock(), totals: Activity.Totals(
            requests: requests, hits: snapshot.hits + snapshot.staleHits, misses: snapshot.misses,
            memoryBytes: snapshot.memory.bytes, diskBytes: snapshot.disk?.bytes ?? 0))
    }

    private func absorbSamples() {
        guard let samples else { return }
        let (taken, dropped) = samples.drain()
        activity.absorb(taken, dropped: dropped)
    }

    /// `GET /history?since=T`: the points after T (all 15 minutes without it).
    func history(_ query: [(name: String, value: String)]) -> Response {
        var since: Int64 = 0
        if let text = query.last(where: { $0.name == "since" })?.value {
            guard let value = Int64(text), value >= 0 else { return .error(400, "since must be a time in seconds since 1970") }
            since = value
        }
        let points = activity.history.drop { $0.time <= since }.map { point in
            "{\"time\": \(point.time), \"seconds\": \(point.seconds), \"requests\": \(point.requests), \"hits\": \(point.hits), \"misses\": \(point.misses), "
                + "\"errors\": \(point.errors), \"memory_bytes\": \(point.memoryBytes), \"disk_bytes\": \(point.diskBytes)}"
        }
        return .json(200, "{\"now\": \(clock()), \"interval_seconds\": 1, \"points\": [\(points.joined(separator: ", "))]}")
    }

    /// `GET /top?limit=N&depth=D`: the last minute's requests by URL (all
    /// of them, and those that went upstream) and by prefix of D segments.
    /// Hits are sampled (`RequestSamples.hitStride`): their counts are estimates.
    func top(_ query: [(name: String, value: String)]) -> Response {
        guard let limit = Self.integer(query, "limit", default: 10, in: 1...100) else { return .error(400, "limit must be 1 to 100") }
        guard let depth = Self.integer(query, "depth", default: 1, in: 1...8) else { return .error(400, "depth must be 1 to 8") }
        absorbSamples()
        let targets = activity.targets(now: clock())
        func list(_ ranked: [(String, Activity.Count)], key: String) -> String {
            "[" + ranked.map { name, count in
                "{\"\(key)\": \(JSON.string(name)), \"requests\": \(count.requests), \"misses\": \(count.misses), \"errors\": \(count.errors)}"
            }.joined(separator: ", ") + "]"
        }
        let prefixes = Activity.byPrefix(targets, depth: depth)
        return .json(200, """
            {"window_seconds": \(Activity.topSeconds), "hit_sample_every": \(RequestSamples.hitStride), \
            "dropped_samples": \(activity.dropped), \
            "by_requests": \(list(Activity.ranked(targets, by: \.requests, limit: limit), key: "target")), \
            "by_misses": \(list(Activity.ranked(targets, by: \.misses, limit: limit), key: "target")), \
            "prefixes": \(list(Activity.ranked(prefixes, by: \.requests, limit: limit), key: "prefix"))}
            """)
    }

    /// `GET /errors`: the last answers with a 5xx status, newest first.
    func recentErrors() -> Response {
        absorbSamples()
        let errors = activity.errors.reversed().map { error in
            "{\"time\": \(error.time), \"method\": \(JSON.string(error.method)), \"target\": \(JSON.string(error.target)), "
                + "\"status\": \(error.status), \"result\": \"\(error.result.label)\", \"cache\": \(JSON.string(error.cache ?? "-"))}"
        }
        return .json(200, "{\"errors\": [\(errors.joined(separator: ", "))]}")
    }

    /// The parameter `name` as an integer in `range`, `value` when absent; nil when wrong.
    private static func integer(_ query: [(name: String, value: String)], _ name: String, default value: Int,
                                in range: ClosedRange<Int>) -> Int? {
        guard let text = query.last(where: { $0.name == name })?.value else { return value }
        guard let n = Int(text), range.contains(n) else { return nil }
        return n
    }
}
