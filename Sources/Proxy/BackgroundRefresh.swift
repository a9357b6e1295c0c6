import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// Revalidates a stored response with no client waiting (stale-while-
/// revalidate): a conditional GET; a 304 refreshes the stored response, a
/// storable 200 replaces it, anything else leaves it as it was.
final class BackgroundRefresh: UpstreamTransferDelegate {
    private unowned let worker: Worker
    private let entry: CachedResponse
    private let variants: Variants
    private let request: RequestHead
    private var transfer: UpstreamTransfer?
    private var requestTime: Int64 = 0
    /// A storable response whose body is being collected.
    private var pending: UpstreamResponse?
    /// The store's purge number when the refresh began: a purge since wins.
    private var fetchToken: UInt64 = 0
    private var body = ByteAccumulator()
    private let onFinish: () -> Void
    private var toDisk: Bool { worker.configuration.routes.match(entry.key)?.disk ?? true }

    init(worker: Worker, entry: CachedResponse, variants: Variants, request: RequestHead,
         onFinish: @escaping () -> Void) {
        self.worker = worker
        self.entry = entry
        self.variants = variants
        self.request = request
        self.onFinish = onFinish
    }

    func start(peer: String) {
        var headers = UpstreamHeaders.forward(request, peer: peer, forwardHost: worker.configuration.forwardHost,
                                              passed: worker.configuration.passRequestHeaders)
        headers.remove("cache-control")
        headers.remove("pragma")
        UpstreamHeaders.addValidators(for: entry, among: variants, to: &headers)
        requestTime = EventLoop.wallSeconds()
        fetchToken = worker.store.fetchToken
        transfer = worker.upstream.start(
            UpstreamRequest(method: "GET", url: worker.configuration.upstreamBase + request.pathAndQuery, headers: headers, body: .none),
            delegate: self)
    }

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: HeaderFields) {
        let response = UpstreamResponse(status: status, reason: reason, headers: headers, requestTime: requestTime,
                                        responseTime: EventLoop.wallSeconds(), stripTagHeaders: worker.configuration.stripTagHeaders)
        if case .invalid = response.framing { return }  // the stored response stays as it was
        if status == 304 {
            guard let (refreshed, storable) = response.refreshing(entry, among: variants, builder: worker.builder), storable else { return }
            worker.store.insert(refreshed, firstTierOnly: !toDisk, fetchedSince: fetchToken)
            return
        }
        if worker.builder.decide(request: request, status: status, headers: response.fields, timing: response.timing) == .store {
            pending = response
        }
    }

    func upstreamDidReceiveBody(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard pending != nil else { return true }
        if body.count + bytes.count > worker.configuration.maxObjectBytes {
            pending = nil
            body.discard()
        } else {
            body.append(bytes)
        }
        return true
    }

    func upstreamDidComplete(_ error: UpstreamError?) {
        transfer = nil
        defer { onFinish() }
        guard error == nil, let pending else {
            body.discard()
            return
        }
        if let expected = pending.length, expected != body.count {
            body.discard()
            return
        }
        let stored = worker.builder.build(key: entry.key, status: pending.status, reason: pending.reason,
                                          headers: pending.fields, body: body.buffer, timing: pending.timing,
                                          tags: worker.builder.tags(pending.received, key: entry.key),
                                          varyFrom: { [request] in request.combinedHeader($0) })
        body.discard()
        if worker.store.insert(stored, firstTierOnly: !toDisk, fetchedSince: fetchToken) { WorkerStats.bump(worker.counters.stored) }
    }
}
