import CacheSemantics
import CacheStorage
import Compression
import EventLoop
import HTTP1
import HTTPHeaders

/// A response on its way into the store: the upstream response (its head
/// is what collapsed requests are shared) and the writer taking its body.
struct PendingStore {
    let response: UpstreamResponse
    private var writer: StoreWriter
    /// `compress`: the head of the copy stored gzip encoded, used when the
    /// body was held in memory and compressing made it smaller.
    private let compressedHead: StoredHead?

    fileprivate init?(_ response: UpstreamResponse, head: StoredHead, compressedHead: StoredHead?, worker: Worker,
                      fetchedSince: UInt64, toDisk: Bool) {
        self.response = response
        self.compressedHead = compressedHead
        writer = StoreWriter(head, into: worker.store, fetchedSince: fetchedSince, storedAt: EventLoop.wallSeconds(),
                             firstTierOnly: !toDisk, expectedLength: response.length)
        // A body too large for every tier, or a purge that won already: not stored.
        if writer.abandoned { return nil }
    }

    /// Whether the body goes to a streaming tier (not collected in memory).
    var isStreaming: Bool { writer.isStreaming }
    /// The body collected so far (empty once streaming).
    var collected: UnsafeRawBufferPointer { writer.collected }

    /// Takes body bytes; false once it has given up.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Bool { writer.append(bytes) }

    /// A disk slower than the upstream: true, keeping `resume` (run on
    /// `loop` once it caught up), when the transfer should pause. `resume`
    /// is made only for a streamed body (asked for every piece).
    func pauseIfBacklogged(on loop: EventLoop, resume: @autoclosure () -> () -> Void) -> Bool {
        guard writer.isStreaming else { return false }
        let resume = resume()
        return writer.pauseIfBacklogged { loop.execute { resume() } }
    }

    /// The body is whole: stores the response (true when a tier took it)
    /// and offers it to the fleet's shared tier (`sharedMark`: taken when
    /// the fetch began).
    mutating func commit(on worker: Worker, sharedMark: SharedMark?) -> Bool {
        guard commitWhole() else { return false }
        if let tier = worker.sharedTier, let mark = sharedMark, let entry = writer.committed { tier.store(entry, fetchedAt: mark) }
        return true
    }

    /// Commits the body as collected, or compressed (`compress`) when that
    /// is smaller. A body streamed to a tier is kept as it came.
    private mutating func commitWhole() -> Bool {
        guard let compressedHead, !writer.isStreaming, !writer.collected.isEmpty else { return writer.commit() }
        let compressed = Gzip.compress(writer.collected)
        guard compressed.count < writer.collected.count else { return writer.commit() }
        return compressed.withUnsafeBytes { writer.commit(as: compressedHead, body: $0) }
    }

    /// Nothing will be stored (too large, incomplete, failed).
    mutating func abort() { writer.abort() }
}

/// What an upstream response does to the cache (`UpstreamResponse.cacheEffect`),
/// carried out against the store: the same for a client's fetch and a
/// background refresh, so the two cannot drift.
extension Worker {
    /// Returns where the body goes when the response is to be stored.
    /// `fetchedSince`: the store's purge number when the request went out
    /// (a purge since then that matches keeps it out).
    func applyCacheEffect(of response: UpstreamResponse, to request: RequestHead, key: String, isCacheLookup: Bool,
                          variants: Variants, fetchedSince: UInt64, toDisk: Bool) -> PendingStore? {
        switch response.cacheEffect(of: request, isCacheLookup: isCacheLookup, builder: builder,
                                    largestBody: StoreWriter.largestBody(in: store, firstTierOnly: !toDisk)) {
        case .store(let directives):
            let tags = builder.tags(response.received, key: key)
            let head = builder.storedHead(key: key, status: response.status, reason: response.reason, headers: response.fields,
                                          timing: response.timing, tags: tags, directives: directives,
                                          varyFrom: { request.combinedHeader($0) })
            var compressed: StoredHead?
            if request.method == "GET",
               StoredCompression.applies(status: response.status, headers: response.fields, cc: directives.cc,
                                         types: builder.compression(for: key)) {
                compressed = builder.storedHead(key: key, status: response.status, reason: response.reason,
                                                headers: StoredCompression.fields(response.fields), timing: response.timing,
                                                tags: tags, directives: directives, varyNames: head.varyNames,
                                                varyFrom: { request.combinedHeader($0) })
            }
            return PendingStore(response, head: head, compressedHead: compressed, worker: self, fetchedSince: fetchedSince,
                                toDisk: toDisk)
        case .removeSuperseded:
            store.remove(key)
        case .updateStored:
            switch response.headUpdate(of: variants, builder: builder) {
            case .none: break
            case .remove: store.remove(key)
            case .replace(let refreshed): store.insert(refreshed, firstTierOnly: !toDisk, fetchedSince: fetchedSince)
            }
        case .invalidate:
            invalidate(after: request, key: key, response.received)
        case .none:
            break
        }
        return nil
    }

    /// RFC 9111 section 4.4: a successful unsafe request invalidates the
    /// target and the same-origin Location and Content-Location.
    private func invalidate(after request: RequestHead, key: String, _ headers: HeaderFields) {
        store.remove(key)
        let upstream = configuration.upstreamOrigin
        for name in ["location", "content-location"] {
            guard let reference = headers[name],
                  let target = Invalidation.key(for: reference, requestKey: request.pathAndQuery, upstreamAuthority: upstream.authority,
                                                upstreamPathPrefix: upstream.pathPrefix, clientAuthority: request.header("host"))
            else { continue }
            store.remove(configuration.routes.cacheKey(target))
        }
    }

    /// A 304 answered a conditional request (a client's, or a background
    /// refresh's): the stored variant it selects refreshed with its fields
    /// (section 4.3.4), and stored again when it may be. Nil when it names
    /// nothing held (ask again without validators). In a fleet the
    /// refreshed response is offered to the shared tier too (`sharedMark`:
    /// taken when the request went out).
    func applyNotModified(_ response: UpstreamResponse, validated: CachedResponse, among variants: Variants,
                          fetchedSince: UInt64, sharedMark: SharedMark?, toDisk: Bool) -> (response: CachedResponse, stored: Bool)? {
        guard let (refreshed, storable) = response.refreshing(validated, among: variants, builder: builder) else { return nil }
        if storable, storeRefreshed(refreshed, fetchedSince: fetchedSince, toDisk: toDisk), let tier = sharedTier,
           let sharedMark, refreshed.bodyFile == nil {
            tier.store(refreshed, fetchedAt: sharedMark)
        }
        WorkerStats.bump(counters.revalidations)
        return (refreshed, storable)
    }

    /// Stores a response refreshed by a 304 (true when a tier took it).
    @discardableResult
    func storeRefreshed(_ refreshed: CachedResponse, fetchedSince: UInt64, toDisk: Bool) -> Bool {
        guard store.insert(refreshed, firstTierOnly: !toDisk, fetchedSince: fetchedSince) else { return false }
        WorkerStats.bump(counters.stored)
        return true
    }
}
