import CacheStorage
import EventLoop
import HTTP1

/// The cache lock: a key's one fetch, as one interface, local and across
/// the fleet. Here (`Collapser`, shared by the workers) the first request
/// leads and the others wait or follow its published response; across a
/// fleet the leader claims the key in the shared tier too, so one node
/// fetches. A leader lets go of both together; the exchange sees one join.
struct CacheLock {
    private let collapser: Collapser
    private unowned(unsafe) let store: WorkerStore  // (the worker's CacheAccess holds both)

    init(collapser: Collapser, store: WorkerStore) {
        self.collapser = collapser
        self.store = store
    }

    // MARK: leading

    /// Leads the key's fetch, follows a published one or waits for the
    /// leader (`ended` then runs once, on `loop`), bounded by
    /// `timeoutMilliseconds`. `acrossFleet`: a leader here claims the key
    /// across the fleet too: `.claiming`, its answer to `ended`
    /// (`claimedAcrossFleet`), or `.leading` alone when the fleet cannot
    /// be asked. A claiming wait stopped before its answer lets both go.
    func join(_ key: String, for request: RequestHead, asGet: Bool, acrossFleet: Bool = false, loop: EventLoop,
              timeoutMilliseconds: UInt64, ended: @escaping (LeaderWait.Ended) -> Void) -> LeaderWait.Joined {
        let joined = LeaderWait.join(key, for: request, asGet: asGet, collapser: collapser, loop: loop,
                                     timeoutMilliseconds: timeoutMilliseconds, ended: ended)
        guard acrossFleet, case .leading = joined else { return joined }
        let wait = LeaderWait(loop: loop, request: request, ended: ended)
        let asked = store.claim(key, milliseconds: timeoutMilliseconds) { [weak wait, self] claim in
            if wait?.claimAnswered(claim == .claimed) != true { release(key, acrossFleet: claim == .claimed) }
        }
        return asked ? .claiming(wait) : .leading
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
