import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Telemetry
import Upstream
import HTTPHeaders

/// One request to the upstream and where its response goes: to the client
/// (its `FetchClient`, while there is one), into the store, and to the
/// requests collapsed onto it (while it leads). The client keeps the
/// answer's decisions (stand-ins for failures, 304 refreshes, its head and
/// framing); this keeps the response's. It goes on without its client
/// when the response is worth finishing: orphaned, held by `UpstreamAccess`.
final class UpstreamFetch: UpstreamTransferDelegate {
    unowned let upstream: UpstreamAccess
    unowned let cache: CacheAccess
    /// Nil once the client left or the fetch is over. (Unowned: the
    /// exchange lets go of it, by `clientLeft` or `cancel`, before it
    /// goes; a weak reference would cost every miss a side table.)
    private unowned var client: (any FetchClient)?
    let request: RequestHead
    let key: String
    let isCacheLookup: Bool
    private let variants: Variants
    private let toDisk: Bool
    /// The upstream request's fields; it goes out once its body allows.
    private let fields: HeaderFields
    private var requestBody: HeldRequestBody
    private var upstreamRequest: UpstreamRequest?
    var machine: FetchMachine
    /// Also the request body's way upstream (the client streams it).
    private(set) var transfer: (any UpstreamTransferControl)?
    private(set) var store: PendingStore?
    private var receivedBody = 0
    private var requestTime: Int64 = 0
    /// Monotonic microseconds when the request went out (the upstream's latency).
    private var sentMicroseconds: UInt64 = 0
    /// The response's way into the store, made when the request went out:
    /// a purge since then that matches keeps it out of the cache.
    private(set) var missHandler: MissHandler?
    /// This fetch holds the key's claim across the fleet: released (after
    /// the shared store) as the local one is.
    var claimedInFleet = false

    /// `fields`: what the upstream request carries. `leading`: the
    /// client holds the key's claim (Collapser), which the fetch keeps.
    /// The pool this request's upstream is, the server of the current
    /// attempt, and the path and query it is sent.
    private let pool: UpstreamPool
    private var server: UpstreamServer?
    /// An upstream fault: counted, and logged at most once an interval per kind
    /// (`FaultSummary`), naming the server (libcurl's words name none).
    private func noteFault(_ kind: String, _ detail: String) {
        WorkerStats.bump(upstream.counters.upstreamErrors)
        let place = server.map { " from \($0.base)" } ?? ""
        if let line = FaultSummary.shared.note("\(kind)\(place): \(detail)", example: "\(request.method) \(key)") { upstream.logger.warning("\(line)") }
    }
    private var target = ""

    /// A streaming upload's place among those that may hold an upstream connection.
    private var upload = UploadTurn()

    /// Whether the response may be shared with requests collapsed onto it
    /// (not a completion's rest: they wait, then look up again).
    let sharing: Bool

    /// `asGet`: the client's HEAD goes as a GET, so what comes is stored
    /// (`Exchange.forward`); the fetch is a GET's in every way.
    init(fields: HeaderFields, for client: any FetchClient, upstream: UpstreamAccess, leading: Bool, sharing: Bool = true,
         asGet: Bool = false) {
        self.sharing = sharing
        self.upstream = upstream
        pool = upstream.configuration.pool(named: client.upstreamName)
        cache = upstream.cache
        self.client = client
        request = asGet ? client.request.asGet : client.request
        key = client.key
        isCacheLookup = client.isCacheLookup
        variants = client.variants
        toDisk = client.toDisk
        self.fields = fields
        // A body its client sends incrementally (`Incremental: ?1`) goes on as it comes.
        let holds = request.framing == .none || !IncrementalStream.isIncremental(request.header("incremental"))
        requestBody = HeldRequestBody(framing: request.framing, limit: holds ? upstream.configuration.requestBufferBytes : 0,
                                      reservation: request.framing == .none ? nil
                                          : HeldBodyReservation(stats: upstream.stats, limit: upstream.configuration.requestBufferTotalBytes))
        if requestBody.streamedForTotal { WorkerStats.bump(upstream.counters.streamedBodies) }
        machine = FetchMachine(leading: leading, method: request.method, hasBody: request.framing != .none,
                               retryLimit: upstream.configuration.upstreamRetries,
                               finishStoreLimit: upstream.configuration.finishStoreLimitBytes)
    }

    /// Sends the request, or holds it until its body is complete (small
    /// bodies: `HeldRequestBody`).
    func start() {
        if case .start(let body) = requestBody.forward(fields: fields) { send(fields, body: body) }
    }

