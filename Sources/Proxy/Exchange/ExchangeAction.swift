import CacheSemantics
import CacheStorage

/// What `ExchangeMachine` asks its driver (`Exchange`) to do. The driver
/// performs it and reports what came of it as the machine's next event
/// (the name after "report"); it decides nothing itself.
enum ExchangeAction: Equatable {
    /// Nothing now: an event comes later (a fetch, a timer, the client),
    /// or the exchange is over.
    case none
    /// The event came when it meant nothing any more (the machine was past
    /// it: the client left, the answer was decided): nothing to do, said so.
    case ignored(Ignored)
    /// Look the key up in the store's `stage` and report `lookedUp`.
    case lookUp(LookupStage)
    /// Offer a stored response to the client; report `served`.
    case serve(StoredServing)
    /// The upstream is slow (stale_timeout) or its pool is down: stop
    /// waiting for it (a fetch goes on without the client and stores what
    /// comes; a wait for the leader stops), then offer this stored
    /// response; report `served`.
    case serveInstead(StoredServing)
    /// An answer made here (400, 502, 504), queued whole: the exchange is done.
    case answer(MadeHere)
    /// Join the key's cache lock (`CacheLock.join`; `acrossFleet`: the
    /// fleet's claim too) and report `joined`.
    case collapse(count: ExchangeCount, acrossFleet: Bool = false)
    /// Wait for the cache lock: the leader here (`leaderDone` comes) or
    /// the fleet's claim (`joined` comes again).
    case awaitLock(count: ExchangeCount)
    /// Stream the leader's response (its Cache-Status: `followedCacheStatus`).
    case follow(SharedFetch, count: ExchangeCount)
    /// Go upstream with the machine's `forwarding`.
    case forward(Upstream)
    /// Go upstream again without validators, on a later loop turn (libcurl
    /// is not re-entered from its callback): stop the fetch now, report
    /// `nextTurn` then. `dropStored`: remove what is stored for the key first.
    case forwardAgain(dropStored: Bool)
    /// The upstream's head is the answer: write it (`streams`).
    case takeHead
    /// Pass the upstream's interim response on to the client.
    case passInterim
    /// A 304 answered the conditional request for this stored response:
    /// refresh it with the 304 and report `refreshed`.
    /// (The 304 is the machine's `notModified`.)
    case refresh(CachedResponse)
    /// Revalidate this served response in the background.
    case revalidate(CachedResponse)
    /// The client left while the key's claim here was this exchange's: let it go.
    case releaseClaim
    /// The exchange is over (its answer queued, or its client gone):
    /// nothing more is done for it.
    case ended

    /// Which event was ignored, and the state it found.
    struct Ignored: Equatable {
        let event: ExchangeEvent
        let state: ExchangeMachine.State
    }

    /// How to go upstream: whether the fetch holds the key's claim here
    /// (`leading`) and in the fleet.
    struct Upstream: Equatable {
        var leading = false
        var claimedInFleet = false
        var count = ExchangeCount.none
    }
}

/// Which of the store's stages a lookup asks.
enum LookupStage: Equatable {
    /// The local tiers (memory, disk).
    case local
    /// The local tiers, once what is stored for the key is removed (a
    /// stored body went away).
    case forgetting
    /// The stage past them (a fleet's shared tier), its variants added to
    /// those found here; reported `from: .shared`, or `.sharedUnavailable`.
    case shared
}

