import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1

/// One request and its answer: from the cache, from the request already
/// fetching it (collapsed), or from the upstream (an `UpstreamFetch`,
/// which also stores and shares the response). Every caching decision is
/// asked of `CacheSemantics`; this type obeys.
final class Exchange {
    /// Unsafe, and safe: the connection owns its exchange and cancels it
    /// when it closes (the same rule `ClientAnswer` holds it by); a checked
    /// reference cost every read a retain and a release.
    unowned(unsafe) let connection: ClientConnection
    let request: RequestHead
    let worker: Worker
    /// Where the request's life stands (ExchangeMachine): this class carries
    /// out what its events call for.
    var machine = ExchangeMachine()
    var responseStarted: Bool { machine.responseStarted }
    /// What the client is sent, and the access log's line about it.
    var answer: ClientAnswer
    /// The upstream request answering this one, while it runs.
    var fetch: UpstreamFetch?
    /// While collapsed: waiting for the leader, then reading its response.
    var wait: LeaderWait?
    var reader: SharedFetchReader?
    /// A stored gzip body decoded for this client as it drains.
    var decoding: DecodingBody?
    var decodingScheduled = false

    let isCacheLookup: Bool
    let key: String
    var variants = Variants()
    /// Why and how it went upstream (validating, stand-ins, reload).
    var forwarding = Forwarding()

    init(head: consuming RequestHead, connection: ClientConnection) {
        self.connection = connection
        self.worker = connection.worker
        answer = ClientAnswer(on: connection)
        // A GET with a body may be answered by what the body says: never
        // looked up or stored under the URL alone (it goes through as is).
        isCacheLookup = (head.method == "GET" || head.method == "HEAD") && head.framing == .none
        let routes = connection.worker.configuration.routes
        key = routes.cacheKey(head.pathAndQuery)
        route = routes.isEmpty ? nil : routes.match(key, method: head.method == "HEAD" ? "GET" : head.method)
        honoursClientDirectives = route?.allowClientPolicy ?? connection.worker.configuration.allowClientPolicy
        // Last: the head moves in (read above in place, not copied).
        request = head
    }

