/// One request's life as the client sees it: states and the events that
/// move them, and what the driver (`Exchange`) must do about each. The
/// upstream side (retries, pauses, the store, the claim on the key) is
/// the fetch's own (`FetchMachine`), which goes on without the client
/// when worth it. A value with no sockets, store or curl, driven event by
/// event in ProxyTests; the content of answers (heads, stored bodies, the
/// cache decisions of `CacheSemantics`) stays with the driver.
///
///     askingFleet
///       ▲    │
///       │    ▼
///     lookingUp ──► waitingForLeader ──► following ──► done
///         │               │                              ▲
///         ├───────────────┴──► forwarding ──► streaming ─┤
///         │                      │  ▲ again              │
///         │                      └──┘                    │
///         ├──────────── answered from the store ─────────┤
///         └──────────── decoding (a stored gzip body) ───┘
struct ExchangeMachine: Equatable {
    enum State: Equatable {
        /// Choosing the policy and looking the key up; nothing sent yet.
        case lookingUp
        /// The local tiers missed: asking the fleet's shared tier.
        case askingFleet
        /// Collapsed onto the request already fetching this key.
        case waitingForLeader
        /// Streaming that leader's response as it arrives.
        case following
        /// Gone upstream, no response head yet (also while validating).
        case forwarding
        /// The upstream's response streams to the client.
        case streaming
        /// A stored gzip body streams to the client, decoded as it drains.
        case decoding
        /// Answered (from the store, by the upstream, or an error made
        /// here) or given up: late events are ignored.
        case done
    }

    private(set) var state = State.lookingUp

    /// Whether the client has been sent, or is being sent, an answer.
    var responseStarted: Bool {
        switch state {
        case .lookingUp, .askingFleet, .waitingForLeader, .forwarding: return false
        case .following, .streaming, .decoding, .done: return true
        }
    }

    /// The client's part is over: nothing more is sent to it.
    var clientDone: Bool { state == .done }

    // MARK: the fleet

    /// The local tiers missed: ask the fleet's shared tier.
    mutating func askFleet() {
        if state == .lookingUp { state = .askingFleet }
    }

    /// The fleet answered; false when that no longer matters (the client left).
    mutating func fleetAnswered() -> Bool {
        guard state == .askingFleet else { return false }
        state = .lookingUp
        return true
    }

    // MARK: collapsing

    /// Another request fetches the key: wait for it.
    mutating func waitForLeader() {
        if state == .lookingUp { state = .waitingForLeader }
    }

    enum LeaderDone: Equatable {
        /// Not waiting (any more): a late wake-up or timer.
        case ignore
        /// Its response is streaming: follow it.
        case follow
        /// It is done without one to share: look the key up again.
        case lookUpAgain
    }

    /// The leader finished, published its response, or the wait timed out.
    mutating func leaderDone(streaming: Bool) -> LeaderDone {
        guard state == .waitingForLeader else { return .ignore }
        state = .lookingUp
        return streaming ? .follow : .lookUpAgain
    }

    /// Streams a shared response (the driver writes its head).
    mutating func follow() {
        if state == .lookingUp || state == .waitingForLeader { state = .following }
    }

    // MARK: the upstream

    /// The request goes upstream (again, after a 304 that named nothing
    /// held or whose body had gone).
    mutating func forward() {
        if !clientDone { state = .forwarding }
    }

    /// Whether an upstream head is for this exchange to answer with.
    var takesUpstreamHead: Bool { state == .forwarding }

    /// The upstream's head was written to the client.
    mutating func responseHeadSent() {
        if state == .forwarding { state = .streaming }
    }

    /// A stored response goes to the client decoded, piece by piece (from
    /// a lookup, a 304's refresh or a stale stand-in).
    mutating func decodeStored() {
        if state == .lookingUp || state == .forwarding { state = .decoding }
    }

    /// The whole answer is queued (a stored response, an error made here,
    /// the end of a streamed one), or the exchange is cut off.
    mutating func finish() {
        state = .done
    }
}
