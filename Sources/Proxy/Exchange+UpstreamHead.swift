import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// The upstream's head: framing, storability, 304 refreshes, HEAD updates,
/// invalidation, and the head written to the client.
extension Exchange {
    // MARK: UpstreamTransferDelegate

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: HeaderFields) {
        guard machine.takesUpstreamHead else { return }
        let responseTime = EventLoop.wallSeconds()
        let response = UpstreamResponse(status: status, reason: reason, headers: headers, requestTime: requestTime,
                                        responseTime: responseTime, stripTagHeaders: worker.configuration.stripTagHeaders)
        if case .invalid(let why) = response.framing {
            // RFC 9112 section 6.3: discard the response, close the upstream
            // connection, 502 (the body's end cannot be known).
            transfer?.cancel()
            transfer = nil
            WorkerStats.bump(worker.counters.upstreamErrors)
            worker.logger.warning("invalid upstream response for \(request.method) \(key): \(why)")
            _ = answerUpstreamFailure(.invalidResponse, detail: "invalid upstream response: \(why)")
            return
        }
        if status >= 500, answerUpstreamFailure(.status(status), detail: "upstream answered \(status)") { return }
        if let validating, status == 304 {
            refreshFromNotModified(response, validated: validating)
            return
        }
        machine.responseHeadSent()
        let noBody = request.method == "HEAD" || status == 204 || status == 304 || status < 200
        expectedLength = response.length
        framing = ClientFraming.choose(noBody: noBody, length: expectedLength, minorVersion: request.minorVersion)
        store = worker.applyCacheEffect(of: response, to: request, key: key, isCacheLookup: isCacheLookup, variants: variants,
                                        fetchedSince: fetchToken, toDisk: toDisk)
        if isCacheLookup && machine.leadership != .none && store == nil {
            // Not storable: waiters need not wait for it, they fetch on their own.
            releaseLeadership()
        }
        let cacheStatus = isCacheLookup
            ? CacheStatus.forward(forwardReason, stored: store != nil, fwdStatus: validating != nil ? status : nil)
            : CacheStatus.forward(.method, stored: false)
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        let passed = response.fields
        if isCacheLookup, status == 200, StoredAnswer.clientIsNotModified(
            request, etag: passed["etag"], lastModified: passed["last-modified"], dateValue: response.timing.dateValue) {
            // The body still streams into the store; the client gets a 304.
            noteAnswer(304, cache: Array(cacheStatus.utf8), bodyBytes: 0)
            offerToShare()
            framing = .none
            let tail = ClientHead.Tail(age: age ?? 0, dateLine: worker.dateHeader.current(now: responseTime),
                                       cacheStatus: Array("Cache-Status: \(cacheStatus)\r\n".utf8), connection: connectionField)
            connection.enqueue(ClientHead.notModified(fields: passed, tail: tail))
            connection.flush()
            return
        }
        noteAnswer(status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        let head = ClientHead.forwarded(status: status, reason: reason, fields: passed, framing: framing, length: expectedLength,
                                        noBody: noBody, age: age, cacheStatus: cacheStatus,
                                        dateLine: worker.dateHeader.current(now: responseTime), connection: connectionField,
                                        isHidden: builder.isHidden)
        offerToShare()
        // Nothing more will come (204, Content-Length: 0): store before the client has it all.
        if store != nil && (noBody || expectedLength == 0) {
            commitStore()
            broadcast?.finish(.complete)
        }
        connection.enqueue(head)
        connection.flushSoon()
    }

    /// A 304 answered our conditional request: update the variant it selects
    /// and serve that (section 4.3.4).
    func refreshFromNotModified(_ response: UpstreamResponse, validated: CachedResponse) {
        guard let (refreshed, storable) = response.refreshing(validated, among: variants, builder: builder) else {
            forwardWithoutValidators()  // the 304 names nothing we hold
            return
        }
        if storable { worker.storeRefreshed(refreshed, fetchedSince: fetchToken, toDisk: toDisk) }
        WorkerStats.bump(worker.counters.revalidations)
        let now = EventLoop.wallSeconds()
        let status = CacheStatus.forward(forwardReason, stored: storable, fwdStatus: 304)
        if !serveStored(refreshed, age: refreshed.currentAge(now: now), now: now,
                        cacheStatus: Array("Cache-Status: \(status)\r\n".utf8)) {
            worker.store.remove(key)
            forwardWithoutValidators()  // its body file is gone
        }
    }

    /// Asks again without validators.
    func forwardWithoutValidators() {
        validating = nil
        transfer?.cancel()
        transfer = nil
        forwardOnNextTurn()
    }

    /// Goes upstream again on a later loop turn (libcurl must not be
    /// re-entered from its callback), unless the client left meanwhile.
    func forwardOnNextTurn() {
        worker.loop.schedule(after: 0) { [weak self] in
            guard let self, !self.machine.clientDone else { return }
            self.forward()
        }
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // A slow client pauses the upstream, unless collapsed requests are
        // streaming the same response (they hold the pieces anyway); so does
        // a disk slower than the upstream.
        // (The questions may not read `machine`: it is being changed.)
        let broadcast = self.broadcast
        switch machine.upstreamBody(clientCongested: { framing != .none && connection.isCongested && !(broadcast?.hasFollowers ?? false) },
                                    storeBacklogged: storeIsBacklogged) {
        case .pause:
            return false
        case .discard:
            return true
        case .storeOnly:
            receivedBody += bytes.count
            broadcast?.append(Bytes(bytes))
            storeBody(bytes)
            if let expectedLength, receivedBody == expectedLength { broadcast?.finish(.complete) }
            if store == nil && !(broadcast?.hasFollowers ?? false) { abandonOrphan() }
            return true
        case .deliver:
            break
        }
        if let broadcast {
            // One copy, queued to this client and every follower.
            let chunk = Bytes(bytes)
            broadcast.append(chunk)
            connection.enqueueBody(chunk, framing: framing)
        } else {
            connection.enqueueBody(copying: bytes, framing: framing)
        }
        receivedBody += bytes.count
        storeBody(bytes)
        if let expectedLength, receivedBody == expectedLength {
            if store != nil { commitStore() }
            broadcast?.finish(.complete)
        }
        if framing != .none { connection.flushSoon() }
        return true
    }
}
