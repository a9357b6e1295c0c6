import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

/// Finishing a fetch whose client left, and request collapsing: leading,
/// waiting for a leader, sharing and following a response as it streams.
extension Exchange {
    // MARK: finishing a store without its client

    /// Whether the fetch should go on after the client left: a storable
    /// response small enough (finish_store_limit) is completed and stored,
    /// so the work is not wasted and collapsed waiters still get it.
    var shouldFinishWithoutClient: Bool {
        guard transfer != nil else { return false }
        if broadcast?.hasFollowers ?? false { return true }  // collapsed requests are streaming it
        guard store != nil else { return false }
        let limit = worker.configuration.finishStoreLimitBytes
        return limit > 0 && max(expectedLength ?? 0, receivedBody) <= limit
    }

    /// The orphaned fetch is over (stored or not): waiters may go on.
    func abandonOrphan() {
        machine.finish()
        broadcast?.finish(.failed)  // no-op when it completed
        transfer?.cancel()
        transfer = nil
        releaseLeadership()
        worker.release(self)
    }

    // MARK: collapsing

    /// A cacheable fetch is about to go upstream: lead it, or wait for the
    /// request already fetching this URL. Returns true when waiting.
    func waitForLeader() -> Bool {
        guard request.method == "GET" else { return false }
        let loop = worker.loop
        switch worker.collapser.lead(key, loop: loop, wake: { [weak self] (fetch: SharedFetch?) in self?.leaderDone(fetch) }) {
        case .leader:
            machine.lead()
            return false
        case .following(let fetch):
            if fetch.head.suits(request) {
                WorkerStats.bump(worker.counters.collapsed)
                follow(fetch)
                return true
            }
            return false
        case .waiting:
            break
        }
        machine.waitForLeader()
        WorkerStats.bump(worker.counters.collapsed)
        // Bounded: a leader that takes too long stops being waited for.
        waitTimer = loop.schedule(after: UInt64(worker.configuration.upstream.responseTimeoutMilliseconds)) { [weak self] in
            self?.leaderDone()
        }
        return true
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
                       cacheStatus: Array("Cache-Status: \(CacheStatus.forward(forwardReason, stored: false)); collapsed\r\n".utf8)) {
            return
        }
        forward()
    }

    /// The leader, once its response is known storable: offer to share it
    /// with collapsed requests (published at once when some already wait).
    func offerToShare() {
        guard canShare, request.method == "GET" else { return }
        if worker.collapser.offer(key, loop: worker.loop, share: { [weak self] in self?.shareRequested() }) { share() }
    }

    /// Still leading, not yet shared, and the body so far is in memory.
    var canShare: Bool {
        guard machine.mayPublish, let pending = store else { return false }
        return !pending.isStreaming
    }

    /// A request now waits for this key (on this loop): share if still possible.
    func shareRequested() {
        if canShare { share() }
    }

    /// Publishes the response with the body received so far.
    func share() {
        guard let pending = store else { return }
        let head = SharedFetch.head(of: pending.response, varyNames: builder.variantFields(pending.response.fields, key: key),
                                    leader: request)
        let fetch = SharedFetch(head: head, limitBytes: 2 * max(worker.configuration.maxObjectBytes, 1 << 20))
        let soFar = pending.collected
        if soFar.count > 0 { fetch.append(Bytes(soFar)) }
        machine.publish(fetch)
        worker.collapser.publish(key, fetch)
    }

    /// A collapsed request: answer with the leader's response, piece by
    /// piece as it arrives.
    func follow(_ fetch: SharedFetch) {
        machine.follow(fetch)
        let head = fetch.head
        let noBody = head.status == 204 || head.status == 304 || head.status < 200
        framing = ClientFraming.choose(noBody: noBody, length: head.contentLength, minorVersion: request.minorVersion)
        let cacheStatus = CacheStatus.forward(forwardReason, stored: false) + "; collapsed"
        noteAnswer(head.status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        let now = EventLoop.wallSeconds()
        connection.enqueue(ClientHead.forwarded(
            status: head.status, reason: head.reason, fields: head.headers, framing: framing, length: head.contentLength,
            noBody: noBody, age: Freshness.correctedInitialAge(head.timing) + max(0, Int(now - head.timing.responseTime)),
            cacheStatus: cacheStatus, dateLine: worker.dateHeader.current(now: now), connection: connectionField,
            isHidden: builder.isHidden))
        fetch.follow(ObjectIdentifier(self), loop: worker.loop) { [weak self] in self?.pullShared() }
        pullShared()
    }

    /// Queues what arrived since the last pull; finishes with the fetch.
    func pullShared() {
        guard let (fetch, read) = machine.followed else { return }
        let (chunks, state) = fetch.read(ObjectIdentifier(self), from: read)
        for chunk in chunks {
            connection.enqueueBody(chunk, framing: framing)
            receivedBody += chunk.count
        }
        machine.read(chunks.count)
        switch state {
        case .streaming:
            connection.flush()
        case .complete where framing != .untilClose:
            fetch.unfollow(ObjectIdentifier(self))
            if framing == .chunked { connection.enqueueLastChunk() }
            complete()
        case .complete, .failed:
            // Close-delimited, or the fetch broke after the head was sent:
            // closing the connection ends (or cuts) the body.
            fetch.unfollow(ObjectIdentifier(self))
            endByClosing()
        }
    }

    func releaseLeadership() {
        if machine.endLeadership() { worker.collapser.release(key) }
    }
}
