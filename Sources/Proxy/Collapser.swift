import EventLoop
import Synchronization

/// Request collapsing across workers: while one request (the leader) fetches
/// a URL from the upstream, other cacheable requests for it wait instead of
/// sending their own. When the leader is done, each waiter is woken on its
/// own loop and looks the URL up again: it is served what the leader stored
/// (`Cache-Status: ...; collapsed`), or fetches on its own when nothing
/// usable was stored (not storable, another variant, an error).
///
/// First cut: waiters get the response once it is complete, not as it
/// streams in.
public final class Collapser: Sendable {
    private struct Waiter: @unchecked Sendable {
        let loop: EventLoop
        let wake: () -> Void
    }

    private let inFlight = Mutex<[String: [Waiter]]>([:])

    public init() {}

    /// Becomes the leader for `key` (true) or queues `wake` to run on
    /// `loop` when the leader releases it (false).
    func lead(_ key: String, loop: EventLoop, wake: @escaping () -> Void) -> Bool {
        inFlight.withLock { table in
            if table[key] != nil {
                table[key]!.append(Waiter(loop: loop, wake: wake))
                return false
            }
            table[key] = []
            return true
        }
    }

    /// The leader is done: wakes every waiter on its own loop.
    func release(_ key: String) {
        let waiters = inFlight.withLock { $0.removeValue(forKey: key) } ?? []
        for waiter in waiters { waiter.loop.execute(waiter.wake) }
    }
}
