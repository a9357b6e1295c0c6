/// The tier behind the local ones that a fleet's nodes share (memory ->
/// disk -> fleet -> upstream). Unlike a `CacheTier` it lives across the
/// network, so it is asked asynchronously, only after the local tiers
/// missed, and never waited on when it cannot answer now. One per worker,
/// used on that worker's loop only.
public protocol SharedTier: AnyObject {
    /// Taken when a fetch starts and handed back to `store`: a purge the
    /// fleet published since then keeps the fetched response out.
    func fetchMark() -> SharedMark
    /// The largest body it takes (`store` leaves larger ones out).
    var maxObjectBytes: Int { get }
    /// Looks `key` up: `found` runs once, later, on the worker's loop, with
    /// every stored variant (empty: none, or the tier failed meanwhile).
    /// Returns false, calling nothing, when it cannot be asked now (Redis
    /// unreachable): the caller goes on as if it had missed.
    func lookup(_ key: String, found: @escaping (Variants) -> Void) -> Bool
    /// Offers a response just stored locally (fire and forget; one too
    /// large, with a body file or without lifetime left is not taken).
    func store(_ entry: CachedResponse, fetchedAt mark: SharedMark)
    /// Claims the fetch of `key` for this node (a short lock in Redis that
    /// other nodes wait on), bounded by `milliseconds`: `outcome` runs
    /// once, later, on the worker's loop. False, calling nothing, when it
    /// cannot be asked now (the caller fetches alone).
    func claim(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool
    /// Gives a claim up once its response is stored (or will not be),
    /// waking the nodes that wait on it.
    func release(_ key: String)
}

/// How a claim on a key's fetch across the fleet turned out.
public enum FleetClaim: Equatable, Sendable {
    /// This node fetches it (and then calls `release`).
    case claimed
    /// Another node stored it meanwhile: look it up again.
    case stored
    /// Another node fetched it, or the wait ended (or failed): look it up
    /// again, and fetch alone if it is not there.
    case waited
}

/// Where the fleet's purges stood (the last purge this node applied) when
/// a fetch began.
public struct SharedMark: Equatable, Sendable {
    public var milliseconds: UInt64
    public var sequence: UInt64
    public init(milliseconds: UInt64, sequence: UInt64) {
        self.milliseconds = milliseconds
        self.sequence = sequence
    }
    public static let zero = SharedMark(milliseconds: 0, sequence: 0)
}

extension DiskFormat {
    /// A record in this format (the disk tier's, which the fleet's shared
    /// tier also keeps) as the response it stores; nil when it holds
    /// another key. Throws for bytes that are not a whole, intact record.
    /// `shiftSeconds` is added to its request and response times (the
    /// fleet keeps them in Redis's time; a node reads them in its own).
    public static func response(_ bytes: [UInt8], key: String, shiftSeconds: Int64 = 0) throws(Failure) -> CachedResponse? {
        try decodeEntry(bytes, key: key, verify: true, shiftSeconds: shiftSeconds)?.entry
    }

    /// `record` with its request and response times (and when it was
    /// written) moved by `seconds`.
    public static func shifted(_ record: DiskRecord, bySeconds seconds: Int64) -> DiskRecord {
        var record = record
        record.head.timing.requestTime = record.head.timing.requestTime.plusSaturating(seconds)
        record.head.timing.responseTime = record.head.timing.responseTime.plusSaturating(seconds)
        record.storedAt = record.storedAt.plusSaturating(seconds)
        return record
    }
}
