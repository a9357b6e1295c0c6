/// The wall clock a worker reads (seconds since the epoch) for ages,
/// freshness and stored times: the system's, or, in tests, one moved by
/// hand (`advance`), so that a response going stale is tested without
/// waiting for it. Injected into each worker; read on its thread.
public final class WallClock: @unchecked Sendable {
    /// Seconds added to the system's time: 0 in service; moved only by
    /// tests, on the thread that reads it.
    public private(set) var offsetSeconds: Int64 = 0

    public init() {}

    @inline(__always)
    public func now() -> Int64 { EventLoop.wallSeconds() &+ offsetSeconds }

    /// Moves this clock `seconds` on (tests).
    public func advance(by seconds: Int64) { offsetSeconds &+= seconds }
}
