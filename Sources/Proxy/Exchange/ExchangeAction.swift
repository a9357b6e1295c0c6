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
    /// Look the key up in the store and report `lookedUp`. `forgetting`:
    /// remove what is stored for it first (a stored body went away).
    case lookUp(forgetting: Bool)
    /// Ask the fleet's shared tier for the key and report `lookedUp` with
    /// what it had added to what is stored here, or `fleetUnavailable`.
    case askFleet
    /// Claim the key's fetch across the fleet; report `claimed`, or
    /// `fleetUnavailable` when Redis cannot be asked.
    case claimInFleet
    /// Offer a stored response to the client; report `served`.
    case serve(StoredServing)
    /// An answer made here (400, 502, 504), queued whole: the exchange is done.
    case answer(MadeHere)
    /// Join the key's collapser (`LeaderWait.join`) and report `joined`.
    case collapse(count: ExchangeCount)
    /// Keep the wait for the leader (a collapsed request).
    case awaitLeader
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
    case refresh(CachedResponse, by: Box<UpstreamResponse>)
    /// Revalidate this served response in the background.
    case revalidate(CachedResponse)
    /// The client left while the key's claims were this exchange's: let
    /// them go (the fleet's too, when `fleet`).
    case releaseClaims(fleet: Bool)
    /// The exchange is over (its answer queued, or its client gone):
    /// nothing more is done for it; a claim answered later lets go
    /// (`releaseClaims`).
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

/// Equal actions ask the same of the driver: stored responses and fetches
/// compared by identity, the rest by value.
extension ExchangeAction {
    static func == (a: ExchangeAction, b: ExchangeAction) -> Bool {
        switch (a, b) {
        case (.none, .none), (.askFleet, .askFleet), (.claimInFleet, .claimInFleet), (.awaitLeader, .awaitLeader),
             (.takeHead, .takeHead), (.ended, .ended), (.passInterim, .passInterim):
            return true
        case let (.ignored(x), .ignored(y)): return x == y
        case let (.lookUp(x), .lookUp(y)): return x == y
        case let (.serve(x), .serve(y)): return x == y
        case let (.answer(x), .answer(y)): return x == y
        case let (.collapse(x), .collapse(y)): return x == y
        case let (.follow(f, x), .follow(g, y)): return f === g && x == y
        case let (.forward(x), .forward(y)): return x == y
        case let (.forwardAgain(x), .forwardAgain(y)): return x == y
        case let (.refresh(e, r), .refresh(f, s)): return e.isSame(f) && r === s
        case let (.revalidate(e), .revalidate(f)): return e.isSame(f)
        case let (.releaseClaims(x), .releaseClaims(y)): return x == y
        default: return false
        }
    }
}

/// The machine's events that return an action (the names of its methods).
enum ExchangeEvent: UInt8, Equatable {
    case start, lookedUp, fleetUnavailable, joined, leaderDone, claimed, served, upstreamHead, upstreamFailed, refreshed, nextTurn,
         interim
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
}
