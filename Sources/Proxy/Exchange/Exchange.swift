import CacheSemantics
import CacheStorage
import EdgeControls
import EventLoop
import HTTP1
import HTTPHeaders
import Routing
import Telemetry

/// One request and its answer: from the cache, from the request already
/// fetching it (collapsed), or from the upstream (an `UpstreamFetch`,
/// which also stores and shares the response). Every caching decision is
/// asked of `CacheSemantics`; this type obeys.
final class Exchange {
    /// Where the answer goes (the HTTP/1.1 connection, or another
    /// transport's stream). Unsafe, and safe: the sink owns its exchange
    /// and cancels it when it closes (the same rule `ClientAnswer` holds
    /// it by); a checked reference cost every read a retain and a release.
    unowned(unsafe) let sink: any ResponseSink
    let request: RequestHead
    /// The cache as this request uses it. Held (one retain an exchange):
    /// what is read through it on a hit is then borrowed, not retained.
    let cache: CacheAccess
    /// The upstream, and the worker's loop. Unsafe, and safe: the worker
    /// owns them, and the sink.
    unowned(unsafe) let upstream: UpstreamAccess
    unowned(unsafe) let loop: EventLoop
    /// Where the request's life stands and what happens next
    /// (ExchangeMachine): this class performs its actions.
    var machine = ExchangeMachine()
    var responseStarted: Bool { machine.responseStarted }
    /// What the client is sent, and the access log's line about it.
    var answer: ClientAnswer
    /// The upstream request answering this one, while it runs.
    var fetch: UpstreamFetch?
    /// While collapsed: waiting for the leader.
    var wait: LeaderWait?
    /// The body pulled as the client drains (`Exchange+Body`): a stored gzip
    /// body decoded for this client, or the leader's response followed.
    var body: (any BodySource)?
    var pullScheduled = false
    /// stale_timeout's timer, while armed (`Exchange+Actions`).
    var staleTimer = TimerID.none
    /// `$request_id` and the response fields rendered with variables,
    /// made once a rule asks for them (`Exchange+Edge`; one word here).
    var rendered: RenderedFields?

    private(set) var isCacheLookup: Bool
    /// (A cached POST's changes once its body is read: `PostQuery`.)
    private(set) var key: String
    /// A POST under a route that caches POSTs, or a QUERY, its body held
    /// to key it (`Exchange+PostQuery`); nil for every other request (one
    /// word, nothing to destroy).
    var post: HeldPost?
    /// What the latest lookup found (the fetch reads validators and the
    /// variants a response replaces).
    var variants = Variants()

    init(head: consuming RequestHead, sink: any ResponseSink, parts: ExchangeParts) {
        self.sink = sink
        cache = parts.cache
        upstream = parts.upstream
        loop = parts.upstream.loop
        answer = ClientAnswer(on: sink, log: parts.log)
        // A GET with a body may be answered by what the body says: never
        // looked up or stored under the URL alone (it goes through as is).
        let isCacheLookup = (head.method == "GET" || head.method == "HEAD") && head.framing == .none
        self.isCacheLookup = isCacheLookup
        // The configuration is read in place (`upstream` is a class): a local
        // copy of the whole struct cost every request a retain and a release
        // of each of its fields once it grew past what the optimizer copies inline.
        let upstream = self.upstream
        let routes = upstream.configuration.routes
        let route: RouteFacts?
        (key, route) = routes.keyAndFacts(head.pathAndQuery, host: head.header("host"), method: head.method)
        // A path whose responses said No-Vary-Search: its query in canonical form.
        if isCacheLookup, let canonical = parts.cache.searchVariances.lookupKey(key) { key = canonical }
        self.route = route
        edge = route != nil ? route!.edge : upstream.configuration.edge
        let honours = route?.allowClientPolicy ?? upstream.configuration.allowClientPolicy
        honoursClientDirectives = honours
        let isGet = head.method == "GET"
        // Last: the head moves in (read above in place, not copied).
        request = consume head
        if request.method == "POST", request.framing != .none, let caching = routes.postCaching(key),
           !IncrementalStream.isIncremental(request.header("incremental")) {
            if case .contentLength(let n) = request.framing, n > caching.maxBody {} else {
                post = HeldPost(PostQuery(caching: caching),
                                reservation: HeldBodyReservation(stats: upstream.stats, limit: upstream.configuration.requestBufferTotalBytes))
            }
        }
        configureMachine(isCacheLookup: isCacheLookup, isGet: isGet)
        if request.method == "QUERY" { keyQueryMethod(routes) }
    }

