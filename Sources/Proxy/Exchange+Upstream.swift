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
        if let validating, status == 304 {
            refreshFromNotModified(response, validated: validating)
            return false
        }
        return true
    }

    /// Writes the upstream's head for the client (`stored`: the response
    /// is going into the store).
    func streams(_ response: UpstreamResponse, stored: Bool) {
        machine.responseHeadSent()
        let status = response.status, fields = response.fields
        let cacheStatus = isCacheLookup
            ? CacheStatus.forward(forwardReason, stored: stored, fwdStatus: validating != nil ? status : nil)
            : CacheStatus.forward(.method, stored: false)
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        if isCacheLookup, status == 200, StoredAnswer.clientIsNotModified(
            request, etag: fields["etag"], lastModified: fields["last-modified"], dateValue: response.timing.dateValue) {
            // The body still streams into the store; the client gets a 304.
            noteAnswer(304, cache: Array(cacheStatus.utf8), bodyBytes: 0)
            let tail = ClientHead.Tail(age: age ?? 0, dateLine: worker.dateHeader.current(now: response.timing.responseTime),
                                       cacheStatus: Array("Cache-Status: \(cacheStatus)\r\n".utf8), connection: connectionField)
            connection.enqueue(ClientHead.notModified(fields: fields, tail: tail))
            connection.flush()
            return
        }
        sendPassedOnHead(status: status, reason: response.reason, fields: fields, length: response.length,
                         noBody: response.hasNoBody(answering: request.method), age: age, cacheStatus: cacheStatus,
                         now: response.timing.responseTime)
        connection.flushSoon()
    }

    /// Queues a head passed on (the upstream's, or a shared fetch's) and
    /// chooses the body's framing for this client.
    func sendPassedOnHead(status: Int, reason: String?, fields: HeaderFields, length: Int?, noBody: Bool, age: Int?,
                          cacheStatus: String, now: Int64) {
        framing = ClientFraming.choose(noBody: noBody, length: length, minorVersion: request.minorVersion)
        noteAnswer(status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        connection.enqueue(ClientHead.forwarded(status: status, reason: reason, fields: fields, framing: framing, length: length,
                                                noBody: noBody, age: age, cacheStatus: cacheStatus,
                                                dateLine: worker.dateHeader.current(now: now), connection: connectionField,
                                                isHidden: builder.isHidden))
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
        let status = CacheStatus.forward(forwardReason, stored: storable, fwdStatus: 304)
        if !serveStored(refreshed, age: refreshed.currentAge(now: now), now: now,
                        cacheStatus: Array("Cache-Status: \(status)\r\n".utf8)) {
            worker.store.remove(key)
            forwardWithoutValidators()  // its body file is gone
        }
    }

    /// Asks again without validators (on a later loop turn: libcurl must
    /// not be re-entered from its callback), unless the client left meanwhile.
    func forwardWithoutValidators() {
        validating = nil
        fetch?.cancel()
        fetch = nil
        worker.loop.schedule(after: 0) { [weak self] in
            guard let self, !self.machine.clientDone else { return }
            self.forward()
        }
    }

    // MARK: the body

    /// Whether the client is behind: the fetch pauses (unless followers stream it).
    var isCongested: Bool { framing != .none && connection.isCongested }

    func deliver(_ chunk: Bytes) {
        connection.enqueueBody(chunk, framing: framing)
        sent(chunk.count)
    }

    func deliver(copying bytes: UnsafeRawBufferPointer) {
        connection.enqueueBody(copying: bytes, framing: framing)
        sent(bytes.count)
    }

    private func sent(_ count: Int) {
        bodyBytesSent += count
        if framing != .none { connection.flushSoon() }
    }

    // MARK: the end

    /// The response ended; `whole`: as long as it said.
    func responseEnded(whole: Bool) {
        switch BodyEnd.decide(framing: framing, whole: whole) {
        case .cut:
            endByClosing()  // the upstream promised more (or less) than it sent
        case .end(let terminator, let close):
            if terminator { connection.enqueueLastChunk() }
            // A close-delimited body ends by closing.
            if close { endByClosing() } else { complete() }
        }
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
            switch standIns.answer(kind, detail: detail, validating: validating?.cacheControl, now: now, shared: shared) {
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
                     cacheStatus: isCacheLookup ? CacheStatus.forward(forwardReason, stored: false, detail: "upstream-error") : nil)
    }
}
