import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// One request and its answer: from the cache, from the request already
/// fetching it (collapsed), or from the upstream (an `UpstreamFetch`,
/// which also stores and shares the response). Every caching decision is
/// asked of `CacheSemantics`; this type obeys.
final class Exchange {
    unowned let connection: ClientConnection
    let request: RequestHead
    let worker: Worker
    /// The upstream request answering this one, while it runs.
    var fetch: UpstreamFetch?
    /// The leader's shared response, when collapsed onto another request.
    var reader: SharedFetchReader?
    /// Where the request's life stands (ExchangeMachine): this class carries
    /// out what its events call for.
    var machine = ExchangeMachine()
    var responseStarted: Bool { machine.responseStarted }

    // Cache bookkeeping.
    let isCacheLookup: Bool
    let key: String
    var variants = Variants()
    /// Why and how it went upstream (validating, stand-ins, reload).
    var forwarding = Forwarding()

    /// Bounds the wait for a leader (Exchange+Collapsing).
    var waitTimer: TimerID = .none

    // Access log (only filled in when it is on).
    let startMilliseconds: UInt64
    var access = AccessRecord()

    init(head: RequestHead, connection: ClientConnection) {
        self.request = head
        self.connection = connection
        self.worker = connection.worker
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
            forwarding = Forwarding(how, variants: variants, method: request.method, requestDirectives: requestCC)
            if how.reason == .stale { WorkerStats.bump(worker.counters.staleForwards) } else { WorkerStats.bump(worker.counters.misses) }
            switch how.collapse ? collapse() : .fetchAlone {
            case .waiting: return
            case .leading: forward(leading: true)
            case .fetchAlone: forward()
            }
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
        finish()
        connection.exchangeFinished(keepAlive: keepAlive)
    }

    /// Ends the exchange by closing the client connection: a close-delimited
    /// body, or one cut short after its head was sent.
    func endByClosing() {
        finish()
        connection.exchangeAborted()
    }

    /// Nothing more goes to the client: a fetch still running (answered
    /// otherwise) stops.
    private func finish() {
        machine.finish()
        reader?.stop()
        fetch?.cancel()
        fetch = nil
        logAccess()
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
                         bodyBytes: access.bodyBytes ?? connection.answerBodyBytes, milliseconds: EventLoop.nowMilliseconds() &- startMilliseconds,
                         cache: access.cacheColumn)
    }

    /// The client caught up: a paused upstream continues.
    func outputDrained() {
        fetch?.resume()
    }

    /// The client connection went away: the fetch decides whether to
    /// finish without it.
    func cancel() {
        logAccess()
        worker.loop.cancel(waitTimer)
        machine.finish()
        reader?.stop()
        fetch?.clientLeft()
        fetch = nil
    }
}
