import CacheSemantics
import Upstream

/// One upstream fetch's life as states and the events that move it: every
/// event returns the `FetchAction` the driver (`UpstreamFetch`) carries
/// out, a late one `.ignored` with the event and the state it found. It
/// decides what the driver used to: an invalid head is refused (502), a
/// connection failure retried (`Retry`) or answered, a server marked
/// failed, the claim on the key released once (at once for a response not
/// stored), a paused transfer resumed once, the fetch kept going or stopped
/// when its client leaves, and stopped once it is no longer worth finishing
/// without it (past finish_store_limit, or no longer stored). A value
/// with no sockets, store or curl, driven event by event in ProxyTests.
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
    /// The client was answered otherwise before the head came (a stale
    /// copy, stale_timeout): the response, when it comes, is the store's alone.
    private(set) var unattended = false
    private(set) var leadership: Leadership
    /// The transfer is held (a slow client, or a store behind with writing).
    private(set) var paused = false
    /// Connection failures so far (bounded retries).
    private(set) var failedAttempts = 0
    /// What decides a retry: the request's method, whether it has a body,
    /// the configured retries.
    private let method: String
    private let hasBody: Bool
    private let retryLimit: Int
    /// What decides whether the response is finished once its client
    /// left: whether it goes into the store, its length (said, and
    /// received so far), and finish_store_limit (0: never).
    private(set) var storing = false
    /// The length the response's head said, once it streams.
    private(set) var expectedLength: Int?
    private var received = 0
    private let finishStoreLimit: Int

    init(leading: Bool, method: String = "GET", hasBody: Bool = false, retryLimit: Int = 0, finishStoreLimit: Int = 0) {
        leadership = leading ? .leading : .none
        (self.method, self.hasBody, self.retryLimit, self.finishStoreLimit) = (method, hasBody, retryLimit, finishStoreLimit)
    }

    private func ignored(_ event: FetchEvent) -> FetchAction { .ignored(FetchIgnored(event: event, state: state)) }

    // MARK: collapsing

    /// Whether the response may still be published to waiting requests.
    var mayPublish: Bool { leadership == .leading }

    mutating func publish(_ fetch: SharedFetch) -> FetchAction {
        guard leadership == .leading else { return ignored(.publish) }
        leadership = .publishing(fetch)
        return .publish
    }

    /// The published response, while leading.
    var published: SharedFetch? {
        if case .publishing(let fetch) = leadership { return fetch }
        return nil
    }

    /// The claim is given up (the response will not be stored, or the
    /// fetch is over): released once.
    mutating func endLeadership() -> FetchAction {
        guard leadership != .none else { return ignored(.endLeadership) }
        leadership = .none
        return .releaseClaim
    }

    // MARK: the response

    /// Whether an upstream head (or an interim one) is for the fetch to handle.
    var takesHead: Bool { state == .requesting }

    /// A response head arrived: `invalid` says why its framing cannot be
    /// read (RFC 9112 section 6.3: refused, 502); `clientTakes`, whether
    /// the client streams it (not when it answered otherwise: a 5xx's
    /// stand-in, a 304 refresh).
    mutating func head(invalid: String?, clientTakes: Bool) -> FetchAction {
        guard state == .requesting else { return ignored(.head) }
        if let invalid { return .refuse(invalid) }
        guard clientTakes else { return .drop }
        state = unattended ? .orphaned : .streaming
        return .stream
    }

    /// A body piece arrived: `.take` (to the client while there is one,
    /// followers and the store), `.pause` (hold the transfer until
    /// `caughtUp`; the piece comes again), or ignored (over: taken and
    /// dropped). The questions are asked only where they apply:
    /// `storeBacklogged` registers for the store's wake-up, and there is no
    /// client to ask once it left.
    mutating func body(clientCongested: () -> Bool, storeBacklogged: () -> Bool) -> FetchAction {
        switch state {
        case .streaming:
            if storeBacklogged() || clientCongested() { return pause() }
            return .take
        case .orphaned:
            return storeBacklogged() ? pause() : .take
        case .requesting, .done:
            return ignored(.body)
        }
    }

    /// Whether the store takes the streaming response (`storing`) and the
    /// length its head said: `.store`, or `.pass` (not stored: the claim
    /// is given up at once, so requests waiting for it fetch on their own).
    mutating func storeChosen(_ storing: Bool, expectedLength: Int?) -> FetchAction {
        guard state == .streaming || state == .orphaned else { return ignored(.storeChosen) }
        (self.storing, self.expectedLength) = (storing, expectedLength)
        return storing ? .store : .pass
    }

    /// A body piece was taken: `received` bytes so far, `storing` whether
    /// the store still takes them (it may give up: a body over its
    /// limits). `.take` (go on), or `.stop` for an orphan no longer worth
    /// finishing.
    mutating func took(received: Int, storing: Bool) -> FetchAction {
        guard state == .streaming || state == .orphaned else { return ignored(.took) }
        self.received = received
        self.storing = self.storing && storing
        guard state == .orphaned, !mayFinishUnattended else { return .take }
        finish()
        return .stop
    }

    /// Whether the response is finished without its client: followers
    /// stream it, or it goes into the store within finish_store_limit (by
    /// the length it said, or, when it said none, what came so far).
    var mayFinishUnattended: Bool {
        guard state == .streaming || state == .orphaned else { return false }
        if published?.hasFollowers ?? false { return true }
        return storing && finishStoreLimit > 0 && max(expectedLength ?? 0, received) <= finishStoreLimit
    }

    private mutating func pause() -> FetchAction {
        paused = true
        return .pause
    }

    /// The client or the store caught up: a paused transfer resumes, once.
    mutating func caughtUp() -> FetchAction {
        guard paused else { return ignored(.caughtUp) }
        paused = false
        return .resume
    }

    /// The transfer ended (`error`: how it failed). Before any response: a
    /// connection failure or a response head that did not come in time goes
    /// again (to the pool's next server) while `Retry` allows, as nginx's
    /// `proxy_next_upstream error timeout`, else the client is answered; a
    /// server that could not be reached or did not answer in time is
    /// marked. After the head: ended, or cut.
    mutating func complete(_ error: UpstreamError?) -> FetchAction {
        switch state {
        case .requesting:
            var markServer = false
            if case .unreachable? = error { markServer = true }
            if case .timedOut? = error { markServer = true }
            if markServer,
               Retry.mayRetry(method: method, hasBody: hasBody, failedAttempts: failedAttempts, limit: retryLimit) {
                failedAttempts += 1
                return .retry(markServer: markServer)
            }
            finish()
            if case .timedOut? = error { return .fail(.timedOut, markServer: markServer) }
            return .fail(.unreachable, markServer: markServer)
        case .streaming, .orphaned:
            finish()
            return error == nil ? .end : .cut
        case .done:
            return ignored(.complete)
        }
    }

    /// The driver stops the fetch (cancelled, refused, answered otherwise).
    mutating func stop() -> FetchAction {
        guard state != .done else { return ignored(.stop) }
        finish()
        return .stop
    }

    private mutating func finish() {
        state = .done
        paused = false
    }

    // MARK: the client

    /// The client went away: the fetch goes on when it may finish
    /// unattended (`mayFinishUnattended`), else it stops.
    mutating func clientGone() -> FetchAction {
        switch state {
        case .done, .orphaned:
            return ignored(.clientGone)
        case .streaming where mayFinishUnattended:
            state = .orphaned
            let resume = paused
            paused = false
            return .keepFetching(resume: resume)
        case .streaming, .requesting:
            finish()
            return .stop
        }
    }

    /// The client was answered with a stored response while the head was
    /// still awaited (the upstream is slow): the fetch goes on without it,
    /// retried as before, and what comes goes into the store (or is
    /// dropped, when not worth finishing). Past the head, as `clientGone`.
    mutating func clientAnsweredElsewhere() -> FetchAction {
        guard state == .requesting else { return clientGone() }
        unattended = true
        return .keepFetching(resume: false)
    }
}