    @inline(__always)
    private func configureMachine(isCacheLookup: Bool, isGet: Bool) {
        machine.configure(.init(isCacheLookup: isCacheLookup, isGet: isGet,
                                disconnectedGrace: route?.staleOnDisconnect ?? upstream.configuration.staleOnDisconnectSeconds,
                                shared: upstream.configuration.sharedCache, fleet: cache.store.hasSharedStage),
                          choice: PolicyChoice.make(for: request, route: route, configured: upstream.configuration.defaultPolicy,
                                                    clientsMayChoose: upstream.configuration.allowClientPolicy))
    }

    /// A POST whose body makes it a query: looked up, collapsed and stored
    /// under `key` as a GET is; Cache-Status names the body's digest.
    /// A QUERY is revalidated with its body and validators, as a GET is.
    func becomeQuery(key: String, digest: String, normalized: Bool) {
        self.key = key
        isCacheLookup = true
        answer.cacheStatusKey = (normalized ? "body-json-sha256:" : "body-sha256:") + digest
        configureMachine(isCacheLookup: true, isGet: request.method == "QUERY")
    }

    /// The `[[route]]` this request falls under, if any. (Not `lazy`: a
    /// lazy optional is a double optional, which every exchange's deinit
    /// destroyed through the generic Optional witness.)
    let route: RouteFacts?
    var toDisk: Bool { route?.disk ?? true }
    /// The edge controls this request is under: its route's (over the
    /// global ones), or the global ones when it has no route. Held here
    /// (a reload may replace the configuration meanwhile).
    let edge: EdgeRules?
    var peer: String { sink.peer }
    var shared: Bool { upstream.configuration.sharedCache }
    /// Whether the client's own Cache-Control and Pragma count in the
    /// lookup: not where clients may not choose a policy
    /// (`allow_client_policy = false`), or any client could bypass the
    /// cache with `no-cache`, as nginx and Varnish do not let it by default.
    let honoursClientDirectives: Bool
    /// What the lookup reads of the request: its Vary fields, and its
    /// Cache-Control and Pragma where they count. (Two calls with constant
    /// flags: with a variable one the initializer was not inlined, and
    /// copied the request head on every hit.)
    func lookupFacts(_ directives: CacheControl) -> RequestFacts {
        honoursClientDirectives ? RequestFacts(request, directives, honouringPragma: true)
            : RequestFacts(request, directives, honouringPragma: false)
    }

    /// The request's Cache-Control as the lookup reads it (none when not honoured).
    var requestDirectives: CacheControl {
        honoursClientDirectives ? CacheControl(request.combinedHeader("cache-control")) : CacheControl()
    }

    func start() {
        // (The rules read unretained, as the exchange holds them: a retain a request.)
        if let edge = edge.map(Unmanaged.passUnretained), !edge._withUnsafeGuaranteedRef(passesEdge) { return }
        // A POST cached as a query starts once its body is read.
        guard post?.query == nil else { return }
        perform(machine.start())
    }

    /// The one lookup path (the first, after a wait, after the fleet
    /// answered): `variants` judged for this request, for the machine to
    /// decide on. Stored pieces that cannot answer it are left out (kept
    /// aside: one may be completed); the usual lookup has none: no copy.
    func lookedUp(_ looked: Variants, from stages: ExchangeMachine.LookedIn = .local) -> ExchangeAction {
        variants = looked
        var completable: Completion?
        let directives = requestDirectives
        if StoredAnswer.hasPiece(looked) {
            variants = StoredAnswer.usable(looked, for: request)
            completable = Forwarding.completable(among: looked, for: request, facts: lookupFacts(directives))
        }
        let now = cache.clock.now()
        let found = LookupFound(outcome: Lookup.decide(lookupFacts(directives), variants, now: now, shared: shared,
                                                       grace: route?.grace ?? upstream.configuration.graceSeconds),
                                completable: completable, now: now, onlyIfCached: directives.onlyIfCached,
                                staleIfError: directives.staleIfError)
        return machine.lookedUp(found, in: variants, from: stages)
    }

    /// A HEAD that missed, fetched as a GET (`Forwarding.fetchesAsGet`):
    /// its client is answered once the head came, and the fetch goes on
    /// without it.
    var fetchesHeadAsGet: Bool { isCacheLookup && Forwarding.fetchesAsGet(request.method, reason: machine.forwardReason) }

