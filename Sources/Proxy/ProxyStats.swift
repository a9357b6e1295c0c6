import Synchronization

/// Counters shared by all workers; also the oracle tests read through logs
/// today and the admin API will expose.
public final class ProxyStats: Sendable {
    public let hits = Atomic<Int>(0)
    public let misses = Atomic<Int>(0)
    public let staleForwards = Atomic<Int>(0)
    public let stored = Atomic<Int>(0)
    public let revalidations = Atomic<Int>(0)
    public let staleHits = Atomic<Int>(0)
    public let backgroundRefreshes = Atomic<Int>(0)
    public let collapsed = Atomic<Int>(0)
    public let upstreamErrors = Atomic<Int>(0)
    public let clientErrors = Atomic<Int>(0)
    /// Connections answered 503 because of max_connections.
    public let refusedConnections = Atomic<Int>(0)
    /// Times a connection stopped answering because its client left over
    /// 1 MiB of answers unread.
    public let outputPauses = Atomic<Int>(0)
    /// Connections closed because the client took no output for send_timeout.
    public let sendTimeouts = Atomic<Int>(0)
    /// Client connections open now, all workers together (max_connections).
    public let openConnections = Atomic<Int>(0)
    /// Admin connections refused over admin_max_connections.
    public let adminRefusedConnections = Atomic<Int>(0)

    public init() {}

    @inline(__always)
    static func bump(_ counter: borrowing Atomic<Int>) {
        counter.wrappingAdd(1, ordering: .relaxed)
    }
}
