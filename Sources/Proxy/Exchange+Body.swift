import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// The upstream's body (to the client, to followers, into the store) and
/// the end of the transfer: completion, failure, stale-if-error, 502/504.
extension Exchange {
    /// Keeps a body piece for storing (the writer decides where it goes).
    func storeBody(_ bytes: UnsafeRawBufferPointer) {
        guard store != nil else { return }
        if !store!.append(bytes) { store = nil }
    }

    /// A disk slower than the upstream: the transfer pauses until the
    /// store's writer has caught up (as a slow client pauses it), rather
    /// than the queue growing or the object being dropped.
    func storeIsBacklogged() -> Bool {
        store?.pauseIfBacklogged(on: worker.loop, resume: { [weak self] in self?.outputDrained() }) ?? false
    }

    /// Stores the completed response. Called as soon as the body is known to
    /// be complete, before its last bytes go to the client, so a client that
    /// asks again at once (on another connection) finds it stored.
    func commitStore() {
        guard var pending = store else { return }
        store = nil
        if pending.commit() { WorkerStats.bump(worker.counters.stored) }
    }

    /// Gives up storing this response (too large, incomplete, failed).
    func dropStore() {
        guard store != nil else { return }
        store!.abort()
        store = nil
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        transfer = nil
        var retryable = false
        if case .unreachable = error { retryable = mayRetry }
        let completion = machine.upstreamComplete(failed: error != nil, retryable: retryable)
        switch completion {
        case .ignore:
            return
        case .endOrphan:
            if error == nil, BodyEnd.isWhole(expected: expectedLength, received: receivedBody) {
                commitStore()
                broadcast?.finish(.complete)
            } else {
                dropStore()
            }
            abandonOrphan()
            return
        case .retry:
            // The connection failed before any response byte: an idempotent
            // request without a body can safely go again.
            worker.logger.info("upstream connection failed for \(request.method) \(key) (\(error?.message ?? "")); retry \(machine.failedAttempts)")
            forwardOnNextTurn()
            return
        case .answerFailure, .cutResponse:
            let message = error?.message ?? "upstream closed without a response"
            WorkerStats.bump(worker.counters.upstreamErrors)
            dropStore()
            broadcast?.finish(.failed)
            if completion == .cutResponse {
                worker.logger.warning("upstream failed mid-response for \(request.method) \(key): \(message)")
                endByClosing()
                return
            }
            worker.logger.info("upstream error for \(request.method) \(key): \(message)")
            let kind: UpstreamFailure.Kind
            if case .timedOut = error { kind = .timedOut } else { kind = .unreachable }
            _ = answerUpstreamFailure(kind, detail: message)
            return
        case .endResponse:
            break
        }
        switch BodyEnd.decide(framing: framing, expected: expectedLength, received: receivedBody) {
        case .cut:
            // The upstream promised more (or less) than it sent.
            broadcast?.finish(.failed)
            dropStore()
            endByClosing()
        case .end(let whole, let terminator, let close):
            if terminator { connection.enqueueLastChunk() }
            if whole {
                commitStore()
                broadcast?.finish(.complete)
            } else {
                dropStore()  // incomplete: never stored (section 3.3)
                broadcast?.finish(.failed)
            }
            // A close-delimited body ends by closing.
            if close { endByClosing() } else { complete() }
        }
    }

    /// The upstream failed before anything was sent: the policy's fallback,
    /// the stale response, or a 502/504, as `UpstreamFailure` decides.
    /// Returns false when the upstream's own response should go through.
    func answerUpstreamFailure(_ kind: UpstreamFailure.Kind, detail: String) -> Bool {
        guard !machine.responseStarted else { return false }
        var hasFallback = policyFallback != nil
        while true {
            let now = EventLoop.wallSeconds()
            let stale = staleCandidate.map {
                UpstreamFailure.StaleCandidate(lifetime: $0.entry.lifetime, currentAge: $0.entry.currentAge(now: now),
                                               response: $0.entry.cacheControl, request: $0.request)
            }
            let answer = UpstreamFailure.answer(kind, hasFallback: hasFallback, stale: stale, validating: validating?.cacheControl,
                                                shared: shared)
            switch answer {
            case .serveFallback, .serveStale:
                let entry = answer == .serveFallback ? policyFallback! : staleCandidate!.entry
                let age = entry.currentAge(now: now)
                if serveStored(entry, age: age, now: now, cacheStatus: CacheStatus.hit(ttl: entry.lifetime - age)) {
                    WorkerStats.bump(worker.counters.staleHits)
                    return true
                }
                // Its body file is gone: the next answer down.
                if answer == .serveFallback { hasFallback = false } else { staleCandidate = nil }
            case .gatewayError(let status):
                let revalidating = validating.map { Stale.mustRevalidate($0.cacheControl, shared: shared) } ?? false
                sendGatewayError(status, revalidating ? "upstream failed to revalidate a must-revalidate response: \(detail)" : detail)
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