    /// The `[[route]]` this request falls under, if any. (Not `lazy`: a
    /// lazy optional is a double optional, which every exchange's deinit
    /// destroyed through the generic Optional witness.)
    let route: Route?
    var toDisk: Bool { route?.disk ?? true }
    var peer: String { connection.peer }
    var shared: Bool { worker.configuration.sharedCache }
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
        let policy: RequestPolicy, chosenByClient: Bool
        switch PolicyChoice.make(for: request, route: route, configured: worker.configuration.defaultPolicy,
                                 clientsMayChoose: worker.configuration.allowClientPolicy) {
        case .unknown(let message):
            return sendMadeHere(400, message)
        case .chosen(let chosen, let byClient):
            (policy, chosenByClient) = (chosen, byClient)
        }
        guard isCacheLookup else { return forward() }
        let requestCC = requestDirectives
        variants = worker.store.lookup(key, local: worker.localHits)
        decide(policy, chosenByClient: chosenByClient, requestCC, now: EventLoop.wallSeconds(), fromFleet: false)
    }

    /// What the variants found lead to under the request's policy, carried
    /// out. `fromFleet`: the fleet's shared tier was asked already (after
    /// the local tiers missed), and what it had is among `variants`.
    func decide(_ policy: RequestPolicy, chosenByClient: Bool, _ requestCC: CacheControl, now: Int64, fromFleet: Bool) {
        // Stored pieces that cannot answer this request are left out (kept
        // aside: one may be completed). The usual lookup has none: no copy.
        var pieces: Variants?
        if StoredAnswer.hasPiece(variants) {
            pieces = variants
            variants = StoredAnswer.usable(variants, for: request)
        }
        let outcome = Lookup.decide(lookupFacts(requestCC), variants, now: now, shared: shared)
        var plan = LookupPlan.make(policy.action(for: outcome), chosenByClient: chosenByClient, onlyIfCached: requestCC.onlyIfCached)
        if case .serve(let index, let age, let ttl, let stale, let refresh) = plan {
            switch serveHit(variants[index], age: age, ttl: ttl, stale: stale, now: now, detail: fromFleet ? "fleet" : nil) {
            case .served:
                if variants.count > 1 { worker.store.noteServed(variants[index]) }
                if refresh { worker.revalidateInBackground(variants[index], among: variants, request: request, peer: connection.peer) }
                return
            case .bodyGone:
                // The stored body file went away (evicted or removed meanwhile): forget it, fetch as on a miss.
                worker.store.remove(key)
                variants = Variants()
            case .undecodable:
                // Kept for the clients that take its gzip; this one gets what
                // the upstream sends it (identity), which takes its place when stored.
                break
            }
            plan = .afterVanishedBody(onlyIfCached: requestCC.onlyIfCached)
        }
        if !fromFleet, plan.mayAskFleet, let tier = worker.sharedTier {
            machine.askFleet()  // before asking: a failure may answer at once
            if SharedLookup.ask(tier, key: key, into: worker.store, toDisk: toDisk, found: { [self, policy] found in
                guard machine.fleetAnswered() else { return }
                if !found.isEmpty { variants = Variants(Array(variants) + found) }
                decide(policy, chosenByClient: chosenByClient, requestCC, now: EventLoop.wallSeconds(), fromFleet: true)
            }) { return }
            _ = machine.fleetAnswered()
        }
        switch plan {
        case .serve:
            return
        case .cacheOnlyMiss(let detail, let message):
            sendMadeHere(504, message, cacheStatus: "larder; detail=\(detail)")
        case .forward(let how):
            forwarding = Forwarding(how, variants: variants, method: request.method, requestDirectives: requestCC,
                                    disconnectedGrace: route?.staleOnDisconnect ?? worker.configuration.staleOnDisconnectSeconds)
            if how.reason == .stale { WorkerStats.bump(worker.counters.staleForwards) } else { WorkerStats.bump(worker.counters.misses) }
            if how.reason == .uriMiss || how.reason == .varyMiss, let pieces,
               let piece = Forwarding.completable(among: pieces, for: request,
                                                  facts: lookupFacts(requestCC)) {
                // Not shared: a follower would get the rest alone.
                (forwarding.completing, forwarding.reason) = (piece, .partial)
                return forward()
            }
            if how.collapse { collapse(askedFleet: fromFleet) } else { forward() }
        }
    }

    /// Goes upstream: the fetch carries the request, and its body (held or
    /// streamed). `leading`: this request holds the key's claim
    /// (Collapser), which the fetch keeps, as it keeps the fleet's
    /// (`claimedInFleet`).
    func forward(leading: Bool = false, claimedInFleet: Bool = false) {
        machine.forward()
        var forwarded = UpstreamHeaders.forward(request, peer: connection.peer, forwardHost: worker.configuration.forwardHost,
                                                passed: worker.configuration.passRequestHeaders)
        if isCacheLookup {
            UpstreamHeaders.normalizeAcceptEncoding(&forwarded, for: request)
            // Several ranges go as asked only when modest; else the whole is fetched (and stored).
            if let range = request.combinedHeader("range"), range.contains(","), !ByteRange.mayForwardSeveral(range) {
                forwarded.remove("range")
                forwarded.remove("if-range")
            }
        }
        let fetch = UpstreamFetch(fields: forwarding.upstreamFields(forwarded, among: variants), for: self, worker: worker,
                                  leading: leading)
        fetch.claimedInFleet = claimedInFleet
        self.fetch = fetch
        fetch.start()
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) { fetch?.requestBody(bytes) }
    func requestBodyEnd() { fetch?.requestBodyEnd() }
    func requestBodyDrained() { connection.uploadDrained() }
    /// The connection stops reading the client's body meanwhile.
    var isUploadCongested: Bool { fetch?.isUploadCongested ?? false }

    /// A stored response as a hit (`stale`: counted as a stale hit). False,
    /// having sent nothing, when its body is a disk file that is gone.
    /// `detail`: Cache-Status's detail ("fleet": found in the fleet's
    /// shared tier; "upstream-unreachable": a stale stand-in).
    func serveHit(_ entry: CachedResponse, age: Int, ttl: Int, stale: Bool, now: Int64, detail: String? = nil) -> StoredServe {
        let served = serveStored(entry, age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl, detail: detail))
        guard served == .served else { return served }
        if stale { WorkerStats.bump(worker.counters.staleHits) } else { WorkerStats.bump(worker.counters.hits) }
        return .served
    }

    /// What became of a stored response offered to the client.
    enum StoredServe: Equatable {
        case served
        /// Nothing sent: its body is a disk file that can no longer be opened.
        case bodyGone
        /// Nothing sent: the client does not take its gzip, and it cannot
        /// be decoded here (`ClientCoding`); the stored copy is still good
        /// for those who take it.
        case undecodable
    }

    /// A stored response, decoded as the client drains for a client that
    /// does not take its gzip (`ClientCoding`, `Exchange+Decoding`).
    @discardableResult
    func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: CacheStatusLine) -> StoredServe {
        if ClientCoding.mustDecode(entry, for: request) { return serveDecoded(entry, age: age, now: now, cacheStatus: cacheStatus) }
        guard answer.stored(entry, for: request, age: age, now: now, cacheStatus: cacheStatus) else { return .bodyGone }
        complete()
        return .served
    }

    /// An answer made here (400, 502, 504): queued, done.
    func sendMadeHere(_ status: Int, _ message: String, cacheStatus: String? = nil) {
        answer.madeHere(status, message, for: request, cacheStatus: cacheStatus)
        complete()
    }

    /// Nothing more goes to the client (a fetch still running, answered
    /// otherwise, stops). `closing`: the connection closes, to end a
    /// close-delimited body or cut one short after its head was sent.
    func complete(closing: Bool = false) {
        machine.finish()
        decoding = nil
        reader?.stop()
        fetch?.cancel()
        fetch = nil
        answer.log(request)
        if closing { connection.exchangeAborted() } else { connection.exchangeFinished(keepAlive: answer.keepAlive(request)) }
    }

    /// The client caught up: a paused upstream, or a decoding, continues.
    func outputDrained() {
        fetch?.resume()
        if decoding != nil { scheduleDecoding() }
    }

    /// The client connection went away: the fetch decides whether to
    /// finish without it.
    func cancel() {
        answer.log(request)
        machine.finish()
        decoding = nil
        wait?.stop()
        reader?.stop()
        fetch?.clientLeft()
        fetch = nil
    }
}
