import CacheSemantics
import CacheStorage
import EventLoop
import Telemetry

/// The driver's half of `ExchangeMachine`: each action performed, and
/// what came of it fed back as the machine's next event, until the
/// machine waits for something that comes later (a fetch, the fleet, the
/// leader, the client). Nothing here decides.
extension Exchange {
    /// Performs `first` and what follows from it. True when the machine
    /// ends with `.takeHead`: the upstream's head is the answer (`takes`).
    @discardableResult
    func perform(_ first: consuming ExchangeAction) -> Bool {
        var action = first
        while true {
            // Consumed: the payload moves out, not copied and destroyed.
            switch consume action {
            case .none, .ended, .passInterim:
                return false
            case .ignored(let late):
                // A late event (the client left, the answer was decided): traced, nothing done.
                upstream.logger.trace("\(key): \(late.event) ignored in state \(late.state)")
                return false
            case .takeHead:
                return true
            case .lookUp(.local):
                if let found = cache.store.lookupWithoutBlocking(key) {
                    action = lookedUp(found)
                } else {
                    // The disk would be waited for: read on an I/O thread; the loop serves others meanwhile.
                    WorkerStats.bump(cache.counters.offloadedLookups)
                    cache.store.lookupOffLoop(key, on: loop) { [self] found in perform(lookedUp(found)) }
                    return false
                }
            case .lookUp(.forgetting):
                cache.store.remove(key)
                action = lookedUp(Variants())
            case .lookUp(.shared):
                holdWhileWaiting()
                guard cache.store.lookupShared(key, after: variants, toDisk: toDisk, found: { [self] all in
                          perform(lookedUp(all, from: .shared))
                      }) else {
                    action = lookedUp(variants, from: .sharedUnavailable)
                    continue
                }
                return false
            case .serve(let offered):
                action = serve(offered)
            case .serveInstead(let offered):
                // The fetch goes on alone and stores what comes; a wait for the leader stops.
                wait?.stop()
                wait = nil
                if let fetch {
                    self.fetch = nil
                    fetch.continueWithoutClient(validating: machine.forwarding.validating)
                }
                action = serve(offered)
            case .answer(let made):
                sendMadeHere(made.status, made.message, cacheStatus: made.cacheStatus)
                return false
            case .collapse(let count, let acrossFleet):
                bump(count)
                action = machine.joined(join(acrossFleet: acrossFleet))
            case .awaitLock(let count):
                holdWhileWaiting()
                bump(count)
                if machine.mayStandInAtOnce(now: cache.clock.now()) { armStaleTimeout() }
                return false
            case .follow(let fetch, let count):
                holdWhileWaiting()
                bump(count)
                follow(fetch, cacheStatus: machine.followedCacheStatus)
                return false
            case .forward(let how):
                holdWhileWaiting()
                bump(how.count)
                // (Asked once: only a request with a stored response that may stand in need look at the pool.)
                if machine.mayStandInAtOnce(now: cache.clock.now()) {
                    if upstream.configuration.pool(named: route?.upstream).allDown(now: loop.now()) {
                        // Nobody to ask: the stored response is served at once.
                        cache.lock.release(key, here: how.leading, acrossFleet: how.claimedInFleet)
                        action = machine.standInAtOnce(.down, now: cache.clock.now())
                        continue
                    }
                    armStaleTimeout()
                }
                forward(leading: how.leading, claimedInFleet: how.claimedInFleet)
                return false
            case .forwardAgain(let dropStored):
                if dropStored { cache.store.remove(key) }
                fetch?.cancel()
                fetch = nil
                loop.schedule(after: 0) { [weak self] in
                    guard let self else { return }
                    self.perform(self.machine.nextTurn())
                }
                return false
            case .refresh(let validated):
                let refreshed = machine.notModified.flatMap {
                    cache.applyNotModified($0, validated: validated, among: variants,
                                           through: fetch?.missHandler ?? cache.store.missHandler(toDisk: toDisk))
                }
                action = machine.refreshed(refreshed, now: cache.clock.now())
            case .revalidate(let entry):
                upstream.revalidateInBackground(entry, among: variants, request: request, body: post?.body, peer: sink.peer)
                return false
            case .releaseClaim:
                cache.lock.release(key)
                return false
            }
        }
    }

