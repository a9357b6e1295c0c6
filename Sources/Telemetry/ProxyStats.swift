import Synchronization
import Threads

/// The proxy's counters. Those bumped per request live in each worker's own
/// `WorkerStats` (written by that worker's thread only, on cache lines of
/// their own), so no request writes a line another core reads or writes;
/// `/stats`, `/metrics` and the service status sum them when asked.
public final class ProxyStats: Sendable {
    /// Client connections open now, all workers together (max_connections
    /// is one count, so this one is shared; it moves per connection, not per request).
    public let openConnections = Atomic<Int>(0)
    /// Bytes of request bodies held until complete, all workers together
    /// (bounded by request_buffer_total: `HeldBodyReservation`).
    public let heldBodyBytes = Atomic<Int>(0)
    /// Admin connections refused over admin_max_connections (the admin thread's).
    public let adminRefusedConnections = Atomic<Int>(0)
    /// Admin requests refused for a missing or wrong token (401).
    public let adminFailedSignIns = Atomic<Int>(0)
    /// Access log bytes dropped because its writer was too far behind (`AccessLog.queueLimit`).
    public let accessLogDroppedBytes = Atomic<Int>(0)
    private let workers = Locked<[WorkerStats]>([])

    public init() {}

    /// Counters for one more worker (or test), included in every total.
    public func makeWorkerStats() -> WorkerStats {
        let stats = WorkerStats()
        workers.withLock { $0.append(stats) }
        return stats
    }

    /// A latency histogram summed over every worker.
    public func latency(_ series: LatencyHistograms.Series) -> LatencyHistograms.Snapshot {
        workers.withLock { $0.reduce(into: LatencyHistograms.Snapshot.empty) { $0.add($1.latency.snapshot(series)) } }
    }

    /// Disk reads and lookups on the I/O threads now, waiting or running.
    public var ioJobs: Int { BlockingWork.shared.pending }
    /// The I/O threads there may be (`io_threads`).
    public var ioThreads: Int { BlockingWork.shared.threads }

    /// Answers by status class (`ResponseCounts.classes`) and result, summed
    /// over every worker: `[class][result]`.
    public var responses: [[Int]] {
        workers.withLock { workers in
            ResponseCounts.classes.indices.map { index in
                LatencyHistograms.Result.allCases.map { result in
                    workers.reduce(0) { $0 + $1.responses.value(classIndex: index, result: result) }
                }
            }
        }
    }

    /// A counter summed over every worker.
    public func total(_ counter: WorkerStats.Counter) -> Int {
        workers.withLock { $0.reduce(0) { $0 + $1.value(counter) } }
    }
}

/// One worker's counters. Only its thread writes them (a relaxed load and
/// store, no locked read-modify-write); any thread may read them.
public final class WorkerStats: Sendable {
    public enum Counter: CaseIterable, Sendable {
        case hits, misses, staleForwards, stored, revalidations, staleHits, backgroundRefreshes, rangeFills, collapsed
        case upstreamErrors, clientErrors, refusedConnections, outputPauses, sendTimeouts, streamedBodies, offloadedLookups
        case offloadedReads, tlsHandshakes, tlsResumed, tlsFailures, plainOnTLS
        case http2Connections, http2Streams, http2Resets, http2Refusals
        case http3Connections, http3Streams, http3Resets, quicRetries, quicStatelessResets, quicDropped
        case receivedBytes, sentBytes, upgrades, upgradedBytes, accessDenied, rateLimited
    }

    // Padding on both sides: workers' counters are allocated one after
    // another, and must not share a cache line with a neighbour's.
    private let padBefore = (0, 0, 0, 0, 0, 0, 0, 0)
    public let hits = Atomic<Int>(0)
    public let misses = Atomic<Int>(0)
    public let staleForwards = Atomic<Int>(0)
    public let stored = Atomic<Int>(0)
    public let revalidations = Atomic<Int>(0)
    public let staleHits = Atomic<Int>(0)
    public let backgroundRefreshes = Atomic<Int>(0)
    /// Whole responses fetched in the background after a range of them was asked.
    public let rangeFills = Atomic<Int>(0)
    public let collapsed = Atomic<Int>(0)
    /// Upgraded connections (the upstream's 101 passed on), and their bytes both ways.
    public let upgrades = Atomic<Int>(0)
    public let upgradedBytes = Atomic<Int>(0)
    public let upstreamErrors = Atomic<Int>(0)
    public let clientErrors = Atomic<Int>(0)
    /// Connections answered 503 because of max_connections.
    public let refusedConnections = Atomic<Int>(0)
    /// Times a connection stopped answering because its client left over
    /// 1 MiB of answers unread.
    public let outputPauses = Atomic<Int>(0)
    /// Connections closed because the client took no output for send_timeout.
    public let sendTimeouts = Atomic<Int>(0)
    /// Request bodies small enough to hold that streamed instead: the
    /// bodies held by every worker had reached request_buffer_total.
    public let streamedBodies = Atomic<Int>(0)
    /// Lookups made on an I/O thread: the disk would have been waited for.
    public let offloadedLookups = Atomic<Int>(0)
    /// Body bytes read into the page cache on an I/O thread before they
    /// were sent (sendfile, or a stored gzip body's decoding, would have
    /// waited for the disk).
    public let offloadedReads = Atomic<Int>(0)
    /// TLS handshakes completed (of them, sessions resumed), and ones that
    /// failed (a bad or refused client hello, no shared protocol or suite,
    /// the handshake timeout); plain HTTP sent to a TLS listener.
    public let tlsHandshakes = Atomic<Int>(0)
    public let tlsResumed = Atomic<Int>(0)
    public let tlsFailures = Atomic<Int>(0)
    public let plainOnTLS = Atomic<Int>(0)
    /// HTTP/2 connections taken, requests (streams) on them, streams that
    /// ended in a reset, and connections ended for a protocol error or a
    /// flood (GOAWAY).
    public let http2Connections = Atomic<Int>(0)
    public let http2Streams = Atomic<Int>(0)
    public let http2Resets = Atomic<Int>(0)
    public let http2Refusals = Atomic<Int>(0)
    public let http3Connections = Atomic<Int>(0)
    public let http3Streams = Atomic<Int>(0)
    public let http3Resets = Atomic<Int>(0)
    /// Retry packets sent (address validation under load), Stateless
    /// Resets sent, datagrams dropped unread (garbage, or refused Initials).
    public let quicRetries = Atomic<Int>(0)
    public let quicStatelessResets = Atomic<Int>(0)
    public let quicDropped = Atomic<Int>(0)
    /// Requests refused by an access list (403) and by a rate limit (429).
    public let accessDenied = Atomic<Int>(0)
    public let rateLimited = Atomic<Int>(0)
    /// Bytes read from clients and written to them.
    public let receivedBytes = Atomic<Int>(0)
    public let sentBytes = Atomic<Int>(0)
    /// Latencies (a separate allocation: its cells are this worker's too).
    public let latency = LatencyHistograms()
    /// Answers by status class and result (likewise).
    public let responses = ResponseCounts()
    private let padAfter = (0, 0, 0, 0, 0, 0, 0, 0)