/// Equal actions ask the same of the driver: stored responses and fetches
/// compared by identity, the rest by value.
extension ExchangeAction {
    static func == (a: ExchangeAction, b: ExchangeAction) -> Bool {
        switch (a, b) {
        case (.none, .none), (.releaseClaim, .releaseClaim), (.takeHead, .takeHead), (.ended, .ended), (.passInterim, .passInterim):
            return true
        case let (.ignored(x), .ignored(y)): return x == y
        case let (.lookUp(x), .lookUp(y)): return x == y
        case let (.serve(x), .serve(y)), let (.serveInstead(x), .serveInstead(y)): return x == y
        case let (.answer(x), .answer(y)): return x == y
        case let (.collapse(x, f), .collapse(y, g)): return x == y && f == g
        case let (.awaitLock(x), .awaitLock(y)): return x == y
        case let (.follow(f, x), .follow(g, y)): return f === g && x == y
        case let (.forward(x), .forward(y)): return x == y
        case let (.forwardAgain(x), .forwardAgain(y)): return x == y
        case let (.refresh(e), .refresh(f)): return e.isSame(f)
        case let (.revalidate(e), .revalidate(f)): return e.isSame(f)
        default: return false
        }
    }
}

/// The machine's events that return an action (the names of its methods).
enum ExchangeEvent: UInt8, Equatable {
    case start, lookedUp, joined, leaderDone, served, upstreamHead, upstreamFailed, refreshed, nextTurn, interim, upstreamSlow
}

// Every payload is a few words at most: an action is returned and
// switched on several times per hit, and a large one was copied through
// outlined value witnesses (about 700 instructions a hit).

/// An answer made here: its status, body and Cache-Status (a class: seldom
/// made, and the action stays small).
final class MadeHere {
    let status: Int
    let message: String
    let cacheStatus: String?

    init(status: Int, message: String, cacheStatus: String? = nil) {
        (self.status, self.message, self.cacheStatus) = (status, message, cacheStatus)
    }
}

extension MadeHere: Equatable {
    static func == (a: MadeHere, b: MadeHere) -> Bool {
        (a.status, a.message, a.cacheStatus) == (b.status, b.message, b.cacheStatus)
    }
}

/// Which of the worker's counters an action bumps.
enum ExchangeCount: Equatable {
    case none, hit, staleHit, miss, staleForward, collapsed
}

/// A stored response offered to the client, with what its head says.
struct StoredServing {
    let entry: CachedResponse
    let age: Int
    let now: Int64
    let cacheStatus: CacheStatusLine
    /// Counted once it is served.
    let count: ExchangeCount
    /// The key's claim here is let go first (a response another node shared).
    var releasesClaim = false
}

/// The same offer: the same stored response (by identity), head and count.
extension StoredServing: Equatable {
    static func == (a: StoredServing, b: StoredServing) -> Bool {
        a.entry.isSame(b.entry) && (a.age, a.now, a.count, a.releasesClaim) == (b.age, b.now, b.count, b.releasesClaim)
            && a.cacheStatus == b.cacheStatus
    }
}

/// What became of a stored response offered to the client.
enum StoredServe: Equatable {
    /// Queued whole.
    case served
    /// Its head is sent; its gzip body is decoded as the client drains.
    case decoding
    /// Nothing sent: its body is a disk file that can no longer be opened.
    case bodyGone
    /// Nothing sent: the client does not take its gzip, and it cannot be
    /// decoded here (`ClientCoding`); the stored copy is still good for
    /// those who take it.
    case undecodable
    /// Nothing sent yet: what it needs is being read from the disk on an
    /// I/O thread; the outcome comes later (`Exchange.served`).
    case waiting
}

/// What a lookup found, as the machine decides on it: the outcome of
/// `Lookup.decide` over the variants at `now`, a stored piece the upstream
/// may complete (`Forwarding.completable`), and what the request's
/// Cache-Control, as the lookup read it, says beyond freshness. (The
/// variants go beside it: with them inside, it was copied through
/// outlined value witnesses on every hit.)
struct LookupFound {
    var outcome: LookupOutcome
    var completable: Completion?
    var now: Int64
    var onlyIfCached = false
    var staleIfError: Int? = nil

    /// Served stale only for the configured grace (not its own stale-while-revalidate).
    func withinGrace(_ policy: RequestPolicy) -> Bool {
        if policy == .useProtocolCachePolicy, case .staleWithinGrace = outcome { return true }
        return false
    }
}
