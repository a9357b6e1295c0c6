import CacheSemantics
import CacheStorage
import HTTP1

/// The machine's second half: stored responses offered and what became of
/// them, the upstream's head and failures (stand-ins, a 304's refresh, a
/// stored piece's rest that does not fit), the end, the client gone.
extension ExchangeMachine {
    // MARK: stored responses

    /// What became of the stored response offered (`.serve`).
    @inline(__always)
    mutating func served(_ result: StoredServe) -> ExchangeAction {
        guard isOffering else { return ignored(.served) }
        // `.waiting`: the driver comes back with the outcome; the offer stays.
        guard result != .waiting else { return .none }
        var offered = Offer.none
        swap(&offered, &offer)  // moved out, not copied
        switch result {
        case .waiting:
            return .none
        case .served, .decoding:
            state = result == .served ? .done : .decoding
            if case .hit(let refreshing?) = offered { return .revalidate(refreshing) }
            return .none
        case .bodyGone, .undecodable:
            switch offered {
            case .none:
                return ignored(.served)  // nothing was offered
            case .hit:
                return lookupFailed(result)
            case .standIn(let now):
                // The next answer down.
                return nextStandIn(now: now)
            case .refreshed:
                state = .forwarding
                return forwardAgain(dropStored: result == .bodyGone)
            }
        }
    }

    /// A stored response found by a lookup could not be served.
    private mutating func lookupFailed(_ result: StoredServe) -> ExchangeAction {
        guard waited == .nothing else {
            // After a wait: fetch alone (what was waited for is over).
            state = .forwarding
            return .forward(.init())
        }
        if result == .bodyGone && !forgot {
            // Its body file went away (evicted or removed meanwhile): forget it and look again.
            forgot = true
            state = .lookingUp
            return .lookUp(.forgetting)
        }
        // Kept for the clients that take its gzip (or gone twice): this one
        // gets what the upstream sends it (identity), which takes its place when stored.
        switch LookupPlan.afterVanishedBody(onlyIfCached: onlyIfCached) {
        case .cacheOnlyMiss(let detail, let message):
            state = .done
            return .answer(MadeHere(status: 504, message: message, cacheStatus: "larder; detail=\(detail)"))
        case .forward(let how):
            upstreamPlan = Forwarding(how, variants: Variants(), isGet: request.isGet, requestStaleIfError: staleIfError,
                                    disconnectedGrace: request.disconnectedGrace)
            state = .joining
            return .collapse(count: .miss, acrossFleet: fleet == .answered)
        case .serve:
            return .none
        }
    }

    // MARK: the upstream

    /// The upstream's head. `.takeHead`
    /// when it is the answer; anything else means the rest of the fetch is
    /// not wanted (a stand-in for a 5xx, a 304's refresh, a rest that does
    /// not complete the stored piece).
    mutating func upstreamHead(_ response: UpstreamResponse, now: Int64) -> ExchangeAction {
        guard state == .forwarding else { return ignored(.upstreamHead) }
        let status = response.status
        if let completing = upstreamPlan?.completing, status != 200,
           status != 206 || !completing.isCompleted(by: response.fields) {
            // Larder made this range request up: an answer that is not the
            // rest of the stored piece's representation (an error, a 416, a
            // 206 of another one) is not the client's. What the client wants
            // is asked plainly; a piece the upstream no longer has goes.
            upstreamPlan?.completing = nil
            let gone = status == 416 || (status == 206 && response.fields["etag"] != completing.piece.etag)
            return forwardAgain(dropStored: gone)
        }
        if status >= 500 {
            if upstreamPlan == nil { upstreamPlan = Forwarding() }
            upstreamPlan?.failure = (.status(status), "upstream answered \(status)")
            let standIn = nextStandIn(now: now)
            if case .takeHead = standIn {} else { return standIn }
        }
        if status == 304, let validating = upstreamPlan?.validating {
            offer = .refreshed(by: response)
            return .refresh(validating)
        }
        return .takeHead
    }

    /// An interim response (103, 102) from the upstream: passed on while
    /// the client still waits for its answer (not once a stand-in or a
    /// stored answer went out).
    mutating func interim() -> ExchangeAction {
        guard state == .forwarding else { return ignored(.interim) }
        return .passInterim
    }

