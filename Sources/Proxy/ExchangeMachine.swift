/// One request's life as states and the events that move it: which event
/// may happen in which state, what the driver (`Exchange`) must do about
/// it, and the exchange's part in request collapsing. A value with no
/// sockets, store or curl, driven event by event in ProxyTests; the content
/// of answers (heads, stored bodies, the cache decisions of
/// `CacheSemantics`) stays with the driver.
///
///     lookingUp ──► waitingForLeader ──► following ──► done
///         │               │                              ▲
///         ├───────────────┴──► forwarding ──► streaming ─┤
///         │                      │  ▲ retry      │       │
///         │                      └──┘            ▼       │
///         │                                   orphaned ──┤
///         └──────────── answered from the store ─────────┘
struct ExchangeMachine: Equatable {
    enum State: Equatable {
        /// Choosing the policy and looking the key up; nothing sent yet.
        case lookingUp
        /// Collapsed onto the request already fetching this key.
        case waitingForLeader
        /// Streaming that leader's response as it arrives; `read`: how many
        /// of its pieces were queued so far.
        case following(SharedFetch, read: Int)
        /// Gone upstream, no response head yet (also while validating).
        case forwarding
        /// The upstream's response streams to the client (and the store).
        case streaming
        /// The client left; the fetch goes on to be stored or shared.
        case orphaned
        /// Answered (from the store, by the upstream, or an error made
        /// here) or given up: late upstream events are ignored.
        case done
    }

    /// This exchange's claim on its key while it fetches (Collapser):
    /// requests for the key wait for it instead of fetching themselves.
    enum Leadership: Equatable {
        case none
        case leading
        /// Leading, and the response is published to the waiting
        /// requests as it arrives.
        case publishing(SharedFetch)
    }

    private(set) var state = State.lookingUp
    private(set) var leadership = Leadership.none
    /// The upstream transfer is held (a slow client, or a store behind with writing).
    private(set) var upstreamPaused = false
    /// Connection failures so far (bounded retries).
    private(set) var failedAttempts = 0

    /// Whether the client has been sent, or is being sent, an answer.
    var responseStarted: Bool {
        switch state {
        case .lookingUp, .waitingForLeader, .forwarding: return false
        case .following, .streaming, .orphaned, .done: return true
        }
    }

    /// The client's part is over: nothing more is sent to it.
    var clientDone: Bool { state == .done || state == .orphaned }

    // MARK: collapsing

    /// This exchange fetches the key for every request that asks meanwhile.
    mutating func lead() {
        leadership = .leading
    }

    /// Whether the response may still be published to waiting requests.
    var mayPublish: Bool { leadership == .leading }

    mutating func publish(_ fetch: SharedFetch) {
        if leadership == .leading { leadership = .publishing(fetch) }
    }

    /// The published response, while leading.
    var published: SharedFetch? {
        if case .publishing(let fetch) = leadership { return fetch }
        return nil
    }

    /// True when there is a claim to release (once).
    mutating func endLeadership() -> Bool {
        defer { leadership = .none }
        return leadership != .none
    }

    /// The shared response being followed and how much of it was read.
    var followed: (fetch: SharedFetch, read: Int)? {
        if case .following(let fetch, let read) = state { return (fetch, read) }
        return nil
    }

    /// `count` more pieces of the followed response were queued.
    mutating func read(_ count: Int) {
        if case .following(let fetch, let read) = state { state = .following(fetch, read: read + count) }
    }

    // MARK: before the upstream

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
    mutating func follow(_ fetch: SharedFetch) {
        if state == .lookingUp || state == .waitingForLeader { state = .following(fetch, read: 0) }
    }

    /// The request goes upstream (again, after a retry or a 304 that named
    /// nothing held).
    mutating func forward() {
        if !clientDone { state = .forwarding }
    }

    /// The whole answer is queued (a stored response, an error made here,
    /// the end of a streamed one), or the exchange is cut off.
    mutating func finish() {
        state = .done
        upstreamPaused = false
    }

    // MARK: the upstream's response

    /// Whether an upstream head is for this exchange to handle.
    var takesUpstreamHead: Bool { state == .forwarding }

    /// The upstream's head was written to the client.
    mutating func responseHeadSent() {
        if state == .forwarding { state = .streaming }
    }

    enum BodyAction: Equatable {
        /// To the client (and followers and the store).
        case deliver
        /// Only into the store and to followers: the client left.
        case storeOnly
        /// Hold the transfer until `caughtUp` (the piece comes again).
        case pause
        /// Not wanted (answered otherwise): taken and dropped.
        case discard
    }

    /// A body piece arrived. The questions are asked only where they
    /// apply: `storeBacklogged` registers for the store's wake-up, and
    /// there is no client connection to ask once it left.
    mutating func upstreamBody(clientCongested: () -> Bool, storeBacklogged: () -> Bool) -> BodyAction {
        switch state {
        case .streaming:
            if storeBacklogged() || clientCongested() {
                upstreamPaused = true
                return .pause
            }
            return .deliver
        case .orphaned:
            if storeBacklogged() {
                upstreamPaused = true
                return .pause
            }
            return .storeOnly
        case .lookingUp, .waitingForLeader, .following, .forwarding, .done:
            return .discard
        }
    }

    /// The client or the store caught up: true when the transfer should resume.
    mutating func caughtUp() -> Bool {
        guard upstreamPaused else { return false }
        upstreamPaused = false
        return true
    }

    enum Completion: Equatable {
        /// Nothing to do: answered already, or not fetching.
        case ignore
        /// The connection failed before any response: go again (later loop turn).
        case retry
        /// Failed before any response: answer as `UpstreamFailure` says.
        case answerFailure
        /// The response ended (the driver checks it is whole).
        case endResponse
        /// It broke after its head was sent: the client connection is cut.
        case cutResponse
        /// The client had left: store or drop what came, then end.
        case endOrphan
    }

    /// The transfer ended, `failed` or not; `retryable`: the failure came
    /// before any response byte and the request may go again.
    mutating func upstreamComplete(failed: Bool, retryable: Bool) -> Completion {
        switch state {
        case .forwarding:
            if failed && retryable {
                failedAttempts += 1
                return .retry
            }
            return .answerFailure
        case .streaming:
            if failed {
                finish()
                return .cutResponse
            }
            return .endResponse
        case .orphaned:
            finish()
            return .endOrphan
        case .lookingUp, .waitingForLeader, .following, .done:
            return .ignore
        }
    }

    // MARK: the client

    enum ClientGone: Equatable {
        /// Keep fetching with no client (resuming a paused transfer).
        case keepFetching(resume: Bool)
        /// Stop everything: transfer, store, collapsing (and stop following
        /// `unfollow`).
        case cancel(unfollow: SharedFetch?)
        /// Already fetching without it.
        case none
    }

    /// The client connection went away. `mayFinishWithoutClient`: the
    /// response is being stored and small enough, or followers stream it.
    mutating func clientGone(mayFinishWithoutClient: Bool) -> ClientGone {
        switch state {
        case .orphaned:
            return .none
        case .streaming where mayFinishWithoutClient:
            state = .orphaned
            return .keepFetching(resume: caughtUp())
        default:
            let unfollow = followed?.fetch
            finish()
            return .cancel(unfollow: unfollow)
        }
    }
}