    private func send(_ fields: HeaderFields, body: UpstreamRequest.Body) {
        guard machine.state == .requesting, transfer == nil else { return }  // over, or sent already
        if case .streamed = body, !requestBody.isComplete, !upload.hasPlace {
            // The body still comes from the client, as slowly as it likes.
            guard upstream.uploads.take(limit: uploadLimit, resume: { [weak self] in self?.unpark() ?? false }) else {
                return upload.wait(fields, body)
            }
            upload.placed()
        }
        // OPTIONS *: the upstream gets the asterisk form too.
        let asterisk = request.target == "*"
        target = asterisk ? "/" : request.pathAndQuery
        upstreamRequest = UpstreamRequest(method: request.method, url: "", headers: fields, body: body,
                                          requestTarget: asterisk ? "*" : nil)
        attempt()
        guard let transfer, request.framing != .none else { return }
        transfer.onBodyDrained = { [weak self] in self?.client?.requestBodyDrained() }
        if let (held, complete) = requestBody.transferStarted() {
            held.withUnsafeBytes { transfer.supply($0) }
            if complete { transfer.finishBody() }
        }
    }

    private func attempt() {
        guard var upstreamRequest else { return }
        // Each attempt (a retry too) goes to the pool's server of the moment.
        let server = pool.pick(key: key, now: upstream.loop.now())
        self.server = server
        server.started()
        upstreamRequest.url = server.base + target
        self.upstreamRequest = upstreamRequest
        requestTime = cache.clock.now()
        sentMicroseconds = EventLoop.nowMicroseconds()
        missHandler = cache.store.missHandler(toDisk: toDisk)
        transfer = upstream.requester.start(upstreamRequest, delegate: self)
    }

    // MARK: the request body

    private var uploadLimit: Int { UploadShare.limit(connections: upstream.configuration.upstream.maxConnectionsPerHost) }

    /// A place among the streaming uploads came free: the request goes, with
    /// what came of its body meanwhile. False when the fetch is over already.
    private func unpark() -> Bool {
        guard machine.state == .requesting, let waited = upload.resume() else { return false }
        send(waited.fields, body: waited.body)
        if !waited.bytes.isEmpty { waited.bytes.withUnsafeBytes { transfer?.supply($0) } }
        if waited.ended { bodyComplete() }
        client?.requestBodyDrained()  // its client is read again
        return true
    }

    /// The body is all upstream: its place is free.
    private func bodyComplete() {
        transfer?.finishBody()
        if upload.leave() { upstream.uploads.release(limit: uploadLimit, on: upstream.loop) }
    }

