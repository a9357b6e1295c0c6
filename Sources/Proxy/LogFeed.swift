import CacheStorage
import Synchronization

/// One request as followers of the log see it.
public struct LogEntry: Sendable {
    public var line: AccessLine
    /// Wall seconds when it ended.
    public var time: Int64
    public var worker: Int
}

/// The requests as they happen, for `GET /log?follow=1` (`larder log
/// --follow`). While nobody follows, a request pays one relaxed load. While
/// someone does, each worker queues its lines for the admin thread in a
/// queue of its own, bounded: past `capacity` lines are dropped and
/// counted, so a slow follower never slows the proxy.
public final class LogFeed: @unchecked Sendable {
    /// Lines one worker holds for the admin thread at most.
    public static let capacity = 8192
    /// How many follow: a cell of its own, so that workers read it through
    /// a plain pointer (no reference counting on every request).
    let followers: UnsafeMutablePointer<Atomic<Int>>
    private let queues = WorkerQueues<LogEntry>(capacity: LogFeed.capacity)

    public init() {
        followers = .allocate(capacity: 1)
        followers.initialize(to: Atomic(0))
    }

    deinit {
        followers.deinitialize(count: 1)
        followers.deallocate()
    }

    public var isFollowed: Bool { followers.pointee.load(ordering: .relaxed) > 0 }
    public func follow() { followers.pointee.wrappingAdd(1, ordering: .relaxed) }
    public func unfollow() { followers.pointee.wrappingSubtract(1, ordering: .relaxed) }

    /// A worker's queue (one per worker: no lock shared between workers).
    func makeQueue() -> WorkerQueue<LogEntry> { queues.make() }

    /// What every worker queued since the last call, in time order, and how many lines they dropped.
    public func drain() -> (entries: [LogEntry], dropped: Int) {
        var (entries, dropped) = queues.drain()
        entries.sort { $0.time < $1.time }
        return (entries, dropped)
    }
}
