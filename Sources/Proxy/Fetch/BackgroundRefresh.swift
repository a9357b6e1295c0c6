import CacheSemantics
import CacheStorage
import EdgeControls
import EventLoop
import HTTP1
import Telemetry
import Upstream
import HTTPHeaders

/// A GET with no client waiting: it revalidates a stored response
/// (stale-while-revalidate: a conditional GET), or fetches the whole of a
/// response of which a range was asked (`entry` nil: the range's client
/// got its 206 meanwhile); for a query keyed by its body (a QUERY, a
/// cached POST) the same method with that body. Its answer does to the cache what it would do
/// to a client's (`Worker.applyCacheEffect`): a 304 refreshes the stored
/// response, a storable 200 replaces it (streamed to disk when large), a
/// current answer that cannot be stored removes it; an error leaves it as
/// it was. It asks for the whole: a Range of the client's is not sent.
final class BackgroundRefresh: UpstreamTransferDelegate {
    private unowned let upstream: UpstreamAccess
    private unowned let cache: CacheAccess
    private let key: String
    private let entry: CachedResponse?
    private let variants: Variants
    private let request: RequestHead
    /// A body-keyed query's body, sent again with its own method.
    private let body: [UInt8]?
    private var transfer: (any UpstreamTransferControl)?
    private var requestTime: Int64 = 0
    private var sentMicroseconds: UInt64 = 0
    /// The refresh's way into the store, made when it began (a purge since wins).
    private var handler: MissHandler?
    /// A storable response whose body is on its way into the store.
    private var pending: PendingStore?
    private var received = 0
    private let onFinish: () -> Void

    init(upstream: UpstreamAccess, key: String, validating entry: CachedResponse?, variants: Variants, request: RequestHead,
         body: [UInt8]? = nil, onFinish: @escaping () -> Void) {
        self.upstream = upstream
        cache = upstream.cache
        self.key = key
        self.entry = entry
        self.variants = variants
        self.request = request
        self.body = body
        self.onFinish = onFinish
    }

    func start(peer: String) {
        var headers = UpstreamHeaders.forward(request, peer: peer, forwardHost: upstream.configuration.forwardHost,
                                              preserveHost: upstream.configuration.preserveHost,
                                              passed: upstream.configuration.passRequestHeaders)
        headers.remove("cache-control")
        headers.remove("pragma")
        headers.remove("range")
        headers.remove("if-range")
        UpstreamHeaders.normalizeAcceptEncoding(&headers, for: request)
        if let entry { UpstreamHeaders.addValidators(for: entry, among: variants, to: &headers) }
        let route = upstream.configuration.routes.match(key)
        if let edge = route != nil ? route!.rules : upstream.configuration.edge {
            EdgeGate.applyRequestRules(edge, to: &headers, RequestValues(host: Exchange.hostName(request.header("host")),
                                                                         clientAddress: peer, requestID: RequestID.next()))
        }
        requestTime = cache.clock.now()
        sentMicroseconds = EventLoop.nowMicroseconds()
        handler = cache.store.missHandler(toDisk: upstream.configuration.routes.match(key)?.disk ?? true)
        // The route's upstream pool, as the client's own fetch would take.
        let configuration = upstream.configuration
        let server = configuration.pool(named: configuration.routes.match(key)?.upstream).pick(key: key, now: upstream.loop.now())
        server.started()
        transfer = upstream.requester.start(
            UpstreamRequest(method: body == nil && request.method != "QUERY" ? "GET" : request.method, url: server.base + request.pathAndQuery, headers: headers,
                            body: body.map { .streamed(length: $0.count) } ?? .none),
            delegate: self)
        if let body {
            body.withUnsafeBytes { transfer?.supply($0) }
            transfer?.finishBody()
        }
    }

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: HeaderFields) {
        upstream.counters.latency.record(.upstreamHead, microseconds: Int(EventLoop.nowMicroseconds() &- sentMicroseconds))
        var headers = headers
        if cache.builder.stripsCookies(key) { headers.remove("set-cookie") }
        let response = UpstreamResponse(status: status, reason: reason, headers: headers, requestTime: requestTime,
                                        responseTime: cache.clock.now(), stripTagHeaders: upstream.configuration.stripTagHeaders)
        if case .invalid = response.framing { return }  // the stored response stays as it was
        guard let handler else { return }
        if status == 304 {
            guard let entry else { return }
            _ = cache.applyNotModified(response, validated: entry, among: variants, through: handler)
            return
        }
        if status >= 500 { return }  // stale-if-error keeps serving what is stored
        pending = cache.applyCacheEffect(of: response, to: request, key: key, isCacheLookup: true, variants: variants,
                                          through: handler)
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard pending != nil else { return true }
        // A disk slower than the upstream holds the transfer, as for a client's fetch.
        if pending!.pauseIfBacklogged(on: upstream.loop, resume: { [weak self] in self?.transfer?.resume() }) { return false }
        received += bytes.count
        if !pending!.append(bytes) { pending = nil }
        return true
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        transfer = nil
        defer { onFinish() }
        guard var pending else { return }
        self.pending = nil
        if error == nil, BodyEnd.isWhole(expected: pending.response.length, received: received) {
            if pending.commit(on: cache) { WorkerStats.bump(upstream.counters.stored) }
        } else {
            pending.abort()  // incomplete: never stored (section 3.3)
        }
    }
}
