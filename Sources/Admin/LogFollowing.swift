import Bytes
import EventLoop
import HTTP1
import Telemetry

/// A request that follows the log (`GET /log?follow=1`): a chunked stream
/// of the requests its filter admits, one JSON object per line.
public protocol LogFollower: AnyObject {
    /// A pump's lines (`format`: the pump's, shared by every follower)
    /// and how many the workers' queues dropped since the last pump.
    func deliver(_ batch: LogBatch, droppedByWorkers: Int, format: inout AccessLineFormatter)
}

/// The admin loop's log followers, fed from the workers' queues every
/// `interval` ms. A follower that reads too slowly loses lines (and is
/// told how many); the workers never wait for it. Used on the admin
/// loop only.
public final class LogFollowing {
    public static let interval: UInt64 = 100
    /// Output a follower may leave unread before its lines are dropped.
    public static let backlogBytes = 1 << 20

    /// The requests as they happen; nil: not offered.
    public let feed: LogFeed?
    /// Followers at most: a quarter of the admin connections (8 at most),
    /// so followers never take the room purges and health checks need.
    public let maxFollowers: Int
    private let loop: EventLoop
    private var followers: [ObjectIdentifier: any LogFollower] = [:]
    private var timer = TimerID.none
    /// Formats the followers' lines (keeps its time stamp between pumps).
    private var format = AccessLineFormatter()

    public init(feed: LogFeed?, maxConnections: Int, loop: EventLoop) {
        self.feed = feed
        maxFollowers = max(1, min(8, maxConnections / 4))
        self.loop = loop
    }

    public var count: Int { followers.count }

    /// Why `follower` may not follow now (nil: it may).
    public func refusal() -> AdminAPI.Response? {
        guard feed != nil else { return .error(503, "this larder does not offer its log") }
        guard followers.count < maxFollowers else { return .error(503, "too many log followers (\(maxFollowers)); retry later") }
        return nil
    }

    public func start(_ follower: any LogFollower) {
        if followers.isEmpty { timer = loop.schedule(after: Self.interval) { [weak self] in self?.pump() } }
        followers[ObjectIdentifier(follower)] = follower
        feed?.follow()
    }

    public func stop(_ follower: any LogFollower) {
        guard followers.removeValue(forKey: ObjectIdentifier(follower)) != nil else { return }
        feed?.unfollow()
        if followers.isEmpty {
            loop.cancel(timer)
            timer = .none
            feed?.shrink()  // what queued meanwhile is no one's; the queues give back their memory
        }
    }

    private func pump() {
        guard let feed, !followers.isEmpty else { return }
        feed.drain { dropped, lines in
            for follower in followers.values { follower.deliver(lines, droppedByWorkers: dropped, format: &format) }
        }
        timer = loop.schedule(after: Self.interval) { [weak self] in self?.pump() }
    }

    /// The head of a follower's stream, and its first line.
    public static let streamHead: [UInt8] = {
        var head: [UInt8] = []
        ResponseSerializer.appendStatusLine(200, reason: nil, to: &head)
        ResponseSerializer.appendField("content-type", "application/x-ndjson", to: &head)
        ResponseSerializer.appendField("cache-control", "no-store", to: &head)
        ResponseSerializer.appendField("transfer-encoding", "chunked", to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
        return head + chunk(Array("{\"following\": true}\n".utf8))
    }()

    /// `data` as one chunk.
    public static func chunk(_ data: [UInt8]) -> [UInt8] {
        Array(String(data.count, radix: 16).utf8) + [0x0D, 0x0A] + data + [0x0D, 0x0A]
    }

    /// A follower's lines for one pump (`filter`'s), after a count of those
    /// it lost (`dropped`, reset), unless its client is `behind`; nil: nothing.
    public static func lines(_ batch: LogBatch, filter: LogFilter, dropped: inout Int, behind: Bool,
                             format: inout AccessLineFormatter, into buffer: ByteBuffer) -> UnsafeRawBufferPointer? {
        if behind {
            batch.forEach { line in if filter.admits(line) { dropped += 1 } }
            return nil
        }
        buffer.removeAll()
        buffer.shrink(to: 4 << 20)  // after a burst; the usual pump's lines keep their room
        if dropped > 0 { buffer.append(contentsOf: "{\"dropped\": \(dropped)}\n".utf8) }
        dropped = 0
        batch.forEach { line in if filter.admits(line) { format.appendJSON(line, to: buffer) } }
        return buffer.isEmpty ? nil : UnsafeRawBufferPointer(buffer.bytes)
    }
}
