import EventLoop
import Synchronization

/// Faults of the fleet's Redis connections, each kind (its text) logged
/// at most once every 10 s however many connections meet it: the purge
/// feed's and every worker's shared tier. Any thread.
public final class FaultLog: Sendable {
    private let log: @Sendable (String) -> Void
    private let logged = Mutex<[String: UInt64]>([:])
    static let quietMilliseconds: UInt64 = 10_000

    public init(_ log: @escaping @Sendable (String) -> Void) {
        self.log = log
    }

    public func note(_ text: String) {
        let now = EventLoop.nowMilliseconds()
        let due = logged.withLock { last -> Bool in
            if let at = last[text], now &- at < Self.quietMilliseconds { return false }
            // Texts name keys and messages: forget the quiet ones rather than grow.
            if last.count >= 256 { last = last.filter { now &- $0.value < Self.quietMilliseconds } }
            last[text] = now
            return true
        }
        if due { log(text) }
    }
}

/// How long to wait before connecting again: 100 ms, doubling to 5 s,
/// back to 100 ms once connected.
struct Backoff {
    private var next: UInt64 = 100

    mutating func take() -> UInt64 {
        defer { next = min(next * 2, 5_000) }
        return next
    }

    mutating func reset() { next = 100 }
}