    fileprivate init() {}

    /// Counters no figure reads (the admin listener's connections: their
    /// bytes and errors are not the proxy's).
    public static func unreported() -> WorkerStats { WorkerStats() }

    /// Adds one; called only on the owning worker's thread.
    @inline(__always)
    public static func bump(_ counter: borrowing Atomic<Int>) {
        counter.store(counter.load(ordering: .relaxed) &+ 1, ordering: .relaxed)
    }

    /// Adds `n`; called only on the owning worker's thread.
    @inline(__always)
    public static func add(_ counter: borrowing Atomic<Int>, _ n: Int) {
        counter.store(counter.load(ordering: .relaxed) &+ n, ordering: .relaxed)
    }

    public func value(_ counter: Counter) -> Int {
        switch counter {
        case .hits: hits.load(ordering: .relaxed)
        case .misses: misses.load(ordering: .relaxed)
        case .staleForwards: staleForwards.load(ordering: .relaxed)
        case .stored: stored.load(ordering: .relaxed)
        case .revalidations: revalidations.load(ordering: .relaxed)
        case .staleHits: staleHits.load(ordering: .relaxed)
        case .backgroundRefreshes: backgroundRefreshes.load(ordering: .relaxed)
        case .rangeFills: rangeFills.load(ordering: .relaxed)
        case .collapsed: collapsed.load(ordering: .relaxed)
        case .upstreamErrors: upstreamErrors.load(ordering: .relaxed)
        case .clientErrors: clientErrors.load(ordering: .relaxed)
        case .refusedConnections: refusedConnections.load(ordering: .relaxed)
        case .outputPauses: outputPauses.load(ordering: .relaxed)
        case .sendTimeouts: sendTimeouts.load(ordering: .relaxed)
        case .streamedBodies: streamedBodies.load(ordering: .relaxed)
        case .offloadedLookups: offloadedLookups.load(ordering: .relaxed)
        case .offloadedReads: offloadedReads.load(ordering: .relaxed)
        case .tlsHandshakes: tlsHandshakes.load(ordering: .relaxed)
        case .tlsResumed: tlsResumed.load(ordering: .relaxed)
        case .tlsFailures: tlsFailures.load(ordering: .relaxed)
        case .plainOnTLS: plainOnTLS.load(ordering: .relaxed)
        case .http2Connections: http2Connections.load(ordering: .relaxed)
        case .http2Streams: http2Streams.load(ordering: .relaxed)
        case .http2Resets: http2Resets.load(ordering: .relaxed)
        case .http2Refusals: http2Refusals.load(ordering: .relaxed)
        case .http3Connections: http3Connections.load(ordering: .relaxed)
        case .http3Streams: http3Streams.load(ordering: .relaxed)
        case .http3Resets: http3Resets.load(ordering: .relaxed)
        case .quicRetries: quicRetries.load(ordering: .relaxed)
        case .quicStatelessResets: quicStatelessResets.load(ordering: .relaxed)
        case .quicDropped: quicDropped.load(ordering: .relaxed)
        case .receivedBytes: receivedBytes.load(ordering: .relaxed)
        case .sentBytes: sentBytes.load(ordering: .relaxed)
        case .upgrades: upgrades.load(ordering: .relaxed)
        case .upgradedBytes: upgradedBytes.load(ordering: .relaxed)
        case .accessDenied: accessDenied.load(ordering: .relaxed)
        case .rateLimited: rateLimited.load(ordering: .relaxed)
        }
    }
}
