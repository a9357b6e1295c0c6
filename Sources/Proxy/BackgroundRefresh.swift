import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream

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
    private var pending: (status: Int, reason: String?, headers: [(name: String, value: String)], timing: ResponseTiming,
                          tags: [String])?
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
        headers.removeAll { $0.name == "cache-control" || $0.name == "pragma" }
        UpstreamHeaders.addValidators(for: entry, among: variants, to: &headers)
        requestTime = EventLoop.wallSeconds()
        fetchToken = worker.store.fetchToken
        transfer = worker.upstream.start(
            UpstreamRequest(method: "GET", url: worker.configuration.upstreamBase + request.pathAndQuery, headers: headers, body: .none),
            delegate: self)
    }

    func upstreamDidReceiveHead(status: Int, reason: String?, headers: [(name: String, value: String)]) {
        let timing = ResponseTiming(requestTime: requestTime, responseTime: EventLoop.wallSeconds(),
                                    dateValue: StoredResponseBuilder.value("date", in: headers).flatMap(HTTPDate.parse),
                                    ageValue: Freshness.parseAge(StoredResponseBuilder.value("age", in: headers)) ?? 0)
        // Most responses have no Connection field: skip building the set.
        let nominated = HopByHop.nominated(inFields: headers)
        let strip = worker.configuration.stripTagHeaders
        let passed = headers.filter {
            !HopByHop.isHopByHop($0.name) && (nominated.isEmpty || !nominated.contains($0.name))
                && !(strip && ($0.name == "surrogate-key" || $0.name == "cache-tag"))
        }
        if status == 304 {
            let etag = StoredResponseBuilder.value("etag", in: passed)
            guard let selected = Validation.selectValidated(
                etag: etag, lastModified: StoredResponseBuilder.value("last-modified", in: passed),
                candidates: variants.map { (etag: $0.etag, lastModified: $0.lastModified) }).map({ variants[$0] })
                ?? (etag == nil ? entry : nil)
            else { return }
            let refreshed = worker.builder.refresh(selected, with: passed, timing: timing)
            if !refreshed.cacheControl.noStore { worker.store.insert(refreshed, firstTierOnly: !toDisk, fetchedSince: fetchToken) }
            return
        }
        if worker.builder.decide(request: request, status: status, headers: passed, timing: timing) == .store {
            pending = (status, reason, passed, timing, worker.builder.tags(headers, key: entry.key))
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
        let expected = StoredResponseBuilder.value("content-length", in: pending.headers).flatMap { Int($0) }
        if let expected, expected != body.count {
            body.discard()
            return
        }
        let stored = worker.builder.build(key: entry.key, status: pending.status, reason: pending.reason,
                                          headers: pending.headers, body: body.buffer,
                                          timing: pending.timing, tags: pending.tags,
                                          varyFrom: { [request] in request.combinedHeader($0) })
        body.discard()
        if worker.store.insert(stored, firstTierOnly: !toDisk, fetchedSince: fetchToken) { WorkerStats.bump(worker.counters.stored) }
    }
}
