import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

/// One request and its answer: from the cache, or from upstream while the
/// response streams to the client and, when storable, into the memory tier.
final class Exchange: UpstreamTransferDelegate {
    private unowned let connection: ClientConnection
    private let request: RequestHead
    private let worker: Worker
    private var transfer: UpstreamTransfer?
    private(set) var responseStarted = false
    private var finished = false
    private var upstreamPaused = false

    // Cache bookkeeping.
    private let isCacheLookup: Bool
    private let key: String
    private var forwardReason: CacheStatus.Forward = .method
    private var requestTime: Int64 = 0

    // Response streaming.
    private enum ClientFraming { case none, length, chunked, untilClose }
    private var framing: ClientFraming = .none
    private var expectedLength: Int?
    private var receivedBody = 0
    private var store: PendingStore?

    /// What will become a `CachedResponse` when the body is complete.
    private struct PendingStore {
        var status: Int
        var headers: [(name: String, value: String)]
        var timing: ResponseTiming
        var lifetime: Int
        var cacheControl: CacheControl
        var varyNames: [String]
        var varyValues: [String?]
        var body = ByteAccumulator()
    }

    init(head: RequestHead, connection: ClientConnection) {
        self.request = head
        self.connection = connection
        self.worker = connection.worker
        isCacheLookup = head.method == "GET" || head.method == "HEAD"
        key = head.pathAndQuery
    }

    private var keepAlive: Bool { request.keepAlive && !worker.draining }

    func start() {
        if isCacheLookup {
            let requestCC = CacheControl(request.combinedHeader("cache-control"))
            let variants = worker.memory.lookup(key)
            if !variants.isEmpty {
                if let entry = variants.last(where: varyMatches) {
                    let now = EventLoop.wallSeconds()
                    let age = entry.currentAge(now: now)
                    let pragma = request.header("pragma")?.lowercased().contains("no-cache") ?? false
                    switch Reuse.decide(lifetime: entry.lifetime, currentAge: age, request: requestCC,
                                        response: entry.cacheControl, requestPragmaNoCache: pragma) {
                    case .fresh(let ttl):
                        serveHit(entry, age: age, ttl: ttl, now: now)
                        return
                    case .stale:
                        forwardReason = requestCC.noCache || pragma ? .request : .stale
                    }
                } else {
                    forwardReason = .varyMiss
                }
            } else {
                forwardReason = .uriMiss
            }
            if forwardReason == .stale { ProxyStats.bump(worker.stats.staleForwards) } else { ProxyStats.bump(worker.stats.misses) }
        }
        forward()
    }

    private func varyMatches(_ entry: CachedResponse) -> Bool {
        for (i, name) in entry.varyNames.enumerated()
        where Vary.normalize(request.combinedHeader(name)) != entry.varyValues[i] {
            return false
        }
        return true
    }

    // MARK: hit

    private func serveHit(_ entry: CachedResponse, age: Int, ttl: Int, now: Int64) {
        ProxyStats.bump(worker.stats.hits)
        responseStarted = true
        var tail: [UInt8] = []
        tail.reserveCapacity(128)
        tail.append(contentsOf: "Age: ".utf8)
        ResponseSerializer.appendDecimal(age, to: &tail)
        tail.append(contentsOf: [0x0D, 0x0A])
        tail.append(contentsOf: worker.dateHeader.current(now: now))
        tail.append(contentsOf: CacheStatus.hit(ttl: ttl))
        appendConnectionField(to: &tail)
        tail.append(contentsOf: [0x0D, 0x0A])
        connection.enqueue(entry.headPrefix)
        connection.enqueue(tail)
        if request.method != "HEAD" { connection.enqueue(entry.body) }
        complete()
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
        var headers: [(name: String, value: String)] = []
        headers.reserveCapacity(request.headers.count + 2)
        var forwardedFor: String?
        for field in HopByHop.strip(request.headers) {
            switch field.name {
            case "host", "content-length", "expect", "larder-cache-policy": continue
            case "x-forwarded-for": forwardedFor = forwardedFor.map { $0 + ", " + field.value } ?? field.value
            default: headers.append((field.name, field.value))
            }
        }
        headers.append(("x-forwarded-for", forwardedFor.map { $0 + ", " + connection.peer } ?? connection.peer))
        if let host = request.header("host") { headers.append(("x-forwarded-host", host)) }
        headers.append(("x-forwarded-proto", "http"))

        let body: UpstreamRequest.Body
        switch request.framing {
        case .none: body = .none
        case .contentLength(let n): body = .streamed(length: n)
        case .chunked: body = .streamed(length: nil)
        }
        let target = request.target == "*" ? "*" : key
        let upstreamRequest = UpstreamRequest(method: request.method, url: worker.configuration.upstreamBase + target,
                                              headers: headers, body: body)
        requestTime = EventLoop.wallSeconds()
        transfer = worker.upstream.start(upstreamRequest, delegate: self)
        transfer?.onBodyDrained = { [weak connection] in connection?.uploadDrained() }
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) { transfer?.supply(bytes) }

