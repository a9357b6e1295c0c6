import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// What the fetch tells the exchange, and the answer the client gets: the
/// upstream's head (or a stand-in for a failure, or a 304's refresh), the
/// body in the client's framing, and its end.
extension Exchange: FetchClient {
    // MARK: the head

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
        return true
    }

    /// Writes the upstream's head for the client (`stored`: the response
    /// is going into the store).
    func streams(_ response: UpstreamResponse, stored: Bool) {
        machine.responseHeadSent()
        let status = response.status, fields = response.fields, now = response.timing.responseTime
        let cacheStatus = forwarding.cacheStatus(stored: stored, fwdStatus: forwarding.validating != nil ? status : nil)
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        if isCacheLookup, status == 200, StoredAnswer.clientIsNotModified(
            request, etag: fields["etag"], lastModified: fields["last-modified"], dateValue: response.timing.dateValue) {
            // The body still streams into the store; the client gets a 304.
            noteAnswer(304, cache: Array(cacheStatus.utf8), bodyBytes: 0)
            connection.sendNotModified(fields: fields, age: age ?? 0, cacheStatus: cacheStatus, now: now, connection: connectionField)
            connection.flush()
            return
        }
        noteAnswer(status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        connection.sendHead(status: status, reason: response.reason, fields: fields, length: response.length,
                            noBody: response.hasNoBody(answering: request.method), age: age, cacheStatus: cacheStatus, now: now,
                            for: request, connection: connectionField)
        connection.flushSoon()
    }

    /// A 304 answered our conditional request: update the variant it selects
    /// and serve that (section 4.3.4).
    func refreshFromNotModified(_ response: UpstreamResponse, validated: CachedResponse) {
        guard let (refreshed, storable) = response.refreshing(validated, among: variants, builder: builder) else {
            forwardWithoutValidators()  // the 304 names nothing we hold
            return
        }
        if storable { worker.storeRefreshed(refreshed, fetchedSince: fetch?.fetchToken ?? 0, toDisk: toDisk) }
        WorkerStats.bump(worker.counters.revalidations)
        let now = EventLoop.wallSeconds()
        let status = forwarding.cacheStatus(stored: storable, fwdStatus: 304)
        if !serveStored(refreshed, age: refreshed.currentAge(now: now), now: now,
                        cacheStatus: Array("Cache-Status: \(status)\r\n".utf8)) {
            worker.store.remove(key)
            forwardWithoutValidators()  // its body file is gone
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

    // MARK: the body and the end

    var isCongested: Bool { connection.isBodyCongested }

    func deliver(_ chunk: Bytes) { connection.sendBody(chunk) }

    func deliver(copying bytes: UnsafeRawBufferPointer) { connection.sendBody(copying: bytes) }

    /// The response ended; `whole`: as long as it said.
    func responseEnded(whole: Bool) {
        if connection.endBody(whole: whole) { endByClosing() } else { complete() }
    }

    /// The response broke off after its head was sent: the client connection is cut.
    func responseCut() {
        endByClosing()
    }

    /// The upstream failed before any response.
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String) {
        _ = answerUpstreamFailure(kind, detail: detail)
    }

    /// The upstream failed before anything was sent: a stand-in or a
    /// 502/504 (`StandIns`). Returns false when the upstream's own response
    /// should go through.
    func answerUpstreamFailure(_ kind: UpstreamFailure.Kind, detail: String) -> Bool {
        guard !machine.responseStarted else { return false }
        while true {
            let now = EventLoop.wallSeconds()
            switch forwarding.standIns.answer(kind, detail: detail, validating: forwarding.validating?.cacheControl, now: now,
                                              shared: shared) {
            case .serve(let entry):
                let age = entry.currentAge(now: now)
                if serveStored(entry, age: age, now: now, cacheStatus: CacheStatus.hit(ttl: entry.lifetime - age)) {
                    WorkerStats.bump(worker.counters.staleHits)
                    return true
                }
                // Its body file is gone: the next answer down.
            case .gatewayError(let status, let message):
                sendGatewayError(status, message)
                return true
            case .passThrough:
                return false
            }
        }
    }

    /// 502/504 generated here, when nothing was sent yet.
    func sendGatewayError(_ status: Int, _ message: String) {
        sendMadeHere(status, message,
                     cacheStatus: isCacheLookup ? forwarding.cacheStatus(stored: false, detail: "upstream-error") : nil)
    }
}
