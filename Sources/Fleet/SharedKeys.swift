import CacheSemantics
import CacheStorage
import Synchronization

/// Where the fleet's shared tier keeps things in Redis, under the fleet's
/// prefix `larder:NAME:`:
///
/// - `obj:KEY`: a hash, one field per variant (its Vary values), each a
///   record in the disk tier's format; it expires with its longest-lived
///   variant, so Redis drops what can no longer be served;
/// - `keys`: every stored key in one sorted set (all scores 0, so a
///   prefix is a lexicographic range: a prefix purge costs what it removes);
/// - `expiry`: the same keys scored by when they expire, so stores clear
///   a few expired names from `keys` as they go;
/// - `tag:TAG`: a set of the keys carrying the tag;
/// - `purges`: the purge stream (PurgeFeed), which a store checks: a purge
///   published since its fetch began keeps it out.
public enum SharedKeys {
    public static func prefix(_ name: String) -> String { "larder:\(name):" }

    /// A variant's field in its key's hash: its Vary values (absent ones
    /// marked apart from empty ones).
    public static func variantField(_ varyValues: [String?]) -> [UInt8] {
        var out: [UInt8] = []
        for value in varyValues {
            if let value { out.append(0x01); out.append(contentsOf: value.utf8) } else { out.append(0x02) }
            out.append(0x00)
        }
        return out
    }

    /// How long the fleet keeps `entry` (milliseconds): what is left of
    /// its freshness plus the stale windows it may still be served in
    /// (stale-while-revalidate, stale-if-error); nil when nothing is left.
    public static func lifetimeMilliseconds(of entry: CachedResponse, now: Int64) -> Int? {
        let directives = entry.cacheControl
        let fresh = entry.lifetime.minusSaturating(entry.currentAge(now: now))
        let window = max(directives.staleWhileRevalidate ?? 0, directives.staleIfError ?? 0, 0)
        let seconds = fresh.plusSaturating(window)
        guard entry.lifetime > 0, seconds > 0 else { return nil }
        return min(seconds, 365 * 86_400) * 1000
    }

    /// The first string after every string starting with `prefix` (for a
    /// lexicographic range); nil when there is none (only 0xFF bytes).
    public static func successor(of prefix: [UInt8]) -> [UInt8]? {
        var bytes = prefix
        while let last = bytes.last {
            if last < 0xFF { bytes[bytes.count - 1] = last + 1; return bytes }
            bytes.removeLast()
        }
        return nil
    }
}

/// The last purge this node applied (its place in the purge stream), kept
/// by the fleet's thread and read by workers when a fetch starts.
public final class FleetMark: Sendable {
    private let place = Mutex(SharedMark.zero)
    public init() {}
    public var current: SharedMark { place.withLock { $0 } }
    func set(_ id: StreamID) { place.withLock { $0 = SharedMark(milliseconds: id.milliseconds, sequence: id.sequence) } }
}
