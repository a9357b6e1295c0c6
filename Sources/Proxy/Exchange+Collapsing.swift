import CacheSemantics
import EventLoop

/// Request collapsing: lead the key's fetch, or wait for the request
/// already fetching it (`LeaderWait`) and then follow its response as it
/// streams (the leader's fetch shares it; `SharedFetchReader` reads it).
extension Exchange {
    /// A cacheable fetch is about to go upstream (`askedFleet`: the
    /// fleet's shared tier missed, so its claim is asked for first).
    func collapse(askedFleet: Bool = false) {
        switch LeaderWait.join(key, for: request, collapser: worker.collapser, loop: worker.loop,
                               timeoutMilliseconds: UInt64(worker.configuration.upstream.responseTimeoutMilliseconds),
                               ended: { [weak self] in self?.leaderDone($0) }) {
        case .leading:
            if !askedFleet || !leadAcrossFleet() { forward(leading: true) }
        case .fetchAlone:
            forward()
        case .following(let fetch):
            WorkerStats.bump(worker.counters.collapsed)
            follow(fetch)
        case .waiting(let wait):
            WorkerStats.bump(worker.counters.collapsed)
            self.wait = wait
            machine.waitForLeader()
        }
    }

    /// The wait is over: follow the leader's response, fetch alone when it
    /// is another variant, else serve what the leader stored if it suits.
    func leaderDone(_ ended: LeaderWait.Ended) {
        wait = nil
        guard machine.leaderDone(streaming: ended.follows) != .ignore else { return }
        switch ended {
        case .follow(let fetch):
            follow(fetch)
        case .fetchAlone:
            forward()
        case .lookUpAgain:
            let now = EventLoop.wallSeconds(), requestCC = requestDirectives
            variants = worker.store.lookup(key, local: worker.localHits)
            // The leader's piece answers only the ranges it holds.
            if StoredAnswer.hasPiece(variants) { variants = StoredAnswer.usable(variants, for: request) }
            if case .fresh(let index, let age, _) = Lookup.decide(RequestFacts(request, requestCC, honouringPragma: false), variants,
                                                                  now: now, shared: shared),
               serveStored(variants[index], age: age, now: now,
                           cacheStatus: CacheStatusLine("\(forwarding.cacheStatus(stored: false)); collapsed")) == .served {
                return
            }
            forward()
        }
    }

    /// Answers with the leader's response, piece by piece as it arrives.
    func follow(_ fetch: SharedFetch) {
        machine.follow()
        answer.sharedHead(fetch.head, for: request, cacheStatus: forwarding.cacheStatus(stored: false) + "; collapsed")
        let reader = SharedFetchReader(fetch, for: self, loop: worker.loop)
        self.reader = reader
        reader.pull()
    }
}