    /// How the upstream's head taken (`.takeHead`) goes to the client.
    struct StreamedHead {
        /// Cache-Status's value.
        var cacheStatus: String
        /// The stored piece the 206 completes: the head says what the
        /// client wants, and the piece's bytes go first when it leads
        /// (else they follow the upstream's: `bodyEnded`).
        var completion: Completion?
        /// A 200 the client's conditional request already has: the client
        /// gets a 304, the body goes to the store alone.
        var notModified = false
        /// A HEAD fetched as a GET: the head is the whole answer; the body
        /// goes to the store alone, if the fetch may finish without its client.
        var endsAtHead = false
    }

    /// The upstream's head goes to the client (`stored`: the response is
    /// going into the store; `mayFinishWithoutClient`: the fetch would go
    /// on without it); its body streams from now on. `client`: the
    /// request, for its conditionals and method.
    mutating func headSent(_ response: UpstreamResponse, stored: Bool, client: RequestHead? = nil,
                           mayFinishWithoutClient: Bool = false) -> StreamedHead {
        let status = response.status
        if state == .forwarding { state = .streaming }
        let endsAtHead = request.isCacheLookup && client?.method == "HEAD" && Forwarding.fetchesAsGet("HEAD", reason: forwardReason)
        let stored = stored && (!endsAtHead || mayFinishWithoutClient)
        let fwdStatus = upstreamPlan?.validating != nil || upstreamPlan?.completing != nil ? status : nil
        var head = StreamedHead(cacheStatus: forwardCacheStatus(stored: stored, fwdStatus: fwdStatus))
        head.endsAtHead = endsAtHead
        if status == 206, let completion = upstreamPlan?.completing {
            head.completion = completion
            if completion.liesInside {
                upstreamPlan?.around = CompletionAround(completion, contentRange: response.fields["content-range"],
                                                        contentType: response.fields["content-type"])
            } else if !completion.pieceLeads {
                upstreamPlan?.trailing = completion
            }
        }
        // What the client is answered: a 200 (a completion that amounts to the whole, too).
        let answered = head.completion.map { $0.answersWhole ? 200 : 206 } ?? status
        if request.isCacheLookup, answered == 200, let client {
            head.notModified = StoredAnswer.clientIsNotModified(client, etag: response.fields["etag"],
                                                                lastModified: response.fields["last-modified"],
                                                                dateValue: response.timing.dateValue ?? response.timing.responseTime)
        }
        return head
    }

    /// The stored piece the upstream's body completes around, if it does:
    /// its bytes then go through `assemble`.
    var assembledCompletion: Completion? { upstreamPlan?.around?.completion }

    /// Upstream body bytes of a completion around a stored piece, put in
    /// the client's order (`CompletionAround`); `send` must not use the
    /// machine (it is being changed).
    mutating func assemble(_ bytes: UnsafeRawBufferPointer, _ send: (CompletionAround.Output) -> Void) {
        upstreamPlan?.around?.take(bytes, send)
    }

    /// The upstream's body is over: the parts held and the stored bytes
    /// that end the answer; true when the client then has all it wants
    /// (nil: no completion around).
    mutating func finishAssembly(_ send: (CompletionAround.Output) -> Void) -> Bool? {
        upstreamPlan?.around?.finish(send)
    }

    /// The upstream's body is over (`whole`: all of it came): the stored
    /// piece whose bytes follow it, if one waits.
    mutating func bodyEnded(whole: Bool) -> Completion? {
        guard let trailing = upstreamPlan?.trailing else { return nil }
        upstreamPlan?.trailing = nil
        return whole ? trailing : nil
    }

    /// The upstream failed before any response.
    mutating func upstreamFailed(_ kind: UpstreamFailure.Kind, detail: String, now: Int64) -> ExchangeAction {
        guard state == .forwarding else { return ignored(.upstreamFailed) }
        if upstreamPlan == nil { upstreamPlan = Forwarding() }  // (nothing to stand in: a 502/504)
        upstreamPlan?.failure = (kind, detail)
        return nextStandIn(now: now)
    }

    /// Why a stored response stands in while the upstream is still being
    /// waited for (`standInAtOnce`).
    enum WithoutUpstream {
        /// No head came within stale_timeout (`detail=upstream-slow`).
        case slow
        /// Every server of the request's pool is marked failed (`detail=upstream-unreachable`).
        case down

        var detail: String { self == .slow ? "upstream-slow" : "upstream-unreachable" }
        var failure: String {
            self == .slow ? "the upstream sent no response head within stale_timeout" : "every server of the pool is marked failed"
        }
    }

