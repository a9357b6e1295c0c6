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
        let times = count == 1 ? "once" : "\(count) times"
        // The latest fault's own words (its address, port, status), not the
        // kind's key with every number made N.
        return "\(kind) (\(times) since the last such line, at most one each \(Self.intervalMilliseconds / 1000) s; latest: \(example()))"
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