    /// Whether request-body bytes are piling up faster than the upstream reads
    /// them; the connection stops reading from the client meanwhile.
    var isUploadCongested: Bool {
        (transfer?.bufferedBodyBytes ?? 0) >= worker.configuration.clientBufferBytes
    }
    func requestBodyEnd() { transfer?.finishBody() }

    // MARK: UpstreamTransferDelegate

    func upstreamDidReceiveHead(status: Int, headers: [(name: String, value: String)]) {
        guard !finished else { return }
        responseStarted = true
        let responseTime = EventLoop.wallSeconds()
        let nominated = HopByHop.nominated(byConnectionValues: headers.lazy.filter { $0.name == "connection" }.map(\.value))
        var passed: [(name: String, value: String)] = []
        passed.reserveCapacity(headers.count)
        for field in headers {
            if HopByHop.names.contains(field.name) || nominated.contains(field.name) { continue }
            if field.name == "surrogate-key" || field.name == "cache-tag" { continue }
            passed.append(field)
        }

        let noBody = request.method == "HEAD" || status == 204 || status == 304 || status < 200
        expectedLength = headers.first { $0.name == "content-length" }.flatMap { Int($0.value) }
        if noBody { framing = .none }
        else if expectedLength != nil { framing = .length }
        else if request.minorVersion == 1 { framing = .chunked }
        else { framing = .untilClose }

        var cacheStatus: String?
        var ageValue: Int?
        if isCacheLookup {
            let timing = ResponseTiming(requestTime: requestTime, responseTime: responseTime,
                                        dateValue: value("date", in: headers).flatMap(HTTPDate.parse),
                                        ageValue: Freshness.parseAge(value("age", in: headers)) ?? 0)
            ageValue = Freshness.correctedInitialAge(timing)
            store = pendingStore(status: status, headers: passed, timing: timing)
            if request.method == "GET", store == nil || (expectedLength ?? 0) > worker.configuration.maxObjectBytes {
                store = nil
            }
            if isCacheLookup && status < 400 && request.method == "GET" && store == nil {
                // A fresh answer that cannot be stored replaces nothing: drop a stale copy.
                worker.memory.remove(key)
            }
            cacheStatus = CacheStatus.forward(forwardReason, stored: store != nil)
        } else {
            cacheStatus = CacheStatus.forward(.method, stored: false)
            if status < 400 { invalidateAfterUnsafe(headers) }
        }

        var head: [UInt8] = []
        head.reserveCapacity(512)
        head.append(contentsOf: "HTTP/1.1 ".utf8)
        ResponseSerializer.appendDecimal(status, to: &head)
        head.append(0x20)
        head.append(contentsOf: ResponseSerializer.reasonPhrase(status).utf8)
        head.append(contentsOf: [0x0D, 0x0A])
        for field in passed {
            if field.name == "age" && ageValue != nil { continue }
            if field.name == "content-length" && framing != .length && !noBody { continue }
            ResponseSerializer.appendField(field.name, field.value, to: &head)
        }
        if let ageValue { ResponseSerializer.appendField("age", String(ageValue), to: &head) }
        if let cacheStatus { ResponseSerializer.appendField("cache-status", cacheStatus, to: &head) }
        // RFC 9110 section 6.6.1: a forwarded response without Date gets one.
        if !passed.contains(where: { $0.name == "date" }) { head.append(contentsOf: worker.dateHeader.current(now: responseTime)) }
        if framing == .chunked { head.append(contentsOf: "Transfer-Encoding: chunked\r\n".utf8) }
        if framing == .untilClose { head.append(contentsOf: "Connection: close\r\n".utf8) }
        else { appendConnectionField(to: &head) }
        head.append(contentsOf: [0x0D, 0x0A])
        connection.enqueue(head)
        connection.flush()
    }

    private func value(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { $0.name == name }?.value
    }

