import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

/// One request and its answer: from the cache, or from upstream while the
/// response streams to the client and, when storable, into the memory tier.
/// Every caching decision is asked of `CacheSemantics`; this type obeys.
final class Exchange: UpstreamTransferDelegate {
    private unowned let connection: ClientConnection
    private let request: RequestHead
    private let worker: Worker
    private var transfer: UpstreamTransfer?
    private(set) var responseStarted = false
    private var finished = false
    private var upstreamPaused = false
    /// The answer came from the store (after a 304, or instead of a 5xx):
    /// the rest of the upstream response is ignored.
    private var answeredFromStore = false

    // Cache bookkeeping.
    private let isCacheLookup: Bool
    private let key: String
    private var forwardReason: CacheStatus.Forward = .method
    private var requestTime: Int64 = 0
    private var variants = Variants()
    /// The stored response a conditional upstream request is validating.
    private var validating: CachedResponse?
    /// A stale stored response that may stand in if the upstream fails
    /// (stale-if-error), with the request's directives.
    private var staleCandidate: (entry: CachedResponse, request: CacheControl)?
    /// networkElseCache: what to serve, however stale, when the upstream fails.
    private var policyFallback: CachedResponse?
    /// reloadIgnoringLocalAndRemoteCacheData: Cache-Control: no-cache upstream.
    private var askUpstreamCachesToReload = false

    // Response streaming.
    private enum ClientFraming { case none, length, chunked, untilClose }
    private var framing: ClientFraming = .none
    private var expectedLength: Int?
    private var receivedBody = 0
    private var store: PendingStore?
    /// The store's purge number when the upstream request began: a purge
    /// since then that matches keeps this response out of the cache.
    private var fetchToken: UInt64 = 0

    /// The leader's response as published to collapsed requests.
    private var broadcast: SharedFetch?
    /// The shared response this (collapsed) request streams from, and how
    /// many of its pieces were queued so far.
    private var following: SharedFetch?
    private var followedChunks = 0

    /// Upstream attempts that failed to connect, for bounded retries.
    private var failedAttempts = 0
    /// The client went away but the response is being fetched to the end
    /// and stored (finish_store_limit); the worker keeps this alive.
    private var orphaned = false

    // Access log (only filled in when it is on).
    private let startMilliseconds: UInt64
    private var accessStatus = 0
    /// The Cache-Status sent: a whole "Cache-Status: ...\r\n" line or the value.
    private var accessCache: [UInt8] = []
    /// Body bytes of an answer from the store (forwarded ones count `receivedBody`).
    private var accessBodyBytes: Int?
    private var accessLogged = false

    /// What will become a `CachedResponse` when the body is complete.
    private struct PendingStore {
        var status: Int
        var reason: String?
        var headers: [(name: String, value: String)]
        var timing: ResponseTiming
        var tags: [String]
        /// Parsed when deciding to store; `build` uses them again.
        var directives: StoredResponseBuilder.Directives
        var body = ByteAccumulator()
        /// Set when the body is too large for memory and streams to disk instead.
        var disk: DiskTier.Stream?
    }

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

    private var keepAlive: Bool { request.keepAlive && !worker.draining }
    /// The `[[route]]` this request falls under, if any.
    private lazy var route: Route? = worker.configuration.routes.isEmpty ? nil
        : worker.configuration.routes.match(key, method: request.method == "HEAD" ? "GET" : request.method)
    private var toDisk: Bool { route?.disk ?? true }
    private var shared: Bool { worker.configuration.sharedCache }
    private var builder: StoredResponseBuilder { worker.builder }

