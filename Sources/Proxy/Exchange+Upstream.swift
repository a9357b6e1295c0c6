import CacheSemantics
import CacheStorage
import EventLoop

/// What the fetch tells the exchange: the upstream's head (answered with,
/// or by a stand-in for a failure, or by a 304's refresh), body and end.
extension Exchange: FetchClient {
    /// The upstream's head: true when it is the answer; false when this
    /// exchange answered otherwise (a stand-in for a 5xx, a 304's
    /// refresh) and the rest of the fetch is not wanted.
    func takes(_ response: UpstreamResponse) -> Bool {
        guard machine.takesUpstreamHead else { return false }
        let status = response.status
        if status >= 500, answerUpstreamFailure(.status(status), detail: "upstream answered \(status)") { return false }
        if let validating = forwarding.validating, status == 304 {
            refreshFromNotModified(response, validated: validating)
            return false
        }
        if let completing = forwarding.completing, let piece = completing.piece, status == 416 || (status == 206
            && !PartialContent.completes(piece, etag: completing.etag, contentRange: response.fields["content-range"],
                                         restETag: response.fields["etag"])) {
            // Not the rest of the stored piece's representation: the whole,
            // asked plainly; a piece the upstream no longer has goes.
            if status == 416 || response.fields["etag"] != completing.etag { worker.store.remove(key) }
            forwarding.completing = nil
            forwardWithoutValidators()
            return false
        }
        return true
    }

    /// Writes the upstream's head for the client (`stored`: the response
    /// is going into the store).
    func streams(_ response: UpstreamResponse, stored: Bool) {
        machine.responseHeadSent()
        let fwdStatus = forwarding.validating != nil || forwarding.completing != nil ? response.status : nil
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        let cacheStatus = forwarding.cacheStatus(stored: stored, fwdStatus: fwdStatus)
        if response.status == 206, let piece = forwarding.completing {
            // The stored piece, then the rest as it comes: the whole, for a client that asked for it.
            answer.upstreamHead(response.completed(length: piece.piece?.length ?? 0), for: request, age: age, cacheStatus: cacheStatus)
            if request.method != "HEAD" { connection.sendBody(copying: piece.body) }
            return
        }
        answer.upstreamHead(response, for: request, age: age, cacheStatus: cacheStatus)
    }

    /// A 304 answered our conditional request: serve the variant it refreshed.
    func refreshFromNotModified(_ response: UpstreamResponse, validated: CachedResponse) {
        guard let (refreshed, stored) = worker.applyNotModified(response, validated: validated, among: variants,
                                                                fetchedSince: fetch?.fetchToken ?? 0, sharedMark: fetch?.sharedMark,
                                                                toDisk: toDisk) else {
            return forwardWithoutValidators()  // the 304 names nothing we hold
        }
        let now = EventLoop.wallSeconds(), status = forwarding.cacheStatus(stored: stored, fwdStatus: 304)
        switch serveStored(refreshed, age: refreshed.currentAge(now: now), now: now, cacheStatus: CacheStatusLine(status)) {
        case .served: break
        case .bodyGone:
            worker.store.remove(key)
            forwardWithoutValidators()  // its body file is gone
        case .undecodable:
            forwardWithoutValidators()
        }
    }

    /// Asks again without validators (on a later loop turn: libcurl must
    /// not be re-entered from its callback), unless the client left meanwhile.
    func forwardWithoutValidators() {
        forwarding.validating = nil
        fetch?.cancel()
        fetch = nil
        worker.loop.schedule(after: 0) { [weak self] in
            guard let self, !self.machine.clientDone else { return }
            self.forward()
        }
    }

    var isCongested: Bool { connection.isBodyCongested }

    func deliver(_ chunk: Bytes) { connection.sendBody(chunk) }
    func deliver(copying bytes: UnsafeRawBufferPointer) { connection.sendBody(copying: bytes) }
    /// `whole`: as long as it said (else the connection is cut, as when the
    /// response broke off).
    func responseEnded(whole: Bool) { complete(closing: connection.endBody(whole: whole)) }
    func responseCut() { complete(closing: true) }
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String) { _ = answerUpstreamFailure(kind, detail: detail) }

    /// The upstream failed before anything was sent: a stand-in or a
    /// 502/504 (`StandIns`). Returns false when the upstream's own response
    /// should go through.
    func answerUpstreamFailure(_ kind: UpstreamFailure.Kind, detail: String) -> Bool {
        guard !machine.responseStarted else { return false }
        while true {
            let now = EventLoop.wallSeconds()
            switch forwarding.standIn(kind, detail: detail, now: now, shared: shared) {
            case .serve(let entry, let cacheStatusDetail):
                let age = entry.currentAge(now: now)
                // Its body file may be gone: then the next answer down.
                if serveHit(entry, age: age, ttl: entry.lifetime.minusSaturating(age), stale: true, now: now,
                            detail: cacheStatusDetail) == .served { return true }
            case .gatewayError(let status, let message):
                sendMadeHere(status, message,
                             cacheStatus: isCacheLookup ? forwarding.cacheStatus(stored: false, detail: "upstream-error") : nil)
                return true
            case .passThrough:
                return false
            }
        }
    }
}