    /// Whether a stored response would stand in for the upstream if no head
    /// came in time (a stale copy within stale-if-error or
    /// stale_on_disconnect, or the policy's fallback): only then is the
    /// upstream not waited for past stale_timeout.
    func mayStandInAtOnce(now: Int64) -> Bool {
        guard state == .forwarding || state == .waitingForLeader || state == .joining, let plan = upstreamPlan else { return false }
        return plan.standIns.wouldServe(.timedOut, validating: plan.validating?.cacheControl, now: now, shared: request.shared)
    }

    /// The upstream is not waited for any longer (`why`): a stored response
    /// that may stand in for it is served now, as for a timeout, and the
    /// fetch (or the leader this request waits for) goes on without it.
    mutating func standInAtOnce(_ why: WithoutUpstream, now: Int64) -> ExchangeAction {
        guard mayStandInAtOnce(now: now), state != .joining else { return ignored(.upstreamSlow) }
        upstreamPlan!.failure = (.timedOut, why.failure)
        state = .forwarding
        guard case .serve(let entry, _) = upstreamPlan!.standIn(.timedOut, detail: why.failure, now: now, shared: request.shared)
        else { return ignored(.upstreamSlow) }  // (`mayStandInAtOnce` said it would)
        let age = entry.currentAge(now: now)
        offer = .standIn(now: now)
        return .serveInstead(StoredServing(entry: entry, age: age, now: now,
                                           cacheStatus: CacheStatus.hit(ttl: entry.lifetime.minusSaturating(age), detail: why.detail),
                                           count: .staleHit))
    }

    /// The next answer in the failed upstream's place (`StandIns`): a
    /// stored response, a 502/504, or (`.takeHead`) the upstream's own.
    private mutating func nextStandIn(now: Int64) -> ExchangeAction {
        guard let failure = upstreamPlan?.failure else { return ignored(.served) }  // (only after a failure)
        switch upstreamPlan!.standIn(failure.kind, detail: failure.detail, now: now, shared: request.shared) {
        case .serve(let entry, let detail):
            let age = entry.currentAge(now: now)
            offer = .standIn(now: now)
            return .serve(StoredServing(entry: entry, age: age, now: now,
                                        cacheStatus: CacheStatus.hit(ttl: entry.lifetime.minusSaturating(age), detail: detail),
                                        count: .staleHit))
        case .gatewayError(let status, let message):
            state = .done
            return .answer(MadeHere(status: status, message: message, cacheStatus: gatewayCacheStatus))
        case .passThrough:
            upstreamPlan?.failure = nil
            guard case .status = failure.kind else {
                // No response to pass on: the failure is the answer.
                state = .done
                return .answer(MadeHere(status: 502, message: failure.detail, cacheStatus: gatewayCacheStatus))
            }
            return .takeHead
        }
    }

    private var gatewayCacheStatus: String? {
        request.isCacheLookup ? forwardCacheStatus(stored: false, detail: "upstream-error") : nil
    }

    /// The 304 kept for `.refresh`.
    var notModified: UpstreamResponse? {
        if case .refreshed(let response) = offer { return response }
        return nil
    }

    /// The 304's refresh of the validated response: nil when it names
    /// nothing held (asked again without validators).
    mutating func refreshed(_ refreshed: (response: CachedResponse, stored: Bool)?, now: Int64) -> ExchangeAction {
        guard state == .forwarding, case .refreshed = offer else { return ignored(.refreshed) }
        guard let (response, stored) = refreshed else {
            offer = .none
            return forwardAgain(dropStored: false)
        }
        return .serve(StoredServing(entry: response, age: response.currentAge(now: now), now: now,
                                    cacheStatus: CacheStatusLine(forwardCacheStatus(stored: stored, fwdStatus: 304)),
                                    count: .none))
    }

    private mutating func forwardAgain(dropStored: Bool) -> ExchangeAction {
        upstreamPlan?.validating = nil
        return .forwardAgain(dropStored: dropStored)
    }

    /// The turn after `.forwardAgain`: go, unless the client left meanwhile.
    mutating func nextTurn() -> ExchangeAction {
        guard state == .forwarding else { return ignored(.nextTurn) }
        return .forward(.init())
    }

    // MARK: the end

    /// The whole answer is queued (a stored body decoded to its end, the
    /// end of a streamed one), or the exchange is cut off.
    mutating func finish() -> ExchangeAction {
        state = .done
        return .ended
    }

    /// The client connection went away. Looking for another node's answer
    /// in the shared stage, this exchange leads the key here: it lets go
    /// (a claim still being asked across the fleet is the lock's to let go).
    mutating func clientGone() -> ExchangeAction {
        let leadsHere = state == .lookingUp && waited == .fleetLeader
        state = .done
        return leadsHere ? .releaseClaim : .ended
    }
}
