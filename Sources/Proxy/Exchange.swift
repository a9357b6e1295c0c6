import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// One request and its answer: from the cache, or from upstream while the
/// response streams to the client and, when storable, into the store.
/// Every caching decision is asked of `CacheSemantics`; this type obeys.
final class Exchange: UpstreamTransferDelegate {
    unowned let connection: ClientConnection
    let request: RequestHead
    let worker: Worker
    var transfer: UpstreamTransfer?
    /// Where the request's life stands (ExchangeMachine): this class carries
    /// out what its events call for.
    var machine = ExchangeMachine()
    var responseStarted: Bool { machine.responseStarted }

    // Cache bookkeeping.
    let isCacheLookup: Bool
    let key: String
    var forwardReason: CacheStatus.Forward = .method
    var requestTime: Int64 = 0
    var variants = Variants()
    /// The stored response a conditional upstream request is validating.
    var validating: CachedResponse?
    /// A stale stored response that may stand in if the upstream fails
    /// (stale-if-error), with the request's directives.
    var staleCandidate: (entry: CachedResponse, request: CacheControl)?
    /// networkElseCache: what to serve, however stale, when the upstream fails.
    var policyFallback: CachedResponse?
    /// reloadIgnoringLocalAndRemoteCacheData: Cache-Control: no-cache upstream.
    var askUpstreamCachesToReload = false

    // Response streaming.
    var framing: ClientFraming = .none
    var expectedLength: Int?
    var receivedBody = 0
    var store: PendingStore?
    /// The store's purge number when the upstream request began: a purge
    /// since then that matches keeps this response out of the cache.
    var fetchToken: UInt64 = 0

    /// The response as published to collapsed requests, while leading.
    var broadcast: SharedFetch? { machine.published }
    /// The request's body, held until complete when small (HeldRequestBody).
    var requestBody: HeldRequestBody

    /// Bounds the wait for a leader (Exchange+Collapsing).
    var waitTimer: TimerID = .none

    // Access log (only filled in when it is on).
    let startMilliseconds: UInt64
    var access = AccessRecord()

    init(head: RequestHead, connection: ClientConnection) {
        self.request = head
        self.connection = connection
        self.worker = connection.worker
        requestBody = HeldRequestBody(framing: head.framing, limit: connection.worker.configuration.requestBufferBytes)
        // A GET with a body may be answered by what the body says: never
        // looked up or stored under the URL alone (it goes through as is).
        isCacheLookup = (head.method == "GET" || head.method == "HEAD") && head.framing == .none
        key = connection.worker.configuration.routes.cacheKey(head.pathAndQuery)
        startMilliseconds = connection.worker.accessLog == nil ? 0 : EventLoop.nowMilliseconds()
    }

    var keepAlive: Bool { request.keepAlive && !worker.draining }
    /// The `[[route]]` this request falls under, if any.
    lazy var route: Route? = worker.configuration.routes.isEmpty ? nil
        : worker.configuration.routes.match(key, method: request.method == "HEAD" ? "GET" : request.method)
    var toDisk: Bool { route?.disk ?? true }
    var shared: Bool { worker.configuration.sharedCache }
    var builder: StoredResponseBuilder { worker.builder }