/// What the driver does about a fetch's event (`FetchMachine`).
enum FetchAction: Equatable {
    /// The head is the client's: store it, share it, stream its body.
    case stream
    /// The response goes into the store (requests waiting for the key wait for it).
    case store
    /// The response is not stored: release the claim on the key.
    case pass
    /// The head's framing cannot be read: stop, and the client gets 502 (why).
    case refuse(String)
    /// The client answered otherwise: the rest is not wanted (stop).
    case drop
    /// A body piece goes to the client, followers and the store.
    case take
    /// Hold the transfer until `caughtUp`.
    case pause
    case resume
    /// Go again (a later loop turn); `markServer`: count a failure against the server.
    case retry(markServer: Bool)
    /// No response: the client answers as `UpstreamFailure` says.
    case fail(UpstreamFailure.Kind, markServer: Bool)
    /// The response is over (whole or not: the driver checks its length).
    case end
    /// It broke after its head: nothing is stored, the client is cut off.
    case cut
    /// Over now: transfer, store, collapsing stopped.
    case stop
    /// The client left; the response goes on (`resume`: a paused transfer).
    case keepFetching(resume: Bool)
    case publish
    case releaseClaim
    /// An event that came too late (or twice) for the state.
    case ignored(FetchIgnored)
}

/// The events of `FetchMachine`, named in its ignored actions.
enum FetchEvent: Equatable {
    case head, storeChosen, body, took, caughtUp, complete, stop, clientGone, publish, endLeadership
}

/// A late event, and the state that found it.
struct FetchIgnored: Equatable {
    let event: FetchEvent
    let state: FetchMachine.State
}