    private func combined(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        let values = headers.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// The storage decision for a GET response, or nil when it is not stored.
    private func pendingStore(status: Int, headers: [(name: String, value: String)], timing: ResponseTiming) -> PendingStore? {
        guard request.method == "GET" else { return nil }
        let responseCC = CacheControl(combined("cache-control", in: headers))
        let requestCC = CacheControl(request.combinedHeader("cache-control"))
        let shared = worker.configuration.sharedCache
        let lifetime = Freshness.lifetime(responseCC, dateValue: timing.dateValue, expires: value("expires", in: headers),
                                          responseTime: timing.responseTime, shared: shared)
        let decision = Storability.decide(method: request.method, status: status, request: requestCC, response: responseCC,
                                          hasAuthorization: request.header("authorization") != nil, shared: shared,
                                          hasExplicitFreshness: lifetime != nil)
        guard decision == .store, let names = Vary.fieldNames(combined("vary", in: headers)) else { return nil }
        let values = names.map { Vary.normalize(request.combinedHeader($0)) }
        return PendingStore(status: status, headers: headers, timing: timing, lifetime: lifetime ?? 0,
                            cacheControl: responseCC, varyNames: names, varyValues: values)
    }

    /// RFC 9111 section 4.4: a successful unsafe request invalidates the target.
    private func invalidateAfterUnsafe(_ headers: [(name: String, value: String)]) {
        guard request.method != "OPTIONS", request.method != "TRACE" else { return }
        worker.memory.remove(key)
        for name in ["location", "content-location"] {
            guard let target = value(name, in: headers) else { continue }
            if target.first == "/" { worker.memory.remove(target) }
            else if target.hasPrefix(worker.configuration.upstreamBase + "/") {
                worker.memory.remove(String(target.dropFirst(worker.configuration.upstreamBase.count)))
            }
        }
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard !finished else { return true }
        if framing == .none { return true }
        if connection.isCongested {
            upstreamPaused = true
            return false
        }
        if framing == .chunked {
            connection.enqueue(ResponseSerializer.chunkHeader(bytes.count))
            connection.enqueue(copying: bytes)
            connection.enqueue([0x0D, 0x0A])
        } else {
            connection.enqueue(copying: bytes)
        }
        receivedBody += bytes.count
        if store != nil {
            if receivedBody > worker.configuration.maxObjectBytes {
                store?.body.discard()
                store = nil
            } else {
                store?.body.append(bytes)
            }
        }
        connection.flush()
        return true
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        guard !finished else { return }
        transfer = nil
        if let error {
            ProxyStats.bump(worker.stats.upstreamErrors)
            store?.body.discard()
            store = nil
            if responseStarted {
                worker.logger.warning("upstream failed mid-response for \(request.method) \(key): \(error.message)")
                finished = true
                connection.exchangeAborted()
                return
            }
            worker.logger.info("upstream error for \(request.method) \(key): \(error.message)")
            responseStarted = true
            let status: Int
            if case .timedOut = error { status = 504 } else { status = 502 }
            var extra: [HeaderField] = []
            if isCacheLookup { extra.append(HeaderField(name: "cache-status", value: CacheStatus.forward(forwardReason, stored: false, detail: "upstream-error"))) }
            connection.enqueue(ResponseSerializer.simple(status: status, body: error.message, close: !keepAlive, extra: extra))
            complete()
            return
        }
        if framing == .length, let expectedLength, receivedBody != expectedLength {
            // The upstream promised more (or less) than it sent.
            store?.body.discard()
            store = nil
            finished = true
            connection.exchangeAborted()
            return
        }
        if framing == .chunked { connection.enqueue(Array("0\r\n\r\n".utf8)) }
        if var pending = store {
            store = nil
            commit(&pending)
        }
        if framing == .untilClose {
            finished = true
            connection.exchangeAborted()  // close-delimited: closing ends the body
            return
        }
        complete()
    }

    private func commit(_ pending: inout PendingStore) {
        let body = pending.body.take()
        var stored: [HeaderField] = []
        for field in pending.headers {
            switch field.name {
            case "date", "age", "content-length", "transfer-encoding", "connection", "keep-alive": continue
            default: stored.append(HeaderField(name: field.name, value: field.value))
            }
        }
        var prefix = ResponseSerializer.headPrefix(status: pending.status, headers: stored)
        if pending.status != 204 && pending.status != 304 {
            ResponseSerializer.appendField("content-length", String(body.count), to: &prefix)
        }
        let entry = CachedResponse(key: key, status: pending.status, headPrefix: Bytes(prefix), body: body,
                                   headers: pending.headers, timing: pending.timing, lifetime: pending.lifetime,
                                   cacheControl: pending.cacheControl, varyNames: pending.varyNames,
                                   varyValues: pending.varyValues)
        if worker.memory.insert(entry) { ProxyStats.bump(worker.stats.stored) }
    }

    private func complete() {
        finished = true
        connection.exchangeFinished(keepAlive: keepAlive)
    }

    /// The client caught up: let a paused upstream continue.
    func outputDrained() {
        if upstreamPaused, let transfer {
            upstreamPaused = false
            transfer.resume()
        }
    }

    func cancel() {
        finished = true
        store?.body.discard()
        store = nil
        transfer?.cancel()
        transfer = nil
    }
}