    func start() {
        let policy: RequestPolicy, chosenByClient: Bool
        switch PolicyChoice.make(clientMayChoose: route?.allowClientPolicy ?? worker.configuration.allowClientPolicy,
                                 header: request.combinedHeader("larder-cache-policy"),
                                 configured: route?.policy ?? worker.configuration.defaultPolicy) {
        case .unknown(let message):
            sendMadeHere(400, message)
            return
        case .chosen(let chosen, let byClient):
            (policy, chosenByClient) = (chosen, byClient)
        }
        guard isCacheLookup else {
            forward()
            return
        }
        let requestCC = CacheControl(request.combinedHeader("cache-control"))
        let pragma = request.combinedHeader("pragma")?.lowercased().contains("no-cache") ?? false
        let facts = RequestFacts(cacheControl: requestCC, pragmaNoCache: pragma) { [headers = request.headers] in
            headers.combined($0)
        }
        let now = EventLoop.wallSeconds()
        variants = worker.store.lookup(key, local: worker.localHits)
        var plan = LookupPlan.make(policy.action(for: Lookup.decide(facts, variants, now: now, shared: shared)),
                                   chosenByClient: chosenByClient, onlyIfCached: requestCC.onlyIfCached)
        if case .serve(let index, let age, let ttl, let stale, let refresh) = plan {
            if serveStored(variants[index], age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl)) {
                if stale { WorkerStats.bump(worker.counters.staleHits) } else { WorkerStats.bump(worker.counters.hits) }
                if refresh {
                    worker.revalidateInBackground(variants[index], among: variants, request: request, peer: connection.peer)
                }
                return
            }
            // The stored body file went away (evicted or removed meanwhile): forget it, fetch as on a miss.
            worker.store.remove(key)
            variants = Variants()
            plan = .afterVanishedBody(onlyIfCached: requestCC.onlyIfCached)
        }
        switch plan {
        case .serve:
            return
        case .cacheOnlyMiss(let detail, let message):
            sendCacheOnlyMiss(detail: detail, message)
        case .forward(let how):
            forwardReason = how.reason
            if let index = how.validate, variants[index].hasValidator, request.method == "GET" { validating = variants[index] }
            if let index = how.staleCandidate { staleCandidate = (variants[index], requestCC) }
            if let index = how.fallback { policyFallback = variants[index] }
            askUpstreamCachesToReload = how.noCacheUpstream
            if how.reason == .stale { WorkerStats.bump(worker.counters.staleForwards) } else { WorkerStats.bump(worker.counters.misses) }
            if how.collapse, waitForLeader() { return }
            forward()
        }
    }

    /// 504 without asking the upstream (only-if-cached, cacheOnly).
    func sendCacheOnlyMiss(detail: String, _ message: String) {
        sendMadeHere(504, message, cacheStatus: "larder; detail=\(detail)")
    }

    /// An answer made here (400, 502, 504): noted, queued, done.
    func sendMadeHere(_ status: Int, _ message: String, cacheStatus: String? = nil) {
        let extra: HeaderFields = cacheStatus.map { [HeaderField(lowercasedName: "cache-status", value: $0)] } ?? []
        noteAnswer(status, cache: Array((cacheStatus ?? "").utf8), bodyBytes: message.utf8.count + 1)
        connection.enqueue(ResponseSerializer.simple(status: status, body: message, close: !keepAlive, extra: extra))
        complete()
    }

    func complete() {
        machine.finish()
        releaseLeadership()
        logAccess()
        connection.exchangeFinished(keepAlive: keepAlive)
    }

    /// Ends the exchange by closing the client connection: a close-delimited
    /// body, or one cut short after its head was sent.
    func endByClosing() {
        machine.finish()
        releaseLeadership()
        logAccess()
        connection.exchangeAborted()
    }

    // MARK: access log

    /// Remembers what the client is being sent, for the access log.
    @inline(__always)
    func noteAnswer(_ status: Int, cache: @autoclosure () -> [UInt8], bodyBytes: Int?) {
        guard worker.accessLog != nil else { return }
        access.note(status: status, cacheStatus: cache(), bodyBytes: bodyBytes)
    }

    /// One line per request, when the access log is on: at completion, or
    /// when the exchange ends early (status 0 if nothing was sent).
    func logAccess() {
        guard worker.accessLog != nil, access.takeTurnToWrite() else { return }
        worker.logAccess(client: connection.peer, method: request.method, target: request.target, status: access.status,
                         bodyBytes: access.bodyBytes ?? receivedBody, milliseconds: EventLoop.nowMilliseconds() &- startMilliseconds,
                         cache: access.cacheColumn)
    }

    /// The client (or the store's writer) caught up: let a paused upstream continue.
    func outputDrained() {
        if machine.caughtUp(), let transfer { transfer.resume() }
    }

    /// The client connection went away.
    func cancel() {
        logAccess()
        worker.loop.cancel(waitTimer)
        switch machine.clientGone(mayFinishWithoutClient: shouldFinishWithoutClient) {
        case .none:
            return
        case .keepFetching(let resume):
            worker.adopt(self)  // kept alive until the fetch ends (abandonOrphan)
            if resume { transfer?.resume() }
            return
        case .cancel(let followed):
            followed?.unfollow(ObjectIdentifier(self))
        }
        broadcast?.finish(.failed)
        releaseLeadership()
        dropStore()
        transfer?.cancel()
        transfer = nil
    }
}
