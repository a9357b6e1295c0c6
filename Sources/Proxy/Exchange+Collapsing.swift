import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

/// Request collapsing, the waiting side: leading the key's fetch, waiting
/// for the request already fetching it, following its response as it
/// streams (the leader's fetch shares it: `UpstreamFetch`; this request
/// reads it: `SharedFetchReader`).
extension Exchange {
    enum Collapse {
        /// Another request fetches the key: wait for it.
        case waiting
        /// This request's fetch is the one others wait for.
        case leading
        /// Fetch without collapsing (not a GET, or another variant).
        case fetchAlone
    }

    /// A cacheable fetch is about to go upstream: lead it, or wait for the
    /// request already fetching this URL.
    func collapse() -> Collapse {
        guard request.method == "GET" else { return .fetchAlone }
        let loop = worker.loop
        switch worker.collapser.lead(key, loop: loop, wake: { [weak self] (fetch: SharedFetch?) in self?.leaderDone(fetch) }) {
        case .leader:
            return .leading
        case .following(let fetch):
            guard fetch.head.suits(request) else { return .fetchAlone }
            WorkerStats.bump(worker.counters.collapsed)
            follow(fetch)
            return .waiting
        case .waiting:
            break
        }
        machine.waitForLeader()
        WorkerStats.bump(worker.counters.collapsed)
        // Bounded: a leader that takes too long stops being waited for.
        waitTimer = loop.schedule(after: UInt64(worker.configuration.upstream.responseTimeoutMilliseconds)) { [weak self] in
            self?.leaderDone()
        }
        return .waiting
    }

    /// The leader finished (or the wait timed out): serve what it stored
    /// when it suits this request, else fetch on our own.
    func leaderDone(_ fetch: SharedFetch? = nil) {
        // The leader's response is streaming in: take it as it arrives,
        // unless it is another variant than this request's.
        let suitable = fetch?.head.suits(request) ?? false
        guard machine.leaderDone(streaming: suitable) != .ignore else { return }
        worker.loop.cancel(waitTimer)
        if let fetch {
            if suitable { follow(fetch) } else { forward() }
            return
        }
        let requestCC = CacheControl(request.combinedHeader("cache-control"))
        let facts = RequestFacts(cacheControl: requestCC, pragmaNoCache: false) { [request] in request.combinedHeader($0) }
        let now = EventLoop.wallSeconds()
        variants = worker.store.lookup(key, local: worker.localHits)
        if case .fresh(let index, let age, _) = Lookup.decide(facts, variants, now: now, shared: shared),
           serveStored(variants[index], age: age, now: now,
                       cacheStatus: Array("Cache-Status: \(forwarding.cacheStatus(stored: false)); collapsed\r\n".utf8)) {
            return
        }
        forward()
    }

    /// A collapsed request: answer with the leader's response, piece by
    /// piece as it arrives (`SharedFetchReader` hands them over as a fetch would).
    func follow(_ fetch: SharedFetch) {
        machine.follow()
        let head = fetch.head, now = EventLoop.wallSeconds()
        let cacheStatus = forwarding.cacheStatus(stored: false) + "; collapsed"
        noteAnswer(head.status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        connection.sendHead(status: head.status, reason: head.reason, fields: head.headers, length: head.contentLength,
                            noBody: UpstreamResponse.hasNoBody(status: head.status, answering: request.method),
                            age: Freshness.correctedInitialAge(head.timing) + max(0, Int(now - head.timing.responseTime)),
                            cacheStatus: cacheStatus, now: now, for: request, connection: connectionField)
        let reader = SharedFetchReader(fetch, for: self, loop: worker.loop)
        self.reader = reader
        reader.pull()
    }
}
