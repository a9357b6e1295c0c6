/// One upstream fetch's life as states and the events that move it: which
/// event may happen in which state and what the driver (`UpstreamFetch`)
/// must do about it, its claim on the key while it fetches (collapsing),
/// pauses and retries. A value with no sockets, store or curl, driven event
/// by event in ProxyTests.
///
///     requesting ──► streaming ──► done
///       │  ▲ retry       │          ▲
///       └──┘             ▼          │
///         │           orphaned ─────┤
///         └─────────────────────────┘
struct FetchMachine: Equatable {
    enum State: Equatable {
        /// The request is out (again, after a retry); no response head yet.
        case requesting
        /// The response streams to the client, the store and followers.
        case streaming
        /// The client left; the response goes on into the store and to
        /// followers only.
        case orphaned
        /// Over: ended, failed, cancelled, or answered otherwise (a 5xx
        /// served stale, a 304 refresh). Late upstream events are ignored.
        case done
    }

    /// The fetch's claim on its key (Collapser): requests for the key wait
    /// for it instead of fetching themselves.
    enum Leadership: Equatable {
        case none
        case leading
        /// Leading, and the response is published to the waiting
        /// requests as it arrives.
        case publishing(SharedFetch)
    }

    private(set) var state = State.requesting
    private(set) var leadership: Leadership
    /// The transfer is held (a slow client, or a store behind with writing).
    private(set) var paused = false
    /// Connection failures so far (bounded retries).
    private(set) var failedAttempts = 0

    init(leading: Bool) {
        leadership = leading ? .leading : .none
    }

    // MARK: collapsing

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

    // MARK: the response

    /// Whether an upstream head is for the fetch to handle.
    var takesHead: Bool { state == .requesting }

    /// The head was taken: the body follows.
    mutating func headTaken() {
        if state == .requesting { state = .streaming }
    }

    enum BodyAction: Equatable {
        /// To the client (while there is one), followers and the store.
        case take
        /// Hold the transfer until `caughtUp` (the piece comes again).
        case pause
        /// Not wanted (over): taken and dropped.
        case discard
    }

    /// A body piece arrived. The questions are asked only where they
    /// apply: `storeBacklogged` registers for the store's wake-up, and
    /// there is no client to ask once it left.
    mutating func body(clientCongested: () -> Bool, storeBacklogged: () -> Bool) -> BodyAction {
        switch state {
        case .streaming:
            if storeBacklogged() || clientCongested() { return pause() }
            return .take
        case .orphaned:
            return storeBacklogged() ? pause() : .take
        case .requesting, .done:
            return .discard
        }
    }

    private mutating func pause() -> BodyAction {
        paused = true
        return .pause
    }

    /// The client or the store caught up: true when the transfer should resume.
    mutating func caughtUp() -> Bool {
        guard paused else { return false }
        paused = false
        return true
    }

    enum Completion: Equatable {
        /// Nothing to do: over already.
        case ignore
        /// The connection failed before any response: go again (later loop turn).
        case retry
        /// Failed before any response: the client answers as
        /// `UpstreamFailure` says.
        case failed
        /// The response ended (whole or not: the driver checks its length).
        case ended
        /// It broke after its head: nothing is stored, the client is cut off.
        case cut
    }

    /// The transfer ended, `failed` or not; `retryable`: the failure came
    /// before any response byte and the request may go again.
    mutating func complete(failed: Bool, retryable: Bool) -> Completion {
        switch state {
        case .requesting:
            if failed && retryable {
                failedAttempts += 1
                return .retry
            }
            finish()
            return .failed
        case .streaming, .orphaned:
            finish()
            return failed ? .cut : .ended
        case .done:
            return .ignore
        }
    }

    /// Over (ended, or given up by the driver).
    mutating func finish() {
        state = .done
        paused = false
    }

    // MARK: the client

    enum ClientGone: Equatable {
        /// Keep fetching with no client (resuming a paused transfer).
        case keepFetching(resume: Bool)
        /// Stop: transfer, store, collapsing.
        case cancel
        /// Over already.
        case none
    }

    /// The client went away. `mayFinishWithoutClient`: the response is
    /// being stored and small enough, or followers stream it.
    mutating func clientGone(mayFinishWithoutClient: Bool) -> ClientGone {
        switch state {
        case .done, .orphaned:
            return .none
        case .streaming where mayFinishWithoutClient:
            state = .orphaned
            return .keepFetching(resume: caughtUp())
        case .streaming, .requesting:
            finish()
            return .cancel
        }
    }
}
