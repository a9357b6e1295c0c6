import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

/// The upstream's body (to the client, to followers, into the store) and
/// the end of the transfer: completion, failure, stale-if-error, 502/504.
extension Exchange {
    /// Keeps a body piece for storing (the writer decides where it goes).
    func storeBody(_ bytes: UnsafeRawBufferPointer) {
        guard store != nil else { return }
        if !store!.writer.append(bytes) { store = nil }
    }

    /// A disk slower than the upstream: the transfer pauses until the
    /// store's writer has caught up (as a slow client pauses it), rather
    /// than the queue growing or the object being dropped.
    func waitsForStore() -> Bool {
        guard let store, store.writer.isStreaming, !finished || orphaned else { return false }
        let loop = worker.loop
        guard store.writer.pauseIfBacklogged({ [weak self] in loop.execute { self?.outputDrained() } }) else { return false }
        upstreamPaused = true
        return true
    }

    /// Stores the completed response. Called as soon as the body is known to
    /// be complete, before its last bytes go to the client, so a client that
    /// asks again at once (on another connection) finds it stored.
    func commitStore() {
        guard var pending = store else { return }
        store = nil
        if pending.writer.commit() { WorkerStats.bump(worker.counters.stored) }
    }

    /// Gives up storing this response (too large, incomplete, failed).
    func dropStore() {
        guard store != nil else { return }
        store!.writer.abort()
        store = nil
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        if orphaned {
            transfer = nil
            if error == nil, expectedLength == nil || receivedBody == expectedLength {
                commitStore()
                broadcast?.finish(.complete)
            } else {
                dropStore()
            }
            abandonOrphan()
            return
        }
        guard !finished else { return }
        transfer = nil
        if answeredFromStore { return }
        if case .unreachable(let message) = error, mayRetry {
            // The connection failed before any response byte: an idempotent
            // request without a body can safely go again (on a later loop
            // turn: libcurl must not be re-entered from its callback).
            failedAttempts += 1
            worker.logger.info("upstream connection failed for \(request.method) \(key) (\(message)); retry \(failedAttempts)")
            worker.loop.schedule(after: 0) { [weak self] in
                guard let self, !self.finished else { return }
                self.forward()
            }
            return
        }
        if let error {
            WorkerStats.bump(worker.counters.upstreamErrors)
            dropStore()
            broadcast?.finish(.failed)
            if responseStarted {
                worker.logger.warning("upstream failed mid-response for \(request.method) \(key): \(error.message)")
                finished = true
                releaseLeadership()
                logAccess()
                connection.exchangeAborted()
                return
            }
            worker.logger.info("upstream error for \(request.method) \(key): \(error.message)")
            if serveStaleOnError() { return }
            if let validating, validating.cacheControl.mustRevalidate || (shared && validating.cacheControl.proxyRevalidate) {
                sendGatewayError(504, "upstream unavailable to revalidate a must-revalidate response: \(error.message)")
                return
            }
            if case .timedOut = error { sendGatewayError(504, error.message) } else { sendGatewayError(502, error.message) }
            return
        }
        if framing == .length, let expectedLength, receivedBody != expectedLength {
            // The upstream promised more (or less) than it sent.
            broadcast?.finish(.failed)
            dropStore()
            finished = true
            releaseLeadership()
            logAccess()
            connection.exchangeAborted()
            return
        }
        if framing == .chunked { connection.enqueue(Array("0\r\n\r\n".utf8)) }
        if let expectedLength, receivedBody != expectedLength {
            dropStore()  // incomplete: never stored (section 3.3)
            broadcast?.finish(.failed)
        }
        commitStore()
        broadcast?.finish(.complete)
        if framing == .untilClose {
            finished = true
            releaseLeadership()
            logAccess()
            connection.exchangeAborted()  // close-delimited: closing ends the body
            return
        }
        complete()
    }

    /// RFC 5861 section 4: the upstream failed; serve the stale response
    /// instead when its (or the request's) stale-if-error window allows.
    func serveStaleOnError() -> Bool {
        guard !responseStarted else { return false }
        let now = EventLoop.wallSeconds()
        if let fallback = policyFallback {
            // networkElseCache: any stored response rather than an error.
            let age = fallback.currentAge(now: now)
            if serveStored(fallback, age: age, now: now, cacheStatus: CacheStatus.hit(ttl: fallback.lifetime - age)) {
                answeredFromStore = true
                WorkerStats.bump(worker.counters.staleHits)
                return true
            }
            return false
        }
        guard let (entry, requestCC) = staleCandidate else { return false }
        let age = entry.currentAge(now: now)
        guard Stale.mayServeOnError(lifetime: entry.lifetime, currentAge: age, response: entry.cacheControl,
                                    request: requestCC, shared: shared) else { return false }
        answeredFromStore = true
        WorkerStats.bump(worker.counters.staleHits)
        serveStored(entry, age: age, now: now, cacheStatus: CacheStatus.hit(ttl: entry.lifetime - age))
        return true
    }

    /// 502/504 generated here, when nothing was sent yet.
    func sendGatewayError(_ status: Int, _ message: String) {
        responseStarted = true
        var extra: [HeaderField] = []
        if isCacheLookup {
            extra.append(HeaderField(name: "cache-status",
                                     value: CacheStatus.forward(forwardReason, stored: false, detail: "upstream-error")))
        }
        noteAnswer(status, cache: Array((extra.first?.value ?? "").utf8), bodyBytes: message.utf8.count + 1)
        connection.enqueue(ResponseSerializer.simple(status: status, body: message, close: !keepAlive, extra: extra))
        complete()
    }
}