    func start() {
        // The request's policy: the client's Larder-Cache-Policy when allowed,
        // else the configured default.
        var policy = route?.policy ?? worker.configuration.defaultPolicy
        var chosenByClient = false
        if route?.allowClientPolicy ?? worker.configuration.allowClientPolicy,
           let name = request.combinedHeader("larder-cache-policy") {
            guard let chosen = RequestPolicy(name: name) else {
                responseStarted = true
                noteAnswer(400, cache: [], bodyBytes: 0)
                connection.enqueue(ResponseSerializer.simple(
                    status: 400, body: "unknown Larder-Cache-Policy \"\(name)\"; valid names: "
                        + RequestPolicy.validNames.joined(separator: ", "), close: !keepAlive))
                complete()
                return
            }
            policy = chosen
            chosenByClient = true
        }
        guard isCacheLookup else {
            forward()
            return
        }
        let requestCC = CacheControl(request.combinedHeader("cache-control"))
        let pragma = request.combinedHeader("pragma")?.lowercased().contains("no-cache") ?? false
        let facts = RequestFacts(cacheControl: requestCC, pragmaNoCache: pragma) { [headers = request.headers] in
            RequestHead.combined($0, in: headers)
        }
        let now = EventLoop.wallSeconds()
        variants = worker.store.lookup(key)
        var candidate: CachedResponse?
        let outcome = Lookup.decide(facts, variants, now: now, shared: shared)
        switch policy.action(for: outcome) {
        case .serveStored(let index, let age, let ttl), .serveStoredAndRefresh(let index, let age, let ttl):
            if serveStored(variants[index], age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl)) {
                if ttl > 0 { WorkerStats.bump(worker.counters.hits) } else { WorkerStats.bump(worker.counters.staleHits) }
                if policy == .cacheThenFetch {
                    worker.revalidateInBackground(variants[index], among: variants, request: request, peer: connection.peer)
                }
                return
            }
            bodyFileVanished()
        case .gatewayTimeout:
            sendCacheOnlyMiss(detail: "cache-only", "nothing stored for this URL and the policy forbids asking the upstream")
            return
        case .forward(let validate, let noCacheUpstream, let fallback):
            // A reload the client asked for, or one the configuration imposes.
            forwardReason = chosenByClient ? .request : .bypass
            if let validate, variants[validate].hasValidator, request.method == "GET" { validating = variants[validate] }
            askUpstreamCachesToReload = noCacheUpstream
            if let fallback { policyFallback = variants[fallback] }
            WorkerStats.bump(worker.counters.misses)
            forward()
            return
        case .followProtocol(.fresh(let index, let age, let ttl)):
            if serveStored(variants[index], age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl)) {
                WorkerStats.bump(worker.counters.hits)
                return
            }
            bodyFileVanished()
        case .followProtocol(.staleWhileRevalidate(let index, let age, let ttl)):
            if serveStored(variants[index], age: age, now: now, cacheStatus: CacheStatus.hit(ttl: ttl)) {
                WorkerStats.bump(worker.counters.staleHits)
                worker.revalidateInBackground(variants[index], among: variants, request: request, peer: connection.peer)
                return
            }
            bodyFileVanished()
        case .followProtocol(.stale(let index, _, _, let forced)):
            forwardReason = forced ? .request : .stale
            candidate = variants[index]
            staleCandidate = (variants[index], requestCC)
        case .followProtocol(.miss(let varyMiss)):
            forwardReason = varyMiss ? .varyMiss : .uriMiss
        }
        if requestCC.onlyIfCached {
            // Section 5.2.1.7: nothing usable stored and the client forbids going upstream.
            sendCacheOnlyMiss(detail: "only-if-cached", "only-if-cached: no usable stored response")
            return
        }
        if forwardReason == .stale { WorkerStats.bump(worker.counters.staleForwards) } else { WorkerStats.bump(worker.counters.misses) }
        if let candidate, candidate.hasValidator, request.method == "GET" { validating = candidate }
        if waitForLeader() { return }
        forward()
    }

    /// 504 without asking the upstream (only-if-cached, cacheOnly).
    private func sendCacheOnlyMiss(detail: String, _ message: String) {
        responseStarted = true
        let status = HeaderField(name: "cache-status", value: "larder; detail=\(detail)")
        noteAnswer(504, cache: Array(status.value.utf8), bodyBytes: message.utf8.count + 1)
        connection.enqueue(ResponseSerializer.simple(status: 504, body: message, close: !keepAlive, extra: [status]))
        complete()
    }

    /// A stored body file went away (evicted or removed meanwhile): forget
    /// the entry and fetch as on a miss.
    private func bodyFileVanished() {
        worker.store.remove(key)
        variants = Variants()
        forwardReason = .uriMiss
    }

    // MARK: answers from the store

    /// Writes a stored response: its prepared head, a per-request tail
    /// (Age, Date, Cache-Status, Connection) and its body, or a 304 when the
    /// client's own conditional request matches it.
    /// Returns false, having sent nothing, when the body is a disk file that
    /// can no longer be opened.
    @discardableResult
    private func serveStored(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: [UInt8]) -> Bool {
        // Validators are read from the stored head only when the client sent a conditional.
        if hasClientConditional, entry.status == 200,
           clientIsNotModified(etag: entry.etag, lastModified: entry.lastModified, dateValue: entry.timing.dateValue) {
            responseStarted = true
            noteAnswer(304, cache: cacheStatus, bodyBytes: 0)
            sendNotModified(entry.headers, age: age, now: now, cacheStatus: cacheStatus)
            complete()
            return true
        }
        var file: OpenFile?
        if let bodyFile = entry.bodyFile, request.method != "HEAD" {
            guard let fd = try? Socket.openForReading(bodyFile.path) else { return false }
            file = OpenFile(fd: fd)
            // A file cut short behind Larder's back would be sent as a short
            // body (the connection then cut) on every hit: drop it instead.
            if let size = Socket.fileSize(fd), size < bodyFile.offset + bodyFile.length {
                let expected = bodyFile.offset + bodyFile.length
                worker.logger.warning("stored body \(bodyFile.path) is \(size) bytes, shorter than recorded (\(expected)): entry dropped, fetching \(key) again")
                return false
            }
        }
        responseStarted = true
        if request.method == "GET", entry.status == 200, request.header("range") != nil {
            switch ByteRange.evaluate(range: request.combinedHeader("range"), ifRange: request.header("if-range"),
                                      length: entry.bodyLength, etag: entry.etag, lastModified: entry.lastModified) {
            case .full: break
            case .partial(let first, let last):
                sendPartial(entry, file: file, first: first, last: last, age: age, now: now, cacheStatus: cacheStatus)
                return true
            case .unsatisfiable:
                sendPartial(entry, file: file, first: nil, last: nil, age: age, now: now, cacheStatus: cacheStatus)
                return true
            }
        }
        if worker.accessLog != nil {
            noteAnswer(entry.status, cache: cacheStatus, bodyBytes: request.method == "HEAD" ? 0 : entry.bodyLength)
        }
        worker.headScratch.removeAll(keepingCapacity: true)
        worker.headScratch.append(contentsOf: "Age: ".utf8)
        ResponseSerializer.appendDecimal(age, to: &worker.headScratch)
        worker.headScratch.append(contentsOf: [0x0D, 0x0A])
        worker.headScratch.append(contentsOf: cacheStatus)
        appendConnectionField(to: &worker.headScratch)
        worker.headScratch.append(contentsOf: [0x0D, 0x0A])
        let headLength = entry.headLength
        connection.enqueue(entry, from: 0, to: headLength)
        worker.headScratch.withUnsafeBytes { connection.enqueue(copying: $0) }
        if let file, let bodyFile = entry.bodyFile {
            connection.enqueue(file: file, from: bodyFile.offset, to: bodyFile.offset + bodyFile.length)
        } else if request.method != "HEAD" {
            connection.enqueue(entry, from: headLength, to: headLength + entry.bodyLength)
        }
        complete()
        return true
    }

    /// 206 with one range of the stored body, or 416 when `first` is nil
    /// (RFC 9110 sections 14.4 and 15.5.17).
    private func sendPartial(_ entry: CachedResponse, file: OpenFile?, first: Int?, last: Int?, age: Int, now: Int64,
                             cacheStatus: [UInt8]) {
        let length = entry.bodyLength
        noteAnswer(first != nil ? 206 : 416, cache: cacheStatus, bodyBytes: first.flatMap { f in last.map { $0 - f + 1 } } ?? 0)
        var head = Array((first != nil ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 416 Range Not Satisfiable\r\n").utf8)
        for field in entry.headers where !builder.isHidden(field.name) {
            switch field.name {
            case "age", "content-length", "transfer-encoding", "connection", "keep-alive", "cache-status", "content-range":
                continue
            default: ResponseSerializer.appendField(field.name, field.value, to: &head)
            }
        }
        if let first, let last {
            ResponseSerializer.appendField("content-range", "bytes \(first)-\(last)/\(length)", to: &head)
            ResponseSerializer.appendField("content-length", String(last - first + 1), to: &head)
        } else {
            ResponseSerializer.appendField("content-range", "bytes */\(length)", to: &head)
            ResponseSerializer.appendField("content-length", "0", to: &head)
        }
        appendTail(age: age, now: now, cacheStatus: cacheStatus, hasDate: entry.header("date") != nil, to: &head)
        connection.enqueue(head)
        if let first, let last {
            if let file, let bodyFile = entry.bodyFile {
                connection.enqueue(file: file, from: bodyFile.offset + first, to: bodyFile.offset + last + 1)
            } else {
                connection.enqueue(entry, from: entry.headLength + first, to: entry.headLength + last + 1)
            }
        }
        complete()
    }

    private var hasClientConditional: Bool {
        isCacheLookup && (request.header("if-none-match") != nil || request.header("if-modified-since") != nil)
    }

    private func clientIsNotModified(etag: String?, lastModified: String?, dateValue: Int64?) -> Bool {
        guard hasClientConditional else { return false }
        return Validation.clientNotModified(ifNoneMatch: request.combinedHeader("if-none-match"),
                                            ifModifiedSince: request.header("if-modified-since"),
                                            etag: etag, lastModified: lastModified, dateValue: dateValue)
    }

    /// A 304 for the client (RFC 9110 section 15.4.5): the fields a 200 would
    /// have had that describe the representation, no body.
    private func sendNotModified(_ headers: [(name: String, value: String)], age: Int, now: Int64, cacheStatus: [UInt8]) {
        var head = Array("HTTP/1.1 304 Not Modified\r\n".utf8)
        var hasDate = false
        for field in headers {
            switch field.name {
            case "cache-control", "content-location", "date", "etag", "expires", "vary", "last-modified":
                if field.name.isField("date") { hasDate = true }
                ResponseSerializer.appendField(field.name, field.value, to: &head)
            default: continue
            }
        }
        appendTail(age: age, now: now, cacheStatus: cacheStatus, hasDate: hasDate, to: &head)
        connection.enqueue(head)
    }

    /// Age, Date (only when the fields have none), Cache-Status, Connection
    /// and the blank line ending the head.
    private func appendTail(age: Int, now: Int64, cacheStatus: [UInt8], hasDate: Bool, to head: inout [UInt8]) {
        head.append(contentsOf: "Age: ".utf8)
        ResponseSerializer.appendDecimal(age, to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
        if !hasDate { head.append(contentsOf: worker.dateHeader.current(now: now)) }
        head.append(contentsOf: cacheStatus)
        appendConnectionField(to: &head)
        head.append(contentsOf: [0x0D, 0x0A])
    }

    private func appendConnectionField(to out: inout [UInt8]) {
        if !keepAlive {
            out.append(contentsOf: "Connection: close\r\n".utf8)
        } else if request.minorVersion == 0 {
            out.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
    }

    // MARK: forward

    private func forward() {
        var headers = UpstreamHeaders.forward(request, peer: connection.peer, forwardHost: worker.configuration.forwardHost,
                                              passed: worker.configuration.passRequestHeaders)
        if let validating { UpstreamHeaders.addValidators(for: validating, among: variants, to: &headers) }
        if askUpstreamCachesToReload {
            headers.removeAll { $0.name == "cache-control" || $0.name == "pragma" }
            headers.append(("cache-control", "no-cache"))
            headers.append(("pragma", "no-cache"))
        }

        var body: UpstreamRequest.Body
        switch request.framing {
        case .none: body = .none
        case .contentLength(let n): body = .streamed(length: n)
        case .chunked: body = .streamed(length: nil)
        }
        if !requestBodyComplete, shouldHoldBody {
            // The transfer starts once the body is here (requestBodyEnd).
            pendingHeaders = headers
            heldBody = []
            if case .contentLength(let n) = request.framing { heldBody!.reserveCapacity(n) }
            return
        }
        if let held = heldBody, requestBodyComplete { body = .streamed(length: held.count) }
        startTransfer(headers: headers, body: body)
    }

    private func startTransfer(headers: [(name: String, value: String)], body: UpstreamRequest.Body) {
        // OPTIONS *: the upstream gets the asterisk form too.
        let asterisk = request.target == "*"
        let upstreamRequest = UpstreamRequest(method: request.method,
                                              url: worker.configuration.upstreamBase + (asterisk ? "/" : request.pathAndQuery),
                                              headers: headers, body: body, requestTarget: asterisk ? "*" : nil)
        requestTime = EventLoop.wallSeconds()
        fetchToken = worker.store.fetchToken
        transfer = worker.upstream.start(upstreamRequest, delegate: self)
        if request.framing != .none { transfer?.onBodyDrained = { [weak connection] in connection?.uploadDrained() } }
        if let held = heldBody {
            heldBody = nil
            pendingHeaders = []
            held.withUnsafeBytes { transfer?.supply($0) }
            if requestBodyComplete { transfer?.finishBody() }
        }
    }

    // MARK: request body

    /// A request body held back until it is complete (request_buffer_size):
    /// a slow upload then holds no upstream connection, and upstream_timeout
    /// starts when the upstream has the whole request.
    private var heldBody: [UInt8]?
    private var pendingHeaders: [(name: String, value: String)] = []
    private var requestBodyComplete = false

    private var shouldHoldBody: Bool {
        let limit = worker.configuration.requestBufferBytes
        guard limit > 0 else { return false }
        switch request.framing {
        case .none: return false
        case .contentLength(let n): return n <= limit
        case .chunked: return true  // until it outgrows the limit
        }
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        guard heldBody != nil, transfer == nil else {
            transfer?.supply(bytes)
            return
        }
        heldBody!.append(contentsOf: bytes)
        if heldBody!.count > worker.configuration.requestBufferBytes {
            // Too large to hold: stream it from here on.
            startTransfer(headers: pendingHeaders, body: .streamed(length: nil))
        }
    }

    func requestBodyEnd() {
        requestBodyComplete = true
        if heldBody != nil, transfer == nil, !finished {
            forward()
        } else {
            transfer?.finishBody()
        }
    }

    /// Whether request-body bytes are piling up faster than the upstream reads
    /// them; the connection stops reading from the client meanwhile.
    var isUploadCongested: Bool {
        (transfer?.bufferedBodyBytes ?? 0) >= worker.configuration.clientBufferBytes
    }

    // MARK: UpstreamTransferDelegate

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: [(name: String, value: String)]) {
        guard !finished, !answeredFromStore else { return }
        let responseTime = EventLoop.wallSeconds()
        let upstreamFraming = ResponseFraming.of(headers)
        if case .invalid(let why) = upstreamFraming {
            // RFC 9112 section 6.3: discard the response, close the upstream
            // connection, 502 (the body's end cannot be known).
            transfer?.cancel()
            transfer = nil
            WorkerStats.bump(worker.counters.upstreamErrors)
            worker.logger.warning("invalid upstream response for \(request.method) \(key): \(why)")
            if serveStaleOnError() { return }
            if let validating, validating.cacheControl.mustRevalidate || (shared && validating.cacheControl.proxyRevalidate) {
                sendGatewayError(504, "upstream failed to revalidate a must-revalidate response: \(why)")
                return
            }
            sendGatewayError(502, "invalid upstream response: \(why)")
            return
        }
        let transferCoded = upstreamFraming == .transferCoded
        let nominated = HopByHop.nominated(inFields: headers)
        var passed: [(name: String, value: String)] = []
        passed.reserveCapacity(headers.count)
        let strip = worker.configuration.stripTagHeaders
        for field in headers {
            if HopByHop.isHopByHop(field.name) || (!nominated.isEmpty && nominated.contains(field.name)) { continue }
            // Transfer-Encoding wins: its Content-Length describes nothing.
            if transferCoded && field.name.isField("content-length") { continue }
            if strip && (field.name.isField("surrogate-key") || field.name.isField("cache-tag")) { continue }
            passed.append(field)
        }
        let timing = ResponseTiming(requestTime: requestTime, responseTime: responseTime,
                                    dateValue: StoredResponseBuilder.value("date", in: headers).flatMap(HTTPDate.parse),
                                    ageValue: Freshness.parseAge(StoredResponseBuilder.value("age", in: headers)) ?? 0)

        if Stale.isErrorStatus(status), serveStaleOnError() { return }
        if let validating {
            if status == 304 {
                refreshFromNotModified(passed, timing: timing, fallback: validating)
                return
            }
            if status >= 500, validating.cacheControl.mustRevalidate || (shared && validating.cacheControl.proxyRevalidate) {
                // Section 4.2.4 / 5.2.2.2: never stale, and no error passed off as fresh.
                answeredFromStore = true
                sendGatewayError(504, "upstream failed to revalidate a must-revalidate response (status \(status))")
                return
            }
        }
        responseStarted = true

        let noBody = request.method == "HEAD" || status == 204 || status == 304 || status < 200
        if case .length(let n) = upstreamFraming { expectedLength = n }
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
               (expectedLength ?? 0) <= max(worker.configuration.maxObjectBytes, diskMaxObjectBytes) {
                store = PendingStore(status: status, reason: reason, headers: passed, timing: timing,
                                     tags: builder.tags(headers, key: key), directives: directives)
                if let expectedLength, expectedLength > 0, expectedLength <= worker.configuration.maxObjectBytes {
                    store!.body.reserve(expectedLength)
                }
                if (expectedLength ?? 0) > worker.configuration.maxObjectBytes {
                    // Too large for memory: straight to disk.
                    store!.disk = beginDiskStream()
                    if store!.disk == nil { store = nil }
                }
            } else if request.method == "GET" && status < 400 && status != 206 && status != 304 {
                // A current answer that cannot be stored: drop what it supersedes.
                worker.store.remove(key)
            } else if request.method == "HEAD" && status == 200 {
                updateFromHead(passed, timing: timing)
            }
            cacheStatus = CacheStatus.forward(forwardReason, stored: store != nil, fwdStatus: validating != nil ? status : nil)
            answerNotModified = status == 200 && clientIsNotModified(
                etag: StoredResponseBuilder.value("etag", in: passed),
                lastModified: StoredResponseBuilder.value("last-modified", in: passed), dateValue: timing.dateValue)
        } else {
            cacheStatus = CacheStatus.forward(.method, stored: false)
            if status < 400 { invalidateAfterUnsafe(headers) }
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
    private func refreshFromNotModified(_ headers: [(name: String, value: String)], timing: ResponseTiming,
                                        fallback: CachedResponse) {
        let candidates = variants.map { (etag: $0.etag, lastModified: $0.lastModified) }
        let selected = Validation.selectValidated(etag: StoredResponseBuilder.value("etag", in: headers),
                                                  lastModified: StoredResponseBuilder.value("last-modified", in: headers),
                                                  candidates: candidates).map { variants[$0] }
            ?? (StoredResponseBuilder.value("etag", in: headers) == nil ? fallback : nil)
        guard let entry = selected else {
            // The 304 names nothing we hold: ask again without validators, on
            // a later loop turn (libcurl must not be re-entered from its callback).
            validating = nil
            transfer?.cancel()
            transfer = nil
            worker.loop.schedule(after: 0) { [weak self] in
                guard let self, !self.finished else { return }
                self.forward()
            }
            return
        }
        answeredFromStore = true
        let refreshed = builder.refresh(entry, with: headers, timing: timing)
        let noStore = refreshed.cacheControl.noStore && !refreshed.cacheControl.mustUnderstand
        if !noStore, worker.store.insert(refreshed, toDisk: toDisk, fetchedSince: fetchToken) { WorkerStats.bump(worker.counters.stored) }
        WorkerStats.bump(worker.counters.revalidations)
        let now = EventLoop.wallSeconds()
        let status = CacheStatus.forward(forwardReason, stored: !noStore, fwdStatus: 304)
        serveStored(refreshed, age: refreshed.currentAge(now: now), now: now,
                    cacheStatus: Array("Cache-Status: \(status)\r\n".utf8))
    }

    /// RFC 9111 section 4.3.5: a 200 to HEAD updates the stored GET response
    /// it describes (selected by validator); a changed length means the
    /// stored one is outdated, so it goes.
    private func updateFromHead(_ headers: [(name: String, value: String)], timing: ResponseTiming) {
        guard !variants.isEmpty else { return }
        let etag = StoredResponseBuilder.value("etag", in: headers)
        let lastModified = StoredResponseBuilder.value("last-modified", in: headers)
        guard let index = Validation.selectValidated(etag: etag, lastModified: lastModified,
                                                     candidates: variants.map { (etag: $0.etag, lastModified: $0.lastModified) })
        else { return }
        let entry = variants[index]
        if let length = StoredResponseBuilder.value("content-length", in: headers).flatMap({ Int($0) }), length != entry.bodyLength {
            worker.store.remove(key)
            return
        }
        worker.store.insert(builder.refresh(entry, with: headers, timing: timing), toDisk: toDisk, fetchedSince: fetchToken)
    }

    /// RFC 9111 section 4.4: a successful unsafe request invalidates the
    /// target and the same-origin Location and Content-Location.
    private func invalidateAfterUnsafe(_ headers: [(name: String, value: String)]) {
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "TRACE": return  // safe methods (a GET with a body comes here)
        default: break
        }
        worker.store.remove(key)
        let upstream = worker.configuration.upstreamOrigin
        for name in ["location", "content-location"] {
            guard let reference = StoredResponseBuilder.value(name, in: headers),
                  let target = Invalidation.key(for: reference, requestKey: request.pathAndQuery, upstreamAuthority: upstream.authority,
                                                upstreamPathPrefix: upstream.pathPrefix, clientAuthority: request.header("host"))
            else { continue }
            worker.store.remove(worker.configuration.routes.cacheKey(target))
        }
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if orphaned {
            receivedBody += bytes.count
            broadcast?.append(Bytes(bytes))
            storeBody(bytes)
            if let expectedLength, receivedBody == expectedLength { broadcast?.finish(.complete) }
            if store == nil && !(broadcast?.hasFollowers ?? false) { abandonOrphan() }
            return true
        }
        guard !finished, !answeredFromStore else { return true }
        // A slow client pauses the upstream, unless collapsed requests are
        // streaming the same response (they hold the pieces anyway).
        if framing != .none && connection.isCongested && !(broadcast?.hasFollowers ?? false) {
            upstreamPaused = true
            return false
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
    private func enqueueBody(_ chunk: Bytes) {
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

    /// Responses larger than this go neither to memory nor to disk: a
    /// quarter of the disk tier, so one object cannot flush the rest.
    private var diskMaxObjectBytes: Int { toDisk ? (worker.store.disk?.limitBytes ?? 0) / 4 : 0 }

    /// Keeps a body piece for storing: in memory up to max_object_size,
    /// then (when there is a disk tier) streamed to disk.
    private func storeBody(_ bytes: UnsafeRawBufferPointer) {
        guard store != nil else { return }
        if let stream = store!.disk {
            if receivedBody > diskMaxObjectBytes || !(worker.store.disk?.append(stream, bytes) ?? false) { dropStore() }
            return
        }
        guard receivedBody > worker.configuration.maxObjectBytes else {
            store!.body.append(bytes)
            return
        }
        guard receivedBody <= diskMaxObjectBytes, let disk = worker.store.disk, let stream = beginDiskStream() else {
            dropStore()
            return
        }
        let soFar = store!.body.buffer
        store!.disk = stream
        let written = disk.append(stream, soFar) && disk.append(stream, bytes)
        store!.body.discard()
        if !written { dropStore() }
    }

    private func beginDiskStream() -> DiskTier.Stream? {
        guard let pending = store else { return nil }
        let record = builder.diskRecord(key: key, status: pending.status, reason: pending.reason, headers: pending.headers,
                                        timing: pending.timing, storedAt: EventLoop.wallSeconds(), tags: pending.tags,
                                        varyFrom: { [request] in request.combinedHeader($0) })
        return worker.store.beginDiskStream(record, fetchedSince: fetchToken)
    }

    /// Stores the completed response. Called as soon as the body is known to
    /// be complete, before its last bytes go to the client, so a client that
    /// asks again at once (on another connection) finds it stored.
    private func commitStore() {
        if let stream = store?.disk {
            store = nil
            worker.store.disk?.finish(stream)
            WorkerStats.bump(worker.counters.stored)
        } else if var pending = store {
            store = nil
            let entry = builder.build(key: key, status: pending.status, reason: pending.reason, headers: pending.headers,
                                      body: pending.body.buffer, timing: pending.timing, tags: pending.tags,
                                      directives: pending.directives, varyFrom: { [request] in request.combinedHeader($0) })
            pending.body.discard()
            if worker.store.insert(entry, toDisk: toDisk, fetchedSince: fetchToken) { WorkerStats.bump(worker.counters.stored) }
        }
    }

    /// Gives up storing this response (too large, incomplete, failed).
    private func dropStore() {
        guard store != nil else { return }
        store!.body.discard()
        if let stream = store!.disk { worker.store.disk?.abort(stream) }
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
    private func serveStaleOnError() -> Bool {
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
    private func sendGatewayError(_ status: Int, _ message: String) {
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

    private func complete() {
        finished = true
        releaseLeadership()
        logAccess()
        connection.exchangeFinished(keepAlive: keepAlive)
    }

    // MARK: access log

    /// Remembers what the client is being sent, for the access log.
    @inline(__always)
    private func noteAnswer(_ status: Int, cache: @autoclosure () -> [UInt8], bodyBytes: Int?) {
        guard worker.accessLog != nil else { return }
        accessStatus = status
        accessCache = cache()
        accessBodyBytes = bodyBytes
    }

    /// One line per request, when the access log is on: at completion, or
    /// when the exchange ends early (status 0 if nothing was sent).
    private func logAccess() {
        guard worker.accessLog != nil, !accessLogged else { return }
        accessLogged = true
        var cache = accessCache[...]
        let prefix = Array("Cache-Status: ".utf8), name = Array("larder; ".utf8)
        if cache.starts(with: prefix) { cache = cache.dropFirst(prefix.count) }
        if cache.starts(with: name) { cache = cache.dropFirst(name.count) }
        while let last = cache.last, last == 0x0D || last == 0x0A { cache = cache.dropLast() }
        worker.logAccess(client: connection.peer, method: request.method, target: request.target, status: accessStatus,
                         bodyBytes: accessBodyBytes ?? receivedBody,
                         milliseconds: EventLoop.nowMilliseconds() &- startMilliseconds,
                         cache: cache.isEmpty ? "-" : String(decoding: cache, as: UTF8.self))
    }

    /// RFC 9110 section 9.2.2: idempotent methods may be retried when the
    /// connection fails; a streamed request body cannot be replayed.
    private var mayRetry: Bool {
        guard !responseStarted, failedAttempts < worker.configuration.upstreamRetries, request.framing == .none else { return false }
        switch request.method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE": return true
        default: return false
        }
    }

    // MARK: finishing a store without its client

    /// Whether the fetch should go on after the client left: a storable
    /// response small enough (finish_store_limit) is completed and stored,
    /// so the work is not wasted and collapsed waiters still get it.
    private var shouldFinishWithoutClient: Bool {
        guard transfer != nil, !answeredFromStore else { return false }
        if broadcast?.hasFollowers ?? false { return true }  // collapsed requests are streaming it
        guard store != nil else { return false }
        let limit = worker.configuration.finishStoreLimitBytes
        return limit > 0 && max(expectedLength ?? 0, receivedBody) <= limit
    }

    private func becomeOrphan() {
        orphaned = true
        worker.adopt(self)
        if upstreamPaused {
            upstreamPaused = false
            transfer?.resume()
        }
    }

    /// The orphaned fetch is over (stored or not): waiters may go on.
    private func abandonOrphan() {
        guard orphaned else { return }
        orphaned = false
        broadcast?.finish(.failed)  // no-op when it completed
        transfer?.cancel()
        transfer = nil
        releaseLeadership()
        worker.release(self)
    }

    // MARK: collapsing

    /// Whether this exchange leads a collapsed fetch of its key.
    private var leading = false
    private var waitingForLeader = false
    private var collapsed = false
    private var waitTimer: TimerID = .none

    /// A cacheable fetch is about to go upstream: lead it, or wait for the
    /// request already fetching this URL. Returns true when waiting.
    private func waitForLeader() -> Bool {
        guard request.method == "GET", !collapsed else { return false }
        let loop = worker.loop
        switch worker.collapser.lead(key, loop: loop, wake: { [weak self] (fetch: SharedFetch?) in self?.leaderDone(fetch) }) {
        case .leader:
            leading = true
            return false
        case .following(let fetch):
            collapsed = true
            if suits(fetch) {
                WorkerStats.bump(worker.counters.collapsed)
                follow(fetch)
                return true
            }
            return false
        case .waiting:
            break
        }
        waitingForLeader = true
        WorkerStats.bump(worker.counters.collapsed)
        // Bounded: a leader that takes too long stops being waited for.
        waitTimer = loop.schedule(after: UInt64(worker.configuration.upstream.responseTimeoutMilliseconds)) { [weak self] in
            self?.leaderDone()
        }
        return true
    }

    /// The leader finished (or the wait timed out): serve what it stored
    /// when it suits this request, else fetch on our own.
    private func leaderDone(_ fetch: SharedFetch? = nil) {
        guard waitingForLeader, !finished else { return }
        waitingForLeader = false
        collapsed = true
        worker.loop.cancel(waitTimer)
        if let fetch {
            // The leader's response is streaming in: take it as it arrives,
            // unless it is another variant than this request's.
            if suits(fetch) { follow(fetch) } else { forward() }
            return
        }
        let requestCC = CacheControl(request.combinedHeader("cache-control"))
        let facts = RequestFacts(cacheControl: requestCC, pragmaNoCache: false) { [request] in request.combinedHeader($0) }
        let now = EventLoop.wallSeconds()
        variants = worker.store.lookup(key)
        if case .fresh(let index, let age, _) = Lookup.decide(facts, variants, now: now, shared: shared),
           serveStored(variants[index], age: age, now: now,
                       cacheStatus: Array("Cache-Status: \(CacheStatus.forward(forwardReason, stored: false)); collapsed\r\n".utf8)) {
            return
        }
        forward()
    }

    /// Whether the shared response is the variant this request selects.
    private func suits(_ fetch: SharedFetch) -> Bool {
        for (name, value) in zip(fetch.head.varyNames, fetch.head.varyValues)
        where Vary.normalize(request.combinedHeader(name), field: name) != value {
            return false
        }
        return true
    }

    /// The leader, once its response is known storable: offer to share it
    /// with collapsed requests (published at once when some already wait).
    private func offerToShare() {
        guard canShare, request.method == "GET" else { return }
        if worker.collapser.offer(key, loop: worker.loop, share: { [weak self] in self?.shareRequested() }) { share() }
    }

    /// Still leading, not yet shared, and the body so far is in memory.
    private var canShare: Bool {
        guard leading, broadcast == nil, let pending = store else { return false }
        return pending.disk == nil
    }

    /// A request now waits for this key (on this loop): share if still possible.
    private func shareRequested() {
        if canShare { share() }
    }

    /// Publishes the response with the body received so far.
    private func share() {
        guard let pending = store else { return }
        let names = builder.variantFields(pending.headers, key: key)
        let head = SharedFetch.Head(status: pending.status, reason: pending.reason, headers: pending.headers, timing: pending.timing,
                                    contentLength: expectedLength, varyNames: names,
                                    varyValues: names.map { Vary.normalize(request.combinedHeader($0), field: $0) })
        let fetch = SharedFetch(head: head, limitBytes: 2 * max(worker.configuration.maxObjectBytes, 1 << 20))
        let soFar = pending.body.buffer
        if soFar.count > 0 { fetch.append(Bytes(soFar)) }
        broadcast = fetch
        worker.collapser.publish(key, fetch)
    }

    /// A collapsed request: answer with the leader's response, piece by
    /// piece as it arrives.
    private func follow(_ fetch: SharedFetch) {
        following = fetch
        responseStarted = true
        let head = fetch.head
        let noBody = head.status == 204 || head.status == 304 || head.status < 200
        if noBody { framing = .none }
        else if head.contentLength != nil { framing = .length }
        else if request.minorVersion == 1 { framing = .chunked }
        else { framing = .untilClose }
        let cacheStatus = CacheStatus.forward(forwardReason, stored: false) + "; collapsed"
        noteAnswer(head.status, cache: Array(cacheStatus.utf8), bodyBytes: nil)
        var out: [UInt8] = []
        out.reserveCapacity(512)
        ResponseSerializer.appendStatusLine(head.status, reason: head.reason, to: &out)
        for field in head.headers {
            if field.name.isField("age") || builder.isHidden(field.name) || field.name.isField("content-length") { continue }
            ResponseSerializer.appendField(field.name, field.value, to: &out)
        }
        if let length = head.contentLength, framing == .length || noBody && head.status != 204 {
            ResponseSerializer.appendContentLength(length, to: &out)
        }
        let now = EventLoop.wallSeconds()
        ResponseSerializer.appendField("age", String(Freshness.correctedInitialAge(head.timing) + max(0, Int(now - head.timing.responseTime))),
                                       to: &out)
        ResponseSerializer.appendField("cache-status", cacheStatus, to: &out)
        if !head.headers.contains(where: { $0.name.isField("date") }) { out.append(contentsOf: worker.dateHeader.current(now: now)) }
        if framing == .chunked { out.append(contentsOf: "Transfer-Encoding: chunked\r\n".utf8) }
        if framing == .untilClose { out.append(contentsOf: "Connection: close\r\n".utf8) } else { appendConnectionField(to: &out) }
        out.append(contentsOf: [0x0D, 0x0A])
        connection.enqueue(out)
        fetch.follow(ObjectIdentifier(self), loop: worker.loop) { [weak self] in self?.pullShared() }
        pullShared()
    }

    /// Queues what arrived since the last pull; finishes with the fetch.
    private func pullShared() {
        guard let fetch = following, !finished else { return }
        let (chunks, state) = fetch.read(ObjectIdentifier(self), from: followedChunks)
        for chunk in chunks {
            enqueueBody(chunk)
            receivedBody += chunk.count
        }
        followedChunks += chunks.count
        switch state {
        case .streaming:
            connection.flush()
        case .complete where framing != .untilClose:
            fetch.unfollow(ObjectIdentifier(self))
            following = nil
            if framing == .chunked { connection.enqueue(Array("0\r\n\r\n".utf8)) }
            complete()
        case .complete, .failed:
            // Close-delimited, or the fetch broke after the head was sent:
            // closing the connection ends (or cuts) the body.
            fetch.unfollow(ObjectIdentifier(self))
            following = nil
            finished = true
            logAccess()
            connection.exchangeAborted()
        }
    }

    private func releaseLeadership() {
        guard leading else { return }
        leading = false
        worker.collapser.release(key)
    }

    /// The client caught up: let a paused upstream continue.
    func outputDrained() {
        if upstreamPaused, let transfer {
            upstreamPaused = false
            transfer.resume()
        }
    }

    func cancel() {
        logAccess()
        finished = true
        worker.loop.cancel(waitTimer)
        if shouldFinishWithoutClient {
            becomeOrphan()
            return
        }
        broadcast?.finish(.failed)
        following?.unfollow(ObjectIdentifier(self))
        following = nil
        releaseLeadership()
        dropStore()
        transfer?.cancel()
        transfer = nil
    }
}
