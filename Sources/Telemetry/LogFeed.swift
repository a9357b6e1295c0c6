import Bytes
import EventLoop
import Synchronization
import Threads

/// The requests as they happen, for `GET /log?follow=1` (`larder log
/// --follow`). While nobody follows, a request pays one relaxed load. While
/// someone does, each worker packs its lines (`PackedLines`: a copy of
/// their bytes, no String) into a queue of its own, bounded: past
/// `capacityBytes` lines are dropped and counted, so a slow follower never
/// slows the proxy. The admin thread formats them.
public final class LogFeed: @unchecked Sendable {
    /// Bytes of packed lines one worker holds for the admin thread at most
    /// (some 10,000 lines).
    public static let capacityBytes = 1 << 20
    /// How many follow: a cell of its own, so that workers read it through
    /// a plain pointer (no reference counting on every request).
    public let followers: UnsafeMutablePointer<Atomic<Int>>
    private let queues = Locked<[LineQueue]>([])

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
    public func makeQueue() -> LineQueue {
        let queue = LineQueue()
        queues.withLock { $0.append(queue) }
        return queue
    }

    /// What every worker queued since the last call: how many lines they
    /// dropped, and the lines (each follower reads them in turn). The
    /// admin thread's call: one drain at a time.
    public func drain(_ body: (_ dropped: Int, _ lines: LogBatch) -> Void) {
        let all = queues.withLock { $0 }
        var lost = 0
        for queue in all { lost += queue.swap() }
        body(lost, LogBatch(workers: all.map { $0.taken.bytes }))
        for queue in all { queue.taken.removeAll() }
    }

    /// Gives back the memory the queues grew to (when the last follower left).
    public func shrink() {
        drain { _, _ in }
        for queue in queues.withLock({ $0 }) { queue.shrink() }
    }
}

/// The lines the workers queued between two drains, valid during the drain.
public struct LogBatch {
    fileprivate let workers: [UnsafeBufferPointer<UInt8>]

    /// Each line in time order: each worker's lines are, so the earliest
    /// of their next ones goes next.
    public func forEach(_ body: (AccessLine) -> Void) {
        if workers.count == 1 { return PackedLines.forEach(in: workers[0], body) }
        var offsets = [Int](repeating: 0, count: workers.count)
        while true {
            var next = -1, earliest = Int64.max
            for i in workers.indices where offsets[i] < workers[i].count {
                let time = PackedLines.time(at: offsets[i], in: workers[i])
                if time < earliest { (next, earliest) = (i, time) }
            }
            guard next >= 0 else { return }
            let (line, after) = PackedLines.line(at: offsets[next], in: workers[next])
            body(line)
            offsets[next] = after
        }
    }
}

/// One worker's packed lines for the admin thread. The worker packs a
/// batch of events' lines without a lock and hands them over at the
/// batch's end, under the lock once; the admin thread swaps the full
/// buffer for its spare (no copy, and after the first seconds no allocation).
public final class LineQueue: BatchEndHandler, @unchecked Sendable {
    private let state = Locked<(lines: ByteBuffer, dropped: Int)>((ByteBuffer(), 0))
    /// The worker's: lines packed since its loop's batch began.
    private let pending = ByteBuffer()
    private var packed = 0, overflowed = 0
    /// The admin thread's: what the last `swap` took.
    private(set) var taken = ByteBuffer()

    /// Packs `line` (the worker's thread). True for the batch's first: the
    /// worker then has its loop call `batchEnded` once the batch is done.
    @inline(__always)
    public func push(_ line: AccessLine) -> Bool {
        guard pending.count < LogFeed.capacityBytes else {
            overflowed += 1  // counted as dropped when the batch is handed over
            return false
        }
        PackedLines.append(line, to: pending)
        packed += 1
        return packed == 1
    }

    /// Hands the batch's lines to the admin thread, or counts them dropped
    /// when the queue has no room for them.
    public func batchEnded() {
        guard packed > 0 else { return }
        state.withLock { state in
            if state.lines.count + pending.count <= LogFeed.capacityBytes {
                state.lines.append(UnsafeRawBufferPointer(pending.bytes))
                state.dropped += overflowed
            } else {
                state.dropped += packed + overflowed
            }
        }
        pending.removeAll()
        (packed, overflowed) = (0, 0)
    }

    /// Takes what was queued (into `taken`); returns how many lines were dropped.
    public func swap() -> Int {
        state.withLock { state in
            Swift.swap(&state.lines, &taken)
            defer { state.dropped = 0 }
            return state.dropped
        }
    }

    public func shrink() {
        state.withLock { $0.lines.shrink(to: 4096) }
        taken.shrink(to: 4096)
    }
}