    /// Goes upstream: the fetch carries the request, and its body (held or
    /// streamed). `leading`: this request holds the key's claim
    /// (Collapser), which the fetch keeps, as it keeps the fleet's
    /// (`claimedInFleet`).
    func forward(leading: Bool = false, claimedInFleet: Bool = false) {
        let headAsGet = fetchesHeadAsGet
        var forwarded = UpstreamHeaders.forward(headAsGet ? request.asGet : request, peer: sink.peer,
                                                forwardHost: upstream.configuration.forwardHost,
                                                preserveHost: upstream.configuration.preserveHost,
                                                passed: upstream.configuration.passRequestHeaders)
        if let edge { applyRequestRules(edge, to: &forwarded) }
        if isCacheLookup {
            UpstreamHeaders.normalizeAcceptEncoding(&forwarded, for: request)
            // Several ranges go as asked only when modest; else the whole is fetched (and stored).
            if let range = request.combinedHeader("range"), range.contains(","), !ByteRange.mayForwardSeveral(range) {
                forwarded.remove("range")
                forwarded.remove("if-range")
            }
        }
        let plan = machine.forwarding
        let fetch = UpstreamFetch(fields: plan.upstreamFields(forwarded, among: variants), for: self, upstream: upstream,
                                  leading: leading, sharing: plan.mayShare, asGet: headAsGet)
        fetch.claimedInFleet = claimedInFleet
        self.fetch = fetch
        fetch.start()
        if let held = post?.body {
            held.withUnsafeBytes { fetch.requestBody($0) }
            fetch.requestBodyEnd()
        }
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        guard post?.query != nil else { return fetch?.requestBody(bytes) ?? () }
        holdPostBody(bytes)
    }

    func requestBodyEnd() {
        guard post?.query != nil else { return fetch?.requestBodyEnd() ?? () }
        postBodyComplete()
    }
    func requestBodyDrained() { sink.uploadDrained() }
    /// The connection stops reading the client's body meanwhile.
    var isUploadCongested: Bool { fetch?.isUploadCongested ?? false }

    /// A stored response, decoded as the client drains for a client that
    /// does not take its gzip (`ClientCoding`, `Exchange+Decoding`).
    func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: CacheStatusLine, count: ExchangeCount) -> StoredServe {
        if ClientCoding.mustDecode(entry, for: request) {
            return serveDecoded(StoredServing(entry: entry, age: age, now: now, cacheStatus: cacheStatus, count: count))
        }
        guard answer.stored(entry, for: request, age: age, now: now, cacheStatus: cacheStatus) else { return .bodyGone }
        return .served
    }

    /// An answer made here (400, 502, 504): queued, done.
    func sendMadeHere(_ status: Int, _ message: String, cacheStatus: String? = nil, extra: HeaderFields = []) {
        answer.madeHere(status, message, for: request, cacheStatus: cacheStatus, extra: extra)
        complete()
    }

    /// Nothing more goes to the client (a fetch still running, answered
    /// otherwise, stops). `closing`: the connection closes, to end a
    /// close-delimited body or cut one short after its head was sent.
    func complete(closing: Bool = false) {
        _ = machine.finish()  // (.ended: nothing to perform; a second `perform` cost a hit about 1 %)
        stopStaleTimer()
        body?.stop()
        body = nil
        fetch?.cancel()
        fetch = nil
        answer.log(request)
        // (The sink forgets the response rules as the exchange finishes.)
        if closing { sink.exchangeAborted() } else { sink.exchangeFinished(keepAlive: request.keepAlive) }
    }

    /// The client caught up: a paused upstream, or the body source, continues.
    func outputDrained() {
        fetch?.resume()
        if body != nil { schedulePull() }
    }

    /// The client connection went away: the fetch decides whether to
    /// finish without it.
    func cancel() {
        answer.log(request)
        if edge?.editsResponses == true { sink.setAnswerEdits(nil) }
        perform(machine.clientGone())  // (.ended, or a claim let go)
        stopStaleTimer()
        body?.stop()
        body = nil
        wait?.stop()
        fetch?.clientLeft()
        fetch = nil
    }
}

extension Exchange {
    func stopStaleTimer() {
        guard staleTimer != .none else { return }
        loop.cancel(staleTimer)
        staleTimer = .none
    }
}

/// What an exchange is made with, besides its request and its sink: the
/// worker's cache, upstream (and its loop) and log. Held without reference
/// counting (the worker owns them and every sink): handing them to each
/// new exchange costs no retains.
struct ExchangeParts {
    unowned(unsafe) let cache: CacheAccess
    unowned(unsafe) let upstream: UpstreamAccess
    unowned(unsafe) let log: RequestLog
}
