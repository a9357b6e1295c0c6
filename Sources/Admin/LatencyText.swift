import Telemetry

/// The latency histograms in Prometheus' text format. Written here, not
/// through swift-prometheus: its histograms take one observation at a time
/// under a lock, while Larder's are bucket counts the workers keep apart
/// and that are summed at a scrape (`LatencyHistograms`).
enum LatencyText {
    typealias Series = LatencyHistograms.Series

    /// `larder_request_first_byte_seconds` and `larder_request_duration_seconds`
    /// by `result`, and `larder_upstream_response_seconds`; nothing when
    /// `latency` is empty.
    static func render(_ latency: [LatencyHistograms.Snapshot]) -> String {
        guard latency.count == Series.allCases.count else { return "" }
        let results = LatencyHistograms.Result.allCases
        var out = ""
        out += histogram("larder_request_first_byte_seconds",
                         "Time from a request's head to its answer's head queued, by how it was answered",
                         results.map { ("result=\"\($0.label)\"", latency[Series.firstByte($0).rawValue]) })
        out += histogram("larder_request_duration_seconds",
                         "Time from a request's head to its answer's last byte queued, by how it was answered",
                         results.map { ("result=\"\($0.label)\"", latency[Series.total($0).rawValue]) })
        out += histogram("larder_upstream_response_seconds", "Time from an upstream request to its response head",
                         [("", latency[Series.upstreamHead.rawValue])])
        out += histogram("larder_loop_turn_seconds",
                         "One worker event-loop turn: its events and the work they deferred; every other connection of the worker waits for it",
                         [("", latency[Series.loopTurn.rawValue])])
        return out
    }

    private static func histogram(_ name: String, _ help: String, _ series: [(labels: String, LatencyHistograms.Snapshot)]) -> String {
        var out = "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
        for (labels, snapshot) in series {
            let prefix = labels.isEmpty ? "" : labels + ","
            var cumulative = 0
            for (i, bound) in LatencyHistograms.boundsMicroseconds.enumerated() {
                cumulative += snapshot.buckets[i]
                out += "\(name)_bucket{\(prefix)le=\"\(seconds(bound))\"} \(cumulative)\n"
            }
            out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(snapshot.count)\n"
            let braces = labels.isEmpty ? "" : "{\(labels)}"
            out += "\(name)_sum\(braces) \(seconds(snapshot.sumMicroseconds))\n"
            out += "\(name)_count\(braces) \(snapshot.count)\n"
        }
        return out
    }

    /// Microseconds as seconds, exactly ("0.00025", "1", "2.5").
    static func seconds(_ microseconds: Int) -> String {
        let whole = microseconds / 1_000_000, fraction = microseconds % 1_000_000
        guard fraction != 0 else { return String(whole) }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 6 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)"
    }
}
