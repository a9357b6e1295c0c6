import CacheSemantics
import CacheStorage

/// A Redis stream entry's ID (`MILLISECONDS-SEQUENCE`): the position of a
/// purge in the fleet's stream, in order.
public struct StreamID: Comparable, Hashable, Sendable, CustomStringConvertible {
    public let milliseconds: UInt64
    public let sequence: UInt64

    public static let zero = StreamID(milliseconds: 0, sequence: 0)

    public init(milliseconds: UInt64, sequence: UInt64) {
        self.milliseconds = milliseconds
        self.sequence = sequence
    }

    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
        self.init(milliseconds: ms, sequence: seq)
    }

    public static func < (a: StreamID, b: StreamID) -> Bool {
        (a.milliseconds, a.sequence) < (b.milliseconds, b.sequence)
    }

    public var description: String { "\(milliseconds)-\(sequence)" }
}

/// One purge as the fleet's stream carries it: which node sent it (that
/// node applied it already) and what it removes.
public struct FleetPurge: Equatable, Sendable {
    public var scope: PurgeScope
    public var soft: Bool
    public var node: String

    public init(scope: PurgeScope, soft: Bool, node: String) {
        self.scope = scope
        self.soft = soft
        self.node = node
    }

    /// The entry's field/value pairs for XADD.
    var fields: [String] {
        let (kind, target): (String, String)
        switch scope {
        case .key(let key): (kind, target) = ("key", key)
        case .prefix(let prefix): (kind, target) = ("prefix", prefix)
        case .tag(let tag): (kind, target) = ("tag", tag)
        case .regex(let pattern): (kind, target) = ("regex", pattern.source)
        case .all: (kind, target) = ("all", "")
        }
        return ["node", node, "scope", kind, "target", target, "soft", soft ? "1" : "0"]
    }

    /// Nil for an entry that is not a purge Larder wrote (skipped, logged).
    init?(fields: [String]) {
        guard fields.count % 2 == 0 else { return nil }
        var values: [String: String] = [:]
        for i in stride(from: 0, to: fields.count, by: 2) { values[fields[i]] = fields[i + 1] }
        guard let node = values["node"], let kind = values["scope"], let target = values["target"],
              let soft = values["soft"], soft == "0" || soft == "1" else { return nil }
        switch kind {
        case "key" where !target.isEmpty: scope = .key(target)
        case "prefix" where !target.isEmpty: scope = .prefix(target)
        case "tag" where !target.isEmpty: scope = .tag(target)
        case "regex" where !target.isEmpty:
            guard case .success(let pattern) = PurgePattern.compile(target) else { return nil }
            scope = .regex(pattern)
        case "all": scope = .all
        default: return nil
        }
        self.soft = soft == "1"
        self.node = node
    }
}

/// Where a node starts reading the fleet's purges, and whether it must
/// first drop everything it holds because it cannot know what it missed.
/// A node's place is the last entry it read and how many entries it has
/// read since the stream began (`consumed`): trimming removes the oldest
/// entries, so it missed some exactly when more were removed than it read.
public enum FeedStart: Equatable, Sendable {
    case from(StreamID, consumed: Int)
    case dropEverythingThenFrom(StreamID, consumed: Int, reason: String)

    /// The stream as XINFO STREAM describes it.
    public struct Stream: Equatable, Sendable {
        public var lastGenerated: StreamID
        public var entriesAdded: Int
        public var length: Int
        public var maxDeleted: StreamID

        public init(lastGenerated: StreamID, entriesAdded: Int, length: Int, maxDeleted: StreamID = .zero) {
            self.lastGenerated = lastGenerated
            self.entriesAdded = entriesAdded
            self.length = length
            self.maxDeleted = maxDeleted
        }
    }

    /// `place`: where this node stopped (nil: none recorded); `stream`: nil
    /// when there is none; `sameFleet`: false when the fleet's identity in
    /// Redis is not the one this node remembers (Redis lost its data, or is
    /// another Redis: its place and stream say nothing of what it missed);
    /// `placeShown`: false when, after a failover, the new master's stream
    /// lacks the entry this node read last (the promoted replica lagged).
    public static func decide(place: (id: StreamID, consumed: Int)?, stream: Stream?, sameFleet: Bool = true,
                              placeShown: Bool = true) -> FeedStart {
        guard sameFleet else {
            return .dropEverythingThenFrom(stream?.lastGenerated ?? .zero, consumed: stream?.entriesAdded ?? 0,
                                           reason: "Redis no longer holds the fleet this node joined (it lost its data or is another Redis)")
        }
        guard let stream else {
            // No stream: no purge was ever sent (a place at its start is a
            // node of a fleet that never purged), unless Redis lost it.
            guard let place, place.consumed > 0 || place.id != .zero else { return .from(.zero, consumed: 0) }
            return .dropEverythingThenFrom(.zero, consumed: 0, reason: "the fleet's purge stream is gone (Redis lost its data)")
        }
        func drop(_ reason: String) -> FeedStart {
            .dropEverythingThenFrom(stream.lastGenerated, consumed: stream.entriesAdded, reason: reason)
        }
        guard let place else { return drop("this node has no recorded place in the fleet's purge stream") }
        guard placeShown else {
            return drop("the new Redis master lacks purges this node read (the promoted replica lagged): others may be lost too")
        }
        if place.id > stream.lastGenerated || place.consumed > stream.entriesAdded {
            // Redis went back to an older copy: later purges may be numbered below this node's place.
            return drop("the fleet's purge stream is older than this node's place in it")
        }
        if stream.maxDeleted > place.id { return drop("purges this node had not applied were deleted from the stream") }
        if stream.entriesAdded.minusSaturating(stream.length) > place.consumed {
            return drop("purges this node had not applied were trimmed from the stream")
        }
        return .from(place.id, consumed: place.consumed)
    }
}
