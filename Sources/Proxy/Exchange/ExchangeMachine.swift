import CacheSemantics
import CacheStorage

/// One request's life as the client sees it, and every decision in it:
/// each event (a lookup's result, the fleet's answer, the collapser's,
/// the upstream's head or failure, a stored response served or not, the
/// client gone) returns the one action the driver (`Exchange`) must
/// perform (`ExchangeAction`); the driver reports what came of it as the
/// next event. Every lookup (the first, the one after the fleet answered,
/// the one after a collapsed wait, the one after another node fetched)
/// goes through `lookedUp`, and so through the request's policy. The
/// upstream side (retries, pauses, the store) is the fetch's own
/// (`FetchMachine`). A value with no sockets, store or curl, driven whole
/// lives at a time in ProxyTests.
///
///     lookingUp ─► joining ─► forwarding ─► streaming ─► done
///       │ ▲ again      │ ▲ (the fleet's claim)              ▲
///       │ └─ waitingForLeader ─► following ─────────────────┤
///       ▼                                                   │
///     serving ─► (served) / decoding ───────────────────────┘
///
/// A fleet's shared tier is a stage of the lookup (`.lookUp(.shared)`)
/// and its claim part of the cache lock's join, not states of their own.
struct ExchangeMachine {
    enum State: Equatable {
        case starting
        /// Waiting for the store's variants (`lookedUp`).
        case lookingUp
        /// Joining the key's cache lock (here, and across the fleet).
        case joining
        /// Collapsed onto the request already fetching this key.
        case waitingForLeader
        /// Streaming that leader's response as it arrives.
        case following
        /// Offering a stored response (`served` comes next).
        case serving
        /// Gone upstream, no response head yet (also while validating).
        case forwarding
        /// The upstream's response streams to the client.
        case streaming
        /// A stored gzip body streams to the client, decoded as it drains.
        case decoding
        /// Answered or given up: late events are ignored.
        case done
    }

    /// What was waited for before this lookup: it decides what may follow.
    enum Waited: Equatable {
        /// Nothing: the fleet may be asked, the fetch may be collapsed.
        case nothing
        /// A leader on this node finished: serve what it stored, else fetch alone.
        case leader
        /// Another node fetched: serve what it shared, else fetch, leading here.
        case fleetLeader
    }

    /// The store's stage past the local tiers (a fleet's shared tier).
    enum SharedStage: Equatable {
        case none, notAsked, asking, answered, unavailable
    }

    /// The request's facts the decisions read (a few words: the machine
    /// lives in every exchange, hits included).
    struct Request {
        /// GET or HEAD without a body: looked up and stored.
        var isCacheLookup = false
        var isGet = false
        /// How stale a stand-in for an unreachable upstream may be (seconds).
        var disconnectedGrace = 0
        /// The cache is shared (RFC 9111's shared-cache rules).
        var shared = true
        /// A fleet's shared tier is configured.
        var fleet = false
    }

    var state = State.starting
    private(set) var waited = Waited.nothing
    private(set) var fleet = SharedStage.none
    /// Of the request's Cache-Control as the lookup read it (`LookupFound`).
    var onlyIfCached = false
    var staleIfError: Int?
    /// Why and how the request goes upstream, as the latest lookup decided
    /// (nil until one decides it does: a hit makes none).
    var upstreamPlan: Forwarding?
    /// A copy (tests; the fetch's start): the machine reads its plan in place.
    var forwarding: Forwarding { upstreamPlan ?? Forwarding() }
    /// Why the request goes upstream (`fwd=method` when it was not looked up).
    var forwardReason: CacheStatus.Forward { upstreamPlan?.reason ?? .method }
    /// The Cache-Status value of an answer from upstream.
    func forwardCacheStatus(stored: Bool, fwdStatus: Int? = nil, detail: String? = nil) -> String {
        CacheStatus.forward(upstreamPlan?.completing != nil ? .partial : forwardReason, stored: stored, fwdStatus: fwdStatus,
                            detail: detail)
    }
    private(set) var request = Request()
    private var policy = RequestPolicy.useProtocolCachePolicy
    private var chosenByClient = false
    /// An unknown policy's 400.
    private var refused: MadeHere?
    /// The stored response being offered, and why.
    var offer = Offer.none
    /// A stored body went away once already: no second lookup for it.
    var forgot = false

