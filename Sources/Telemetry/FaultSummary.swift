import EventLoop
import Synchronization

/// Upstream faults, summed per kind over every worker and logged at
/// warning at most once per interval per kind, with how many there were:
/// an outage under load writes a line every 10 s, not three per request
/// (two retries and the failure, at info, were 27,000 lines in 2 s).
public final class FaultSummary: Sendable {
    public static let shared = FaultSummary()
    public static let intervalMilliseconds: UInt64 = 10_000

    private struct Kind {
        var loggedAt: UInt64
        var unlogged: Int
        /// The latest unlogged fault's words and example (for `due`).
        var latest = ""
        var example = ""
    }
    private let kinds = Mutex<[String: Kind]>([:])

    /// Counts a fault of `kind` (its text, numbers made `N` so that one
    /// kind stays one); returns the line to log now, if one is due, in
    /// this fault's words.
    public func note(_ kind: String, example: @autoclosure () -> String, now: UInt64 = EventLoop.nowMilliseconds()) -> String? {
        let key = Self.normalized(kind)
        let count = kinds.withLock { kinds -> Int? in
            if var known = kinds[key], now &- known.loggedAt < Self.intervalMilliseconds {
                known.unlogged += 1
                known.latest = kind
                known.example = example()
                kinds[key] = known
                return nil
            }
            // Kinds long quiet are forgotten rather than grow.
            if kinds.count >= 256 { kinds = kinds.filter { now &- $0.value.loggedAt < Self.intervalMilliseconds } }
            let unlogged = (kinds[key]?.unlogged ?? 0) + 1
            kinds[key] = Kind(loggedAt: now, unlogged: 0)
            return unlogged
        }
        guard let count else { return nil }
        return Self.line(kind, count: count, example: example())
    }

    /// The lines of the kinds whose faults since their last line have not
    /// been told and whose interval is over (the next such fault may never
    /// come): called by a timer, every second, so that an outage's count is
    /// logged within `intervalMilliseconds` of its first unlogged fault.
    public func due(now: UInt64 = EventLoop.nowMilliseconds()) -> [String] {
        kinds.withLock { kinds in
            var lines: [String] = []
            for (key, known) in kinds where known.unlogged > 0 && now &- known.loggedAt >= Self.intervalMilliseconds {
                lines.append(Self.line(known.latest, count: known.unlogged, example: known.example))
                kinds[key] = Kind(loggedAt: now, unlogged: 0)
            }
            return lines
        }
    }

    /// The latest fault's own words (its address, port, status), not the
    /// kind's key with every number made N, and how many there were.
    private static func line(_ kind: String, count: Int, example: String) -> String {
        let times = count == 1 ? "once" : "\(count) times"
        return "\(kind) (\(times) since the last such line, at most one each \(intervalMilliseconds / 1000) s; latest: \(example))"
    }

    /// Digit runs become `N` (ports, times, counts vary within one kind).
    public static func normalized(_ text: String) -> String {
        var out = ""
        var inDigits = false
        for c in text {
            if c.isASCII && c.isNumber {
                if !inDigits { out.append("N") }
                inDigits = true
            } else {
                out.append(c)
                inDigits = false
            }
        }
        return out
    }
}
