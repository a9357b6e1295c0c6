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
        let passed = response.fields
        let timing = response.timing

        if status >= 500, answerUpstreamFailure(.status(status), detail: "upstream answered \(status)") { return }
        if let validating, status == 304 {
            refreshFromNotModified(response, validated: validating)
            return
        }
        machine.responseHeadSent()

        let noBody = request.method == "HEAD" || status == 204 || status == 304 || status < 200
        expectedLength = response.length
        if noBody { framing = .none }
        else if expectedLength != nil { framing = .length }
        else if request.minorVersion == 1 { framing = .chunked }
        else { framing = .untilClose }

        var cacheStatus: String
        var ageValue: Int?
        var answerNotModified = false
        if isCacheLookup {
            ageValue = Freshness.correctedInitialAge(timing)
            if request.method == "GET",
               case let (decision, directives) = builder.decision(request: request, status: status, headers: passed, timing: timing),
               decision == .store,
               (expectedLength ?? 0) <= StoreWriter.largestBody(in: worker.store, firstTierOnly: !toDisk) {
                let head = builder.storedHead(key: key, status: status, reason: reason, headers: passed, timing: timing,
                                              tags: builder.tags(headers, key: key), directives: directives,
                                              varyFrom: { [request] in request.combinedHeader($0) })
                let writer = StoreWriter(head, into: worker.store, fetchedSince: fetchToken, storedAt: EventLoop.wallSeconds(),
                                         firstTierOnly: !toDisk, expectedLength: expectedLength)
                // A body too large for every tier, or a purge that won already: not stored.
                if !writer.abandoned {
                    store = PendingStore(status: status, reason: reason, headers: passed, timing: timing, writer: writer)
                }
            } else if request.method == "GET" && status < 400 && status != 206 && status != 304 {
                // A current answer that cannot be stored: drop what it supersedes.
                worker.store.remove(key)
            } else if request.method == "HEAD" && status == 200 {
                updateFromHead(passed, timing: timing)
            }
            cacheStatus = CacheStatus.forward(forwardReason, stored: store != nil, fwdStatus: validating != nil ? status : nil)
            answerNotModified = status == 200 && clientIsNotModified(
                etag: passed["etag"],
                lastModified: passed["last-modified"], dateValue: timing.dateValue)
        } else {
            cacheStatus = CacheStatus.forward(.method, stored: false)
            if Invalidation.invalidates(method: request.method, status: status) { invalidateAfterUnsafe(headers) }
        }

        noteAnswer(answerNotModified ? 304 : status, cache: Array(cacheStatus.utf8), bodyBytes: answerNotModified ? 0 : nil)
        if isCacheLookup && leading && store == nil {
            // Not storable: waiters need not wait for it, they fetch on their own.
            releaseLeadership()
        }
        if answerNotModified {
            // The body still streams into the store; the client gets a 304.
            offerToShare()
            framing = .none
            var tail = Array("Cache-Status: \(cacheStatus)\r\n".utf8)
            tail.reserveCapacity(tail.count)
            sendNotModified(passed, age: ageValue ?? 0, now: responseTime, cacheStatus: tail)
            connection.flush()
            return
        }

        var head: [UInt8] = []
        head.reserveCapacity(512)
        ResponseSerializer.appendStatusLine(status, reason: reason, to: &head)
        for field in passed {
            if field.name.isField("age") && ageValue != nil { continue }
            if builder.isHidden(field.name) { continue }
            // One Content-Length, the one the body is framed by (below).
            if field.name.isField("content-length") { continue }
            ResponseSerializer.appendField(field.name, field.value, to: &head)
        }
        // (None on a 204: RFC 9110 section 8.6.)
        if let expectedLength, framing == .length || noBody && status != 204 {
            ResponseSerializer.appendContentLength(expectedLength, to: &head)
        }
        if let ageValue { ResponseSerializer.appendField("age", String(ageValue), to: &head) }
        ResponseSerializer.appendField("cache-status", cacheStatus, to: &head)
        // RFC 9110 section 6.6.1: a forwarded response without Date gets one.
        if !passed.contains(where: { $0.name.isField("date") }) { head.append(contentsOf: worker.dateHeader.current(now: responseTime)) }
        if framing == .chunked { head.append(contentsOf: "Transfer-Encoding: chunked\r\n".utf8) }
        if framing == .untilClose { head.append(contentsOf: "Connection: close\r\n".utf8) }
        else { appendConnectionField(to: &head) }
        head.append(contentsOf: [0x0D, 0x0A])
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
        if storable, worker.store.insert(refreshed, firstTierOnly: !toDisk, fetchedSince: fetchToken) {
            WorkerStats.bump(worker.counters.stored)
        }
        WorkerStats.bump(worker.counters.revalidations)
        let now = EventLoop.wallSeconds()
        let status = CacheStatus.forward(forwardReason, stored: storable, fwdStatus: 304)
        if !serveStored(refreshed, age: refreshed.currentAge(now: now), now: now,
                        cacheStatus: Array("Cache-Status: \(status)\r\n".utf8)) {
            worker.store.remove(key)
            forwardWithoutValidators()  // its body file is gone
        }
    }

    /// Asks again without validators, on a later loop turn (libcurl must
    /// not be re-entered from its callback).
    func forwardWithoutValidators() {
        validating = nil
        transfer?.cancel()
        transfer = nil
        worker.loop.schedule(after: 0) { [weak self] in
            guard let self, !self.machine.clientDone else { return }
            self.forward()
        }
    }

    /// RFC 9111 section 4.3.5: a 200 to HEAD updates the stored GET response
    /// it describes (selected by validator); a changed length means the
    /// stored one is outdated, so it goes.
    func updateFromHead(_ headers: HeaderFields, timing: ResponseTiming) {
        guard !variants.isEmpty else { return }
        let etag = headers["etag"]
        let lastModified = headers["last-modified"]
        guard let index = Validation.selectValidated(etag: etag, lastModified: lastModified,
                                                     candidates: variants.map { (etag: $0.etag, lastModified: $0.lastModified) })
        else { return }
        let entry = variants[index]
        if let length = headers["content-length"].flatMap({ Int($0) }), length != entry.bodyLength {
            worker.store.remove(key)
            return
        }
        worker.store.insert(builder.refresh(entry, with: headers, timing: timing), firstTierOnly: !toDisk, fetchedSince: fetchToken)
    }

    /// RFC 9111 section 4.4: a successful unsafe request invalidates the
    /// target and the same-origin Location and Content-Location.
    func invalidateAfterUnsafe(_ headers: HeaderFields) {
        worker.store.remove(key)
        let upstream = worker.configuration.upstreamOrigin
        for name in ["location", "content-location"] {
            guard let reference = headers[name],
                  let target = Invalidation.key(for: reference, requestKey: request.pathAndQuery, upstreamAuthority: upstream.authority,
                                                upstreamPathPrefix: upstream.pathPrefix, clientAuthority: request.header("host"))
            else { continue }
            worker.store.remove(worker.configuration.routes.cacheKey(target))
        }
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // A slow client pauses the upstream, unless collapsed requests are
        // streaming the same response (they hold the pieces anyway); so does
        // a disk slower than the upstream.
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
            enqueueBody(chunk)
        } else {
            switch framing {
            case .none: break
            case .chunked:
                connection.enqueue(ResponseSerializer.chunkHeader(bytes.count))
                connection.enqueue(copying: bytes)
                connection.enqueue([0x0D, 0x0A])
            case .length, .untilClose:
                connection.enqueue(copying: bytes)
            }
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

    /// Queues a body piece in this request's framing.
    func enqueueBody(_ chunk: Bytes) {
        switch framing {
        case .none: break
        case .chunked:
            connection.enqueue(ResponseSerializer.chunkHeader(chunk.count))
            connection.enqueue(chunk)
            connection.enqueue([0x0D, 0x0A])
        case .length, .untilClose:
            connection.enqueue(chunk)
        }
    }
}