    enum Offer {
        case none
        /// `refreshing`: revalidated in the background once served (nil:
        /// a plain hit holds no reference).
        case hit(refreshing: CachedResponse?)
        case standIn(now: Int64)
        /// A 304 answered the validation: its refresh is served (indirect:
        /// a seldom case kept out of the machine's inline size).
        indirect case refreshed(by: UpstreamResponse)
    }

    init(_ request: Request, choice: PolicyChoice) {
        configure(request, choice: choice)
    }

    /// A machine set up in place by `configure` (built aside and copied
    /// into the exchange, it cost about 250 instructions a request).
    init() {}

    /// `choice`: the request's policy as `PolicyChoice` made it.
    @inline(__always)
    mutating func configure(_ request: Request, choice: PolicyChoice) {
        self.request = request
        fleet = request.fleet ? .notAsked : .none
        if case .chosen(let chosen, let byClient) = choice {
            policy = chosen
            chosenByClient = byClient
        } else if case .unknown(let message) = choice {
            refused = MadeHere(status: 400, message: message)
        }
    }

    /// Whether the client has been sent, or is being sent, an answer.
    /// A stored response is being offered (`served` comes next).
    var isOffering: Bool { state == .serving || state == .forwarding }

    var responseStarted: Bool {
        switch state {
        case .starting, .lookingUp, .joining, .waitingForLeader, .forwarding, .serving:
            return false
        case .following, .streaming, .decoding, .done: return true
        }
    }

    /// The client's part is over: nothing more is sent to it.
    var clientDone: Bool { state == .done }

    /// Cache-Status of a response followed from the request that fetched it.
    var followedCacheStatus: String { forwardCacheStatus(stored: false) + "; collapsed" }

    // MARK: the lookup

    @inline(__always)  // (this and the hit's other events: a call each cost more than they do)
    mutating func start() -> ExchangeAction {
        guard state == .starting else {
            assertionFailure("an exchange started twice")  // the driver's bug: trapped in debug builds
            return ignored(.start)
        }
        if let refused {
            state = .done
            return .answer(refused)
        }
        guard request.isCacheLookup else {
            upstreamPlan = Forwarding()
            state = .forwarding
            return .forward(.init())
        }
        state = .lookingUp
        return .lookUp(.local)
    }

    /// Which stages of the store a lookup's variants come from.
    enum LookedIn: Equatable {
        /// The local tiers.
        case local
        /// The local tiers and the shared stage asked after them.
        case shared
        /// The local tiers alone: the shared stage could not be asked.
        case sharedUnavailable
    }

    /// The store's variants (with the shared stage's, `from`): decided on
    /// through the request's policy.
    mutating func lookedUp(_ found: LookupFound, in variants: Variants, from stages: LookedIn = .local) -> ExchangeAction {
        guard state == .lookingUp, (stages == .local) == (fleet != .asking) else { return ignored(.lookedUp) }
        if stages != .local { fleet = stages == .shared ? .answered : .unavailable }
        return decide(found, in: variants)
    }

