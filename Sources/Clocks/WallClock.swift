import CEventLoop

/// The wall clock (seconds since the epoch) of every age, freshness,
/// stored time and tier lifetime: the system's, or, in tests, one moved by
/// hand (`advance`), so that a response going stale or a tier's lifetime
/// ending is tested without waiting for it. One is made by `serve` and
/// injected into the tiers and the workers.
public final class WallClock: @unchecked Sendable {
    /// Seconds added to the system's time: 0 in service; moved only by
    /// tests, while nothing else reads it.
    public private(set) var offsetSeconds: Int64 = 0

    public init() {}

    @inline(__always)
    public func now() -> Int64 { el_wall_seconds() &+ offsetSeconds }

    /// Moves this clock `seconds` on (tests).
    public func advance(by seconds: Int64) { offsetSeconds &+= seconds }
}
