import CacheStorage
import EventLoop
import HTTP1

/// The cache lock: a key's one fetch, as one interface, local and across
/// the fleet. Here (`Collapser`, shared by the workers) the first request
/// leads and the others wait or follow its published response; across a
/// fleet the leader claims the key in the shared tier too, so one node
/// fetches. A leader lets go of both together.
struct CacheLock {
    private let collapser: Collapser
    private unowned(unsafe) let store: WorkerStore  // (the worker's CacheAccess holds both)

    init(collapser: Collapser, store: WorkerStore) {
        self.collapser = collapser
        self.store = store
    }

    // MARK: leading

    /// On this node: lead, follow a published fetch, or wait for the
    /// leader (`ended` then runs once, on `loop`), bounded by `timeoutMilliseconds`.
    func join(_ key: String, for request: RequestHead, asGet: Bool, loop: EventLoop, timeoutMilliseconds: UInt64,
              ended: @escaping (LeaderWait.Ended) -> Void) -> LeaderWait.Joined {
        LeaderWait.join(key, for: request, asGet: asGet, collapser: collapser, loop: loop, timeoutMilliseconds: timeoutMilliseconds,
                        ended: ended)
    }

    /// Across the fleet, once leading here: `outcome` says whether this
    /// node fetches. False (no fleet, or it cannot be asked): nothing runs.
    func claimAcrossFleet(_ key: String, milliseconds: UInt64, outcome: @escaping (FleetClaim) -> Void) -> Bool {
        store.claim(key, milliseconds: milliseconds, outcome: outcome)
    }

    /// Gives the claim up: here (`here`: when it is held here) and across
    /// the fleet (`acrossFleet`: when it was claimed there).
    func release(_ key: String, here: Bool = true, acrossFleet: Bool = false) {
        if acrossFleet { store.release(key) }
        if here { collapser.release(key) }
    }

    // MARK: sharing the leader's response

    /// The leader's response is storable: `share` runs (on `loop`) once
    /// some request waits; true when one waits already.
    func offer(_ key: String, loop: EventLoop, share: @escaping () -> Void) -> Bool { collapser.offer(key, loop: loop, share: share) }

    /// The leader's response, for the requests waiting and those to come.
    func publish(_ key: String, _ fetch: SharedFetch) { collapser.publish(key, fetch) }

    // MARK: background refreshes

    /// The one background refresh of `key` across the workers (false: one runs).
    func beginRefresh(_ key: String) -> Bool { collapser.beginRefresh(key) }
    func endRefresh(_ key: String) { collapser.endRefresh(key) }

    /// For tests: this node's collapser.
    var local: Collapser { collapser }
}