    private mutating func decide(_ found: LookupFound, in variants: Variants) -> ExchangeAction {
        (onlyIfCached, staleIfError) = (found.onlyIfCached, found.staleIfError)
        let plan: LookupPlan
        if policy == .useProtocolCachePolicy, case .fresh(let index, let age, let ttl) = found.outcome {
            // The usual hit, as `LookupPlan.make` decides it, without asking it (about 50 instructions).
            plan = .serve(index: index, age: age, ttl: ttl, stale: false, refresh: false)
        } else {
            plan = LookupPlan.make(policy.action(for: found.outcome), chosenByClient: chosenByClient, onlyIfCached: onlyIfCached)
        }
        if case .serve(let index, let age, let ttl, let stale, let refresh) = plan {
            let entry = variants[index]
            offer = .hit(refreshing: refresh ? entry : nil)
            state = .serving
            switch waited {
            case .nothing:
                return .serve(StoredServing(entry: entry, age: age, now: found.now,
                                            cacheStatus: CacheStatus.hit(ttl: ttl, detail: fleet == .answered ? "fleet"
                                                                         : stale && found.withinGrace(policy) ? "grace" : nil),
                                            count: stale ? .staleHit : .hit))
            case .leader:
                // Counted as a miss already, and collapsed.
                return .serve(StoredServing(entry: entry, age: age, now: found.now,
                                            cacheStatus: CacheStatusLine("\(forwardCacheStatus(stored: false)); collapsed"),
                                            count: .none))
            case .fleetLeader:
                return .serve(StoredServing(entry: entry, age: age, now: found.now,
                                            cacheStatus: CacheStatus.hit(ttl: ttl, detail: "fleet"), count: .collapsed,
                                            releasesClaim: true))
            }
        }
        if waited == .nothing, fleet == .notAsked, plan.mayAskFleet {
            fleet = .asking
            return .lookUp(.shared)
        }
        switch plan {
        case .serve:
            return .none  // answered above
        case .cacheOnlyMiss(let detail, let message):
            state = .done
            return .answer(MadeHere(status: 504, message: message, cacheStatus: "larder; detail=\(detail)"))
        case .forward(let how):
            upstreamPlan = Forwarding(how, variants: variants, isGet: request.isGet, requestStaleIfError: staleIfError,
                                    disconnectedGrace: request.disconnectedGrace)
            state = .forwarding
            switch waited {
            case .leader: return .forward(.init())
            case .fleetLeader: return .forward(.init(leading: true))
            case .nothing: break
            }
            let count: ExchangeCount = how.reason == .stale ? .staleForward : .miss
            if how.reason == .uriMiss || how.reason == .varyMiss, let completion = found.completable {
                // Collapsed like any miss, but never shared (a follower would
                // get the rest alone): requests that arrive meanwhile wait,
                // then look up again and find the joined piece.
                upstreamPlan?.completing = completion.owned()
            }
            guard how.collapse else { return .forward(.init(count: count)) }
            state = .joining
            return .collapse(count: count, acrossFleet: fleet == .answered)
        }
    }

    /// What a late event gets: nothing to do, with the event and the state it found.
    func ignored(_ event: ExchangeEvent) -> ExchangeAction { .ignored(.init(event: event, state: state)) }

    // MARK: collapsing

    enum Joined {
        /// This request's fetch is the one others wait for (here).
        case leading
        /// Leading here, and this node holds the key's claim across the fleet.
        case claimed
        /// Leading here, the fleet's claim asked: `joined` comes again.
        case claiming
        /// Another node fetched the key: its answer is looked for in the shared stage.
        case fetchedElsewhere
        /// The leader's response streams and suits this request.
        case following(SharedFetch)
        /// Queued behind the leader (`leaderDone` comes).
        case waiting
        /// Fetch without collapsing (not a GET, or another variant).
        case fetchAlone
    }

    mutating func joined(_ joined: Joined) -> ExchangeAction {
        guard state == .joining else { return ignored(.joined) }
        switch joined {
        case .leading:
            state = .forwarding
            return .forward(.init(leading: true))
        case .claimed:
            state = .forwarding
            return .forward(.init(leading: true, claimedInFleet: true))
        case .claiming:
            return .awaitLock(count: .none)
        case .fetchedElsewhere:
            waited = .fleetLeader
            fleet = .asking
            state = .lookingUp
            return .lookUp(.shared)
        case .following(let fetch):
            // Another's fetch of the whole: nothing of the stored piece is sent.
            upstreamPlan?.completing = nil
            state = .following
            return .follow(fetch, count: .collapsed)
        case .waiting:
            // (What the leader stores is looked up again: a piece to complete is found again then.)
            upstreamPlan?.completing = nil
            state = .waitingForLeader
            return .awaitLock(count: .collapsed)
        case .fetchAlone:
            state = .forwarding
            return .forward(.init())
        }
    }

    /// The cache lock's later answer: the leader published its response,
    /// finished without one to share, or the wait timed out; or the
    /// fleet's claim was answered (as `joined`).
    mutating func leaderDone(_ ended: LeaderWait.Ended) -> ExchangeAction {
        if case .claimedAcrossFleet(let claimed) = ended { return joined(claimed ? .claimed : .fetchedElsewhere) }
        guard state == .waitingForLeader else { return ignored(.leaderDone) }
        switch ended {
        case .claimedAcrossFleet:
            return ignored(.leaderDone)  // (answered above)
        case .follow(let fetch):
            state = .following
            return .follow(fetch, count: .none)
        case .fetchAlone:
            state = .forwarding
            return .forward(.init())
        case .lookUpAgain:
            waited = .leader
            state = .lookingUp
            return .lookUp(.local)
        }
    }
}
