import FoundationEssentials
import Threads
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A bounded queue of disk operations for the writer thread.
final class WriteQueue: @unchecked Sendable {
    enum Op {
        case write(DiskRecord, UInt64)
        case streamOpen(UInt64, DiskRecord, UInt64)
        case streamAppend(UInt64, [UInt8])
        case streamFinish(UInt64)
        case streamAbort(UInt64)
        /// Files no longer indexed, deleted here rather than on the
        /// thread that removed them (a worker's loop must not wait for an
        /// unlink); in order with the writes around them.
        case unlink([String])
    }

    private let condition = Condition()
    private var ops: [Op] = []
    private var head = 0
    private var queuedBytes = 0
    private var busy = false
    private var drainWaiters: [@Sendable () -> Void] = []
    static let maxOps = 10_000
    static let maxBytes = 64 << 20
    /// Streams pause their source above this many queued bytes and go on
    /// once the writer is down to `lowWater`: a disk slower than the
    /// upstream slows the fetch instead of losing the object (or holding
    /// the queue's whole 64 MiB in memory).
    static let highWater = 16 << 20
    static let lowWater = 4 << 20

    /// Body bytes waiting for the writer.
    var pendingBytes: Int {
        condition.lock()
        defer { condition.unlock() }
        return queuedBytes
    }

    /// `force`: queued even when full (small control ops that must not be lost).
    func push(_ op: Op, bytes: Int, force: Bool = false) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard force || (ops.count - head < Self.maxOps && queuedBytes + bytes <= Self.maxBytes) else { return false }
        ops.append(op)
        queuedBytes += bytes
        condition.broadcast()
        return true
    }

    func pop() -> Op {
        condition.lock()
        while head == ops.count { condition.wait() }
        let op = ops[head]
        // The popped slot lets go of its body now: kept until the array is
        // compacted, up to 1,024 written bodies stayed in memory (4 GiB of
        // 4 MiB objects) after the writer was done with them.
        ops[head] = .unlink([])
        head += 1
        if head > 1024 || head == ops.count { ops.removeFirst(head); head = 0 }
        switch op {
        case .write(let record, _): queuedBytes -= record.body.count
        case .streamAppend(_, let bytes): queuedBytes -= bytes.count
        default: break
        }
        busy = true
        var drained: [@Sendable () -> Void] = []
        if queuedBytes <= Self.lowWater && !drainWaiters.isEmpty { swap(&drained, &drainWaiters) }
        condition.unlock()
        for waiter in drained { waiter() }
        return op
    }

    /// When more than `highWater` bytes are queued: keeps `waiter`, called
    /// (on the writer thread) once the queue is down to `lowWater`, and
    /// returns true. Otherwise returns false and keeps nothing.
    func waitIfBacklogged(_ waiter: @escaping @Sendable () -> Void) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard queuedBytes > Self.highWater else { return false }
        drainWaiters.append(waiter)
        return true
    }

    /// Marks the popped op finished; returns whether the queue is now empty.
    func done() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        busy = false
        condition.broadcast()
        return head == ops.count
    }

    func waitUntilEmpty(timeoutSeconds: Double) {
        let deadline = Condition.deadline(afterMilliseconds: UInt64(max(0, timeoutSeconds) * 1000))
        condition.lock()
        defer { condition.unlock() }
        while (head < ops.count || busy) && condition.wait(until: deadline) {}
    }
}
