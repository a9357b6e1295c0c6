import CacheSemantics
import Redis
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// This node's clock against Redis's, which the fleet takes as its one
/// clock. Nodes' clocks differ (no NTP, a VM resumed): a node that is
/// seconds behind would count the others as gone (liveness is a time stamp
/// per node) and would take a shared response for younger than it is (its
/// age is the reader's now minus the writer's response time). So stamps and
/// stored times go to Redis in Redis's time, and each node converts with
/// its own offset, measured by `TIME` every time the purge feed records
/// its place (about once a second). Written on the fleet's loop, read by
/// every worker.
public final class FleetClock: Sendable {
    /// Redis's milliseconds minus this node's; nil until measured.
    private let offset = Mutex<Int64?>(nil)
    private let localMilliseconds: @Sendable () -> Int64

    /// `localMilliseconds`: this node's wall clock (tests skew it).
    public init(localMilliseconds: @escaping @Sendable () -> Int64 = FleetClock.wallMilliseconds) {
        self.localMilliseconds = localMilliseconds
    }

    /// Milliseconds since the epoch by this machine's clock.
    public static func wallMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }

    /// Beyond this, the offset is logged as a fault: shared responses' ages
    /// are off by as much on this node.
    public static let tolerableMilliseconds: Int64 = 1_000

    public var offsetMilliseconds: Int64? { offset.withLock { $0 } }

    /// This node's wall clock now, in milliseconds.
    public var localNow: Int64 { localMilliseconds() }

    /// The fleet's time now (this node's until the first measurement).
    public var fleetNow: Int64 { localMilliseconds().plusSaturating(offsetMilliseconds ?? 0) }

    /// A measurement: this node's clock when `TIME` was sent and when its
    /// reply came, and the reply. The reply's instant is taken as the
    /// middle of the round trip. False for a reply that is not `TIME`'s.
    @discardableResult
    public func measure(sentAt: Int64, receivedAt: Int64, reply: RedisReply) -> Bool {
        guard let redis = Self.milliseconds(ofTimeReply: reply) else { return false }
        let measured = Self.offset(sentAt: sentAt, receivedAt: receivedAt, redisMilliseconds: redis)
        offset.withLock { $0 = measured }
        return true
    }

    static func offset(sentAt: Int64, receivedAt: Int64, redisMilliseconds: Int64) -> Int64 {
        redisMilliseconds.minusSaturating(sentAt.plusSaturating(receivedAt.minusSaturating(sentAt) / 2))
    }

    /// The latest `TIME` believed (the year 9999): a later one is a reply
    /// from something that is not a sane Redis, and would overflow.
    static let maxSeconds: Int64 = 253_402_300_799

    /// `TIME`'s reply (seconds, microseconds) in milliseconds.
    static func milliseconds(ofTimeReply reply: RedisReply) -> Int64? {
        let parts = reply.elements
        guard parts.count == 2, let seconds = parts[0].text.flatMap({ Int64($0) }),
              let microseconds = parts[1].text.flatMap({ Int64($0) }), (0...maxSeconds).contains(seconds), (0..<1_000_000).contains(microseconds) else {
            return nil
        }
        return seconds * 1000 + microseconds / 1000
    }

    /// Seconds to add to this node's wall seconds to get the fleet's
    /// (whole seconds, rounded to the nearest: stored times are seconds).
    public var shiftSeconds: Int64 {
        let milliseconds = offsetMilliseconds ?? 0
        return milliseconds.plusSaturating(milliseconds >= 0 ? 500 : -500) / 1000
    }

    /// A line for the log when the offset is beyond what is tolerable; nil otherwise.
    public static func warning(offsetMilliseconds: Int64) -> String? {
        guard offsetMilliseconds.magnitude > tolerableMilliseconds.magnitude else { return nil }
        // Tenths of a second: the text names a fault kind, logged once every 10 s.
        let tenths = (offsetMilliseconds.magnitude + 50) / 100
        return "fleet: this node's clock is \(tenths / 10).\(tenths % 10) s \(offsetMilliseconds > 0 ? "behind" : "ahead of") "
            + "Redis's; stamps and shared responses' times are converted, but check the node's time synchronisation (NTP)"
    }
}
