import Foundation
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
    }

    private let condition = NSCondition()
    private var ops: [Op] = []
    private var head = 0
    private var queuedBytes = 0
    private var busy = false
    static let maxOps = 10_000
    static let maxBytes = 64 << 20

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
        defer { condition.unlock() }
        while head == ops.count { condition.wait() }
        let op = ops[head]
        head += 1
        if head > 1024 { ops.removeFirst(head); head = 0 }
        switch op {
        case .write(let record, _): queuedBytes -= record.body.count
        case .streamAppend(_, let bytes): queuedBytes -= bytes.count
        default: break
        }
        busy = true
        return op
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
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        condition.lock()
        defer { condition.unlock() }
        while (head < ops.count || busy) && condition.wait(until: deadline) {}
    }
}