    /// Offers a stored response; a whole one queued completes the exchange.
    @inline(__always)  // into `perform`: the offer's fields are not copied
    private func serve(_ offered: StoredServing) -> ExchangeAction {
        if offered.releasesClaim { cache.lock.release(key) }
        return served(offered, serveStored(offered.entry, age: offered.age, now: offered.now, cacheStatus: offered.cacheStatus,
                                           count: offered.count))
    }

    /// What became of a stored response offered (now, or once it waited
    /// for the disk: `.waiting` says it comes later, the machine offering
    /// it meanwhile).
    @inline(__always)
    func served(_ offered: StoredServing, _ result: StoredServe) -> ExchangeAction {
        if result == .served || result == .decoding {
            bump(offered.count)
            // A response that varies is marked served even while it is its
            // URL's only variant: a burst of new values must find it so.
            if variants.count > 1 || offered.entry.varies { cache.store.noteServed(offered.entry) }
        }
        // (`.waiting`: the machine goes on offering; nothing else happens.)
        let next = machine.served(result)
        if result == .served { complete() }
        if result == .decoding { pullBody() }
        return next
    }

    /// Joins the key's cache lock: leads its fetch (claiming it across the
    /// fleet too, `acrossFleet`), follows or waits for the one already
    /// under way, or fetches alone.
    private func join(acrossFleet: Bool) -> ExchangeMachine.Joined {
        switch cache.lock.join(key, for: request, asGet: fetchesHeadAsGet, acrossFleet: acrossFleet, loop: loop,
                               timeoutMilliseconds: UInt64(upstream.configuration.upstream.responseTimeoutMilliseconds),
                               ended: { [weak self] ended in
                                   guard let self else { return }
                                   self.wait = nil
                                   self.perform(self.machine.leaderDone(ended))
                               }) {
        case .leading: return .leading
        case .claiming(let wait):
            self.wait = wait
            return .claiming
        case .fetchAlone: return .fetchAlone
        case .following(let fetch): return .following(fetch)
        case .waiting(let wait):
            self.wait = wait
            return .waiting
        }
    }

    /// Answers with the leader's response, piece by piece as it arrives.
    private func follow(_ fetch: SharedFetch, cacheStatus: String) {
        answer.sharedHead(fetch.head, for: request, cacheStatus: cacheStatus)
        // A HEAD has its answer: the body is not waited for.
        if request.method == "HEAD" { return complete() }
        stream(from: SharedFetchReader(fetch, loop: loop, ready: { [weak self] in self?.pullBody() }))
    }

    func bump(_ count: ExchangeCount) {
        switch count {
        case .none: break
        case .hit: WorkerStats.bump(cache.counters.hits)
        case .staleHit: WorkerStats.bump(cache.counters.staleHits)
        case .miss: WorkerStats.bump(cache.counters.misses)
        case .staleForward: WorkerStats.bump(cache.counters.staleForwards)
        case .collapsed: WorkerStats.bump(cache.counters.collapsed)
        }
    }
}

extension Exchange {
    /// stale_timeout: a request that a stored response may stand in for
    /// (the caller asked) waits at most this long for the upstream's head
    /// (or the leader it follows), from when it first waits.
    private func armStaleTimeout() {
        guard staleTimer == .none else { return }
        let ms = route?.staleTimeoutMilliseconds ?? upstream.configuration.staleTimeoutMilliseconds
        guard ms > 0, ms < upstream.configuration.upstream.responseTimeoutMilliseconds else { return }
        staleTimer = loop.schedule(after: UInt64(ms)) { [weak self] in
            guard let self else { return }
            self.staleTimer = .none
            self.perform(self.machine.standInAtOnce(.slow, now: self.cache.clock.now()))
        }
    }

    /// The exchange waits (the fleet, the upstream, a leader): the stored
    /// responses it keeps hold their own blocks from now on, not the
    /// worker's period token (see `CachedResponse.owned`).
    func holdWhileWaiting() { variants = variants.owned() }
}
