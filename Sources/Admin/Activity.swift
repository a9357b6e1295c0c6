import Telemetry

/// What the status page and `larder top` show over time, kept by the admin
/// thread: a point a second for the last 15 minutes (from the counters),
/// the sampled requests of the last minute by target (top URLs and
/// prefixes) and the last errors. Bounded whatever the traffic: a point a
/// second, `maxTargetsPerSecond` targets a second, `errorsKept` errors.
final class Activity {
    struct Point: Equatable {
        /// The end of the time it counts, and how long that was (1 unless a tick came late).
        var time: Int64
        var seconds: Int64 = 1
        var requests = 0, hits = 0, misses = 0, errors = 0
        var memoryBytes = 0, diskBytes = 0
    }

    /// Cumulative figures a point is the difference of.
    struct Totals: Equatable {
        var requests = 0, hits = 0, misses = 0
        var memoryBytes = 0, diskBytes = 0
    }

    struct Count: Equatable {
        var requests = 0, misses = 0, errors = 0
    }

    static let historySeconds = 900
    static let topSeconds: Int64 = 60
    /// Distinct targets counted per second; later ones count as "(other)".
    static let maxTargetsPerSecond = 1000
    /// A target longer than this is counted by its first bytes.
    static let maxTargetBytes = 256
    static let errorsKept = 50
    static let other = "(other)"

    private(set) var history: [Point] = []
    private var previous: (time: Int64, totals: Totals, errors: Int)?
    /// Sampled requests by the second they ended in, then by target.
    private var seconds: [Int64: [String: Count]] = [:]
    /// Newest last.
    private(set) var errors: [RequestSample] = []
    private var errorCount = 0
    /// Samples the workers dropped (their queue was full between two drains).
    private(set) var dropped = 0

    /// Counts what the workers sampled. Each worker's samples come in time
    /// order, so a second's table is taken out once per run of samples of
    /// that second (taken out, not copied: counted in place), and a sample
    /// costs one hash of its target.
    func absorb(_ samples: [RequestSample], dropped: Int) {
        self.dropped += dropped
        var time = Int64.min, targets: [String: Count] = [:]
        for sample in samples {
            if sample.time != time {
                if time != .min { seconds[time] = targets }
                time = sample.time
                targets = seconds.removeValue(forKey: time) ?? [:]
            }
            var key = sample.target
            if key.utf8.count > Self.maxTargetBytes { key = String(decoding: key.utf8.prefix(Self.maxTargetBytes), as: UTF8.self) }
            if let index = targets.index(forKey: key) {
                targets.values[index].add(sample)
            } else {
                targets[targets.count < Self.maxTargetsPerSecond ? key : Self.other, default: Count()].add(sample)
            }
            if sample.isError {
                errorCount += 1
                errors.append(sample)
                if errors.count > Self.errorsKept { errors.removeFirst(errors.count - Self.errorsKept) }
            }
        }
        if time != .min { seconds[time] = targets }
    }

    /// Adds the point for the time since the last tick (the first tick only
    /// sets the base) and forgets what is older than what is shown.
    func tick(now: Int64, totals: Totals) {
        if let previous, now > previous.time {
            let was = previous.totals
            history.append(Point(time: now, seconds: now - previous.time, requests: max(0, totals.requests - was.requests), hits: max(0, totals.hits - was.hits),
                                 misses: max(0, totals.misses - was.misses), errors: errorCount - previous.errors,
                                 memoryBytes: totals.memoryBytes, diskBytes: totals.diskBytes))
            if history.count > Self.historySeconds { history.removeFirst(history.count - Self.historySeconds) }
        }
        if previous == nil || now > previous!.time { previous = (now, totals, errorCount) }
        seconds = seconds.filter { $0.key > now - Self.topSeconds }
    }

    /// Requests by target over the last `window` seconds before `now`.
    func targets(now: Int64, window: Int64 = Activity.topSeconds) -> [String: Count] {
        var merged: [String: Count] = [:]
        for (time, targets) in seconds where time > now - window && time <= now {
            merged.merge(targets) { $0 + $1 }
        }
        return merged
    }

    /// The path's first `depth` segments and a slash ("/v1/users/7?a", 1:
    /// "/v1/"); a shorter path is itself, without its query.
    static func prefix(of target: String, depth: Int) -> String {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
        guard path.hasPrefix("/") else { return path }
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count > depth else { return path }
        return "/" + segments.prefix(depth).joined(separator: "/") + "/"
    }

    /// Counts by prefix.
    static func byPrefix(_ targets: [String: Count], depth: Int) -> [String: Count] {
        var out: [String: Count] = [:]
        for (target, count) in targets where target != other { out[prefix(of: target, depth: depth), default: Count()] += count }
        return out
    }

    /// The first `limit` by `key`, largest first (ties by name, so the order is stable).
    static func ranked(_ counts: [String: Count], by key: KeyPath<Count, Int>, limit: Int) -> [(String, Count)] {
        counts.filter { $0.value[keyPath: key] > 0 }
            .sorted { $0.value[keyPath: key] != $1.value[keyPath: key] ? $0.value[keyPath: key] > $1.value[keyPath: key] : $0.key < $1.key }
            .prefix(limit).map { ($0.key, $0.value) }
    }
}

extension Activity.Count {
    mutating func add(_ sample: RequestSample) {
        requests += sample.weight
        if sample.result == .miss || sample.result == .pass { misses += 1 }
        if sample.isError { errors += 1 }
    }

    static func + (a: Self, b: Self) -> Self {
        Self(requests: a.requests + b.requests, misses: a.misses + b.misses, errors: a.errors + b.errors)
    }

    static func += (a: inout Self, b: Self) { a = a + b }
}