    /// A piece of the request body from the client.
    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        switch requestBody.append(bytes) {
        case .held: break
        case .supply:
            if upload.isWaiting { upload.hold(bytes) } else { transfer?.supply(bytes) }
        case .startStreaming(let fields):
            if requestBody.streamedForTotal { WorkerStats.bump(upstream.counters.streamedBodies) }
            send(fields, body: .streamed(length: nil))
        }
    }

    /// The client sent the whole request body.
    func requestBodyEnd() {
        if requestBody.end() {
            start()
        } else if upload.isWaiting {
            upload.end()
        } else {
            bodyComplete()
        }
    }

    /// Whether request-body bytes pile up faster than the upstream reads them.
    var isUploadCongested: Bool {
        upload.isWaiting || (transfer?.bufferedBodyBytes ?? 0) >= upstream.configuration.clientBufferBytes
    }

    // MARK: the response

    /// Passed to the client while it waits for the head; never stored. At
    /// most `maxInterims` per request: an upstream that sends them without
    /// end does not fill the client's output with them.
    func upstreamDidReceiveInterim(status: Int, headers: HeaderFields) {
        guard machine.takesHead, interims < Self.maxInterims else { return }
        interims += 1
        client?.interim(status: status, fields: headers)
    }

    static let maxInterims = 8
    private var interims = 0

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: HeaderFields) {
        guard machine.takesHead else { return }
        var headers = headers
        if cache.builder.stripsCookies(key) { headers.remove("set-cookie") }
        let upstreamMicroseconds = Int(EventLoop.nowMicroseconds() &- sentMicroseconds)
        upstream.counters.latency.record(.upstreamHead, microseconds: upstreamMicroseconds)
        server?.answered(microseconds: upstreamMicroseconds)
        var response = UpstreamResponse(status: status, reason: reason, headers: headers, requestTime: requestTime,
                                        responseTime: cache.clock.now(), stripTagHeaders: upstream.configuration.stripTagHeaders)
        response.upstreamMicroseconds = upstreamMicroseconds
        response.server = server?.address
        var invalid: String?
        if case .invalid(let why) = response.framing { invalid = why }
        let takes = invalid == nil && (client.map { $0.takes(response) } ?? takenUnattended(response))
        switch machine.head(invalid: invalid, clientTakes: takes) {
        case .refuse(let why):
            // RFC 9112 section 6.3: discard the response, close the upstream
            // connection, 502 (the body's end cannot be known).
            noteFault("invalid upstream response", why)
            let client = self.client
            cancel()
            client?.fetchFailed(.invalidResponse, detail: "invalid upstream response: \(why)")
            return
        case .stream:
            break
        default:
            // Answered otherwise (a 5xx's stand-in, a 304 refresh): the rest is not wanted.
            return cancel()
        }
        store = missHandler.flatMap { cache.applyCacheEffect(of: response, to: request, key: key, isCacheLookup: isCacheLookup,
                                                             variants: variants, through: $0) }
        if case .pass = machine.storeChosen(store != nil, expectedLength: response.length) { releaseClaim() }
        if store != nil, response.status == 206, let piece = PartialContent.piece(contentRange: response.fields["content-range"]) {
            fillAfterRange(piece)
        }
        offerToShare()
        let stored = store != nil
        // Nothing more will come (204, Content-Length: 0): stored before the client has it all.
        if stored && (response.hasNoBody(answering: request.method) || machine.expectedLength == 0) { settle(whole: true) }
        guard let client else {
            // Unattended: on into the store (and to followers), if worth finishing.
            if !machine.mayFinishUnattended { cancel() }
            return
        }
        client.streams(response, stored: stored)
    }

    /// The stored response validated, when the client was answered with a
    /// stale copy before the head came (`continueWithoutClient`).
    private var validated: CachedResponse?

    /// A head with no client to take it (it had a stale copy meanwhile):
    /// a 304 refreshes what was validated, a 5xx leaves the stored copy be
    /// (it may serve on), anything else goes on into the store.
    private func takenUnattended(_ response: UpstreamResponse) -> Bool {
        guard machine.unattended else { return false }
        if response.status == 304 {
            if let validated, let missHandler {
                _ = cache.applyNotModified(response, validated: validated, among: variants, through: missHandler)
            }
            return false
        }
        return response.status < 500
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        // A slow client pauses the upstream, unless collapsed requests are
        // streaming the same response (they hold the pieces anyway); so does
        // a disk slower than the upstream.
        // (The questions may not read `machine`: it is being changed.)
        let broadcast = machine.published, client = self.client
        switch machine.body(clientCongested: { (client?.isCongested ?? false) && !(broadcast?.hasFollowers ?? false) },
                            storeBacklogged: storeIsBacklogged) {
        case .pause: return false
        case .take: break
        default: return true  // over: taken and dropped
        }
        receivedBody += bytes.count
        if let broadcast {
            // One copy, queued to the client and every follower.
            let chunk = Bytes(bytes)
            broadcast.append(chunk)
            client?.deliver(chunk)
        } else {
            client?.deliver(copying: bytes)
        }
        if store != nil, !store!.append(bytes) { store = nil }
        if let expectedLength = machine.expectedLength, receivedBody == expectedLength { settle(whole: true) }
        // Orphaned, and nobody wants the rest any more (or more than finish_store_limit: a length it never said).
        if case .stop = machine.took(received: receivedBody, storing: store != nil) { cancel() }
        return true
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        transfer = nil
        let message = error?.message ?? "upstream closed without a response"
        let client = self.client
        let action = machine.complete(error)
        // A server that cannot be reached, or does not answer in time, is
        // counted against (and, after max_fails, left out for a while).
        switch action {
        case .retry(true), .fail(_, true): if let server { pool.failed(server, now: upstream.loop.now()) }
        default: break
        }
        switch action {
        case .retry:
            // The connection failed, or no head came in time, before any
            // response byte: an idempotent request without a body can safely
            // go again, to the pool's next server (on a later loop turn:
            // libcurl must not be re-entered from its callback).
            // Not logged: the failure, if the retries fail too, is (`FaultSummary`).
            upstream.loop.schedule(after: 0) { [weak self] in
                guard let self, self.machine.state == .requesting else { return }
                self.attempt()
            }
            return
        case .fail(let kind, _):
            noteFault("upstream error", message)
            end()
            client?.fetchFailed(kind, detail: message)
        case .cut:
            noteFault("upstream failed mid-response", message)
            settle(whole: false)
            end()
            client?.responseCut()
        case .end:
            // Incomplete: never stored (RFC 9111 section 3.3).
            let whole = BodyEnd.isWhole(expected: machine.expectedLength, received: receivedBody) && (client?.endsBody() ?? true)
            settle(whole: whole)
            end()
            client?.responseEnded(whole: whole)
        default:
            return  // over already
        }
    }

    /// A disk slower than the upstream: the transfer pauses until the
    /// store's writer has caught up (as a slow client pauses it), rather
    /// than the queue growing or the object being dropped.
    private func storeIsBacklogged() -> Bool {
        store?.pauseIfBacklogged(on: upstream.loop, resume: { [weak self] in self?.resume() }) ?? false
    }

    /// The client (or the store's writer) caught up: a paused transfer goes on.
    func resume() {
        if case .resume = machine.caughtUp() { transfer?.resume() }
    }

    /// The response is over: stored and shared when `whole`, else dropped
    /// (followers' connections are cut). Called as soon as the body is
    /// known whole, before its last bytes reach the client, so a client
    /// asking again at once (on another connection) finds it stored.
    private func settle(whole: Bool) {
        if whole {
            if var pending = store {
                store = nil
                if pending.commit(on: cache) {
                    WorkerStats.bump(upstream.counters.stored)
                    // A multipart 206 names the whole's length in its parts alone.
                    if pending.response.status == 206, pending.response.fields["content-range"] == nil,
                       let piece = pending.storedPiece {
                        fillAfterRange(piece)
                    }
                }
            }
            machine.published?.finish(.complete)
        } else {
            store?.abort()
            store = nil
            machine.published?.finish(.failed)  // no-op once complete
        }
    }

    /// A stored piece of a range the client asked for: the whole comes
    /// too, for the ranges that follow (a piece's completion needs none).
    private func fillAfterRange(_ piece: PartialContent.Piece) {
        guard RangeFill.wanted(enabled: upstream.configuration.rangeFill, clientAskedRange: request.header("range") != nil,
                               stored: piece, largestBody: missHandler?.largestBody ?? 0),
              let peer = client?.peer else { return }
        // On a later loop turn: libcurl must not be re-entered from its callback.
        let (upstream, key, variants, request) = (upstream, key, variants, request)
        upstream.loop.execute { upstream.fetchWholeInBackground(key, among: variants, request: request, peer: peer) }
    }

    // MARK: the end

    /// The client went away: the response is finished without it when
    /// worth it (a storable one within finish_store_limit, or one that
    /// followers stream), else the fetch stops.
    func clientLeft() {
        client = nil
        goOnAlone(machine.clientGone())
    }

    /// The client was answered with a stored response before the head came
    /// (stale_timeout): the fetch goes on alone and stores what comes; a
    /// 304 refreshes `validating`. Its failures still count against the server.
    func continueWithoutClient(validating: CachedResponse?) {
        client = nil
        validated = validating
        goOnAlone(machine.clientAnsweredElsewhere())
    }

    private func goOnAlone(_ action: FetchAction) {
        switch action {
        case .keepFetching(let resume):
            upstream.adopt(self)  // held until it ends
            if resume { transfer?.resume() }
        case .stop:
            cancel()
        default:
            return
        }
    }

    /// Whether the fetch goes on, to the store or to followers, once its
    /// client leaves (`clientLeft`), as its machine decides.
    var mayFinishWithoutClient: Bool { machine.mayFinishUnattended }

    /// Stops: nothing (more) is stored or shared. Harmless when it is over
    /// already (every part is then empty): the exchange calls it as it ends.
    func cancel() {
        _ = machine.stop()
        settle(whole: false)
        transfer?.cancel()
        transfer = nil
        end()
    }

    /// Over: the claim on the key released; an orphan let go.
    private func end() {
        if upload.leave() { upstream.uploads.release(limit: uploadLimit, on: upstream.loop) }
        releaseClaim()
        if client == nil { upstream.release(self) }
        client = nil
    }

    private func releaseClaim() {
        let here = machine.endLeadership() == .releaseClaim
        cache.lock.release(key, here: here, acrossFleet: claimedInFleet)
        claimedInFleet = false
    }
}
