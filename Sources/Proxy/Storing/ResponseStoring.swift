import CacheSemantics
import CacheStorage
import Compression
import EventLoop
import HTTP1
import HTTPHeaders
import Routing
import Telemetry

/// A response on its way into the store: the upstream response (its head
/// is what collapsed requests are shared) and the writer taking its body.
struct PendingStore {
    let response: UpstreamResponse
    private var writer: StoreWriter
    /// `compress`: the head of the copy stored gzip encoded, used when the
    /// body was held in memory and compressing made it smaller.
    private let compressedHead: StoredHead?
    /// The fetch's way into the store (the compressed copy goes the same way).
    private let handler: MissHandler

    fileprivate init?(_ response: UpstreamResponse, head: StoredHead, compressedHead: StoredHead?, cache: CacheAccess,
                      through handler: MissHandler) {
        self.response = response
        self.compressedHead = compressedHead
        self.handler = handler
        writer = handler.writer(head, storedAt: cache.clock.now(), expectedLength: response.length)
        // A body too large for every tier, or a purge that won already: not stored.
        if writer.abandoned { return nil }
    }

    /// The piece stored, once committed (nil for a whole response).
    var storedPiece: PartialContent.Piece? { writer.committed.flatMap { $0.status == 206 ? $0.piece : nil } }

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

    /// The body is whole: stores the response (true when a tier took it);
    /// the writer offers it to the fleet's shared tier.
    mutating func commit(on cache: CacheAccess) -> Bool {
        switch response.status == 206 ? pieceFate(on: cache) : .alone {
        case .joined(let head, let body):
            guard body.withUnsafeBytes({ writer.commit(as: head, body: $0) }) else { return false }
        case .notStored:
            writer.abort()
            return false
        case .alone:
            guard commitWhole(on: cache) else { return false }
        }
        return true
    }

    /// Commits the body as collected; with `compress`, its gzip copy is made
    /// on an I/O thread (never on the loop: a large body took it for tens of
    /// milliseconds) and takes its place when smaller. A body streamed to a
    /// tier is kept as it came.
    private mutating func commitWhole(on cache: CacheAccess) -> Bool {
        guard let compressedHead, !writer.isStreaming, !writer.collected.isEmpty else { return writer.commit() }
        guard writer.commit(), let stored = writer.committed else { return false }
        cache.storeCompressed(stored, as: compressedHead, through: handler)
        return true
    }

    /// Where a 206 goes (RFC 9111 section 3.4).
    private enum PieceFate {
        /// Joined with what was stored (one piece, or the whole as a 200),
        /// or a piece split from a multipart body.
        case joined(StoredHead, [UInt8])
        /// Nothing stored: a whole response of the variant is stored, which
        /// the piece cannot join (the whole answers every range), or the
        /// body is not what its Content-Range (or multipart framing) says.
        case notStored
        /// Stored as it came, in place of a piece of the variant.
        case alone
    }

    /// A single-range 206 joined with what is stored, or stored alone (a
    /// streamed one always is); a multipart/byteranges 206 split into its
    /// pieces, the one that joins what is stored (else the largest) kept:
    /// a variant holds one piece.
    private func pieceFate(on cache: CacheAccess) -> PieceFate {
        let received = writer.collected
        if let new = PartialContent.piece(contentRange: response.fields["content-range"]) {
            guard new.count == writer.bodyBytes else { return .notStored }
            if writer.isStreaming { return .alone }
            // All of it: its head is the 200 it amounts to already (`Worker.pendingStore`).
            if new.isWhole { return .alone }
            return joined(new, received, fields: response.fields, on: cache) ?? .alone
        }
        guard !writer.isStreaming, let boundary = MultipartByteranges.boundary(contentType: response.fields["content-type"]),
              let parts = MultipartByteranges.parts(of: received, boundary: boundary) else { return .notStored }
        let segments = PartialContent.segments(of: parts.map(\.piece)).map { segment in
            var body = [UInt8](repeating: 0, count: segment.piece.count)
            body.withUnsafeMutableBytes { out in
                for index in segment.parts {
                    let part = parts[index]
                    out.baseAddress!.advanced(by: part.piece.first - segment.piece.first)
                        .copyMemory(from: received.baseAddress!.advanced(by: part.bytes.lowerBound), byteCount: part.piece.count)
                }
            }
            return (piece: segment.piece, body: body, type: parts[segment.parts[0]].contentType)
        }
        var largest: (piece: PartialContent.Piece, body: [UInt8], fields: HeaderFields)?
        for (index, segment) in segments.enumerated() {
            var fields = response.fields
            fields.remove("content-type")
            if let type = segment.type { fields.append("content-type", type) }
            // The other segments join too, through what is stored (the
            // parts on both sides of a stored piece completed around it).
            var others = segments.map { ($0.piece, $0.body) }
            others.remove(at: index)
            if let fate = segment.body.withUnsafeBytes({ joined(segment.piece, $0, fields: fields, alongside: others, on: cache) }) {
                return fate
            }
            if segment.piece.count > largest?.piece.count ?? -1 { largest = (segment.piece, segment.body, fields) }
        }
        guard let largest else { return .notStored }
        return .joined(storedHead(largest.piece, fields: largest.fields, on: cache), largest.body)
    }

    /// `new` (its bytes `received`, its response's `fields`) joined with
    /// the stored pieces (or a stored whole response) of the same
    /// representation that it touches, one after another (a piece that
    /// bridges two joins both): one piece, or a 200 once they make up the
    /// whole. `.notStored` when a whole is stored that it cannot join; nil
    /// when nothing stored joins it.
    private func joined(_ new: PartialContent.Piece, _ received: UnsafeRawBufferPointer, fields: HeaderFields,
                        alongside others: [(PartialContent.Piece, [UInt8])] = [], on cache: CacheAccess) -> PieceFate? {
        let head = writer.head
        let etag = fields["etag"]
        // On the worker's loop: what can be looked up without waiting for
        // the disk (only pieces in memory join anyway; one whose read would
        // wait leaves this one stored alone).
        let variants = (cache.store.lookupWithoutBlocking(head.key) ?? Variants()).filter { $0.varyValues == head.varyValues }
        var candidates = variants.reversed().filter { $0.storedBody.isInMemory }
        var (piece, body) = (new, [UInt8](received))
        func join(_ old: PartialContent.Piece, _ oldBody: UnsafeRawBufferPointer) {
            let whole = PartialContent.joined(old, piece)
            var joinedBody = [UInt8](repeating: 0, count: whole.count)
            joinedBody.withUnsafeMutableBytes { out in
                out.baseAddress!.advanced(by: old.first - whole.first).copyMemory(from: oldBody.baseAddress!, byteCount: old.count)
                body.withUnsafeBytes { out.baseAddress!.advanced(by: piece.first - whole.first).copyMemory(from: $0.baseAddress!, byteCount: piece.count) }
            }
            (piece, body) = (whole, joinedBody)
        }
        var others = others
        while true {
            if let index = candidates.firstIndex(where: { stored in
                guard let old = Self.held(by: stored) else { return false }
                return PartialContent.mayJoin(old, etag: stored.etag, piece, etag: etag)
            }) {
                let stored = candidates.remove(at: index)
                join(Self.held(by: stored)!, stored.body)
            } else if piece != new, let index = others.firstIndex(where: { PartialContent.mayJoin($0.0, etag: etag, piece, etag: etag) }) {
                // Once joined with what is stored: the response's own other pieces it now touches.
                let (other, otherBody) = others.remove(at: index)
                otherBody.withUnsafeBytes { join(other, $0) }
            } else {
                break
            }
        }
        if piece != new { return .joined(storedHead(piece, fields: fields, on: cache), body) }
        return variants.contains { $0.status == 200 } ? .notStored : nil
    }

    /// The bytes a stored response holds in memory (a 200: all of them),
    /// when its body is what it says.
    private static func held(by stored: CachedResponse) -> PartialContent.Piece? {
        let piece = stored.status == 200 ? PartialContent.Piece(first: 0, last: stored.bodyLength - 1, length: stored.bodyLength)
            : stored.piece
        guard let piece, piece.count == stored.body.count else { return nil }
        return piece
    }

    /// The head of a stored piece (a 200 when it is the whole) with
    /// `fields` and its own Content-Range, for this response's key, variant
    /// and tags.
    private func storedHead(_ piece: PartialContent.Piece, fields: HeaderFields, on cache: CacheAccess) -> StoredHead {
        var fields = fields
        fields.remove("content-range")
        if !piece.isWhole { fields.append("content-range", piece.contentRange) }
        let head = writer.head, names = head.varyNames, values = head.varyValues
        return cache.builder.storedHead(key: head.key, status: piece.isWhole ? 200 : 206,
                                         reason: piece.isWhole ? "OK" : response.reason, headers: fields,
                                         timing: response.timing, tags: head.tags, varyNames: names) { name in
            names.firstIndex(of: name).flatMap { values[$0] }
        }
    }

    /// Nothing will be stored (too large, incomplete, failed).
    mutating func abort() { writer.abort() }
}

/// What an upstream response does to the cache (`UpstreamResponse.cacheEffect`),
/// carried out against the store: the same for a client's fetch and a
/// background refresh, so the two cannot drift.
extension CacheAccess {
    /// Returns where the body goes when the response is to be stored
    /// (`handler`: the fetch's, made when the request went out).
    func applyCacheEffect(of response: UpstreamResponse, to request: RequestHead, key: String, isCacheLookup: Bool,
                          variants: Variants, through handler: MissHandler) -> PendingStore? {
        switch response.cacheEffect(of: request, isCacheLookup: isCacheLookup, builder: builder, largestBody: handler.largestBody,
                                    contentLocationKey: response.fields["content-location"].flatMap { cacheKey(of: $0, after: request) }) {
        case .invalidateAndStore(let directives):
            invalidate(after: request, key: key, response.received)
            return pendingStore(response, to: request, key: storeKey(response, request, key: key, isCacheLookup: isCacheLookup),
                                directives: directives, through: handler)
        case .store(let directives):
            return pendingStore(response, to: request, key: storeKey(response, request, key: key, isCacheLookup: isCacheLookup),
                                directives: directives, through: handler)
        case .removeSuperseded:
            store.remove(key)
        case .updateStored:
            switch response.headUpdate(of: variants, builder: builder) {
            case .none: break
            case .remove: store.remove(key)
            case .replace(let refreshed): handler.insert(refreshed)
            }
        case .invalidate:
            invalidate(after: request, key: key, response.received)
        case .none:
            break
        }
        return nil
    }

    /// The key a response is stored under: with No-Vary-Search, its query
    /// in canonical form, from the request's whole one (`SearchVariances`:
    /// the path is recorded, or taken out when the field went away). Only
    /// for GET and HEAD: a cached POST query is keyed by its body.
    private func storeKey(_ response: UpstreamResponse, _ request: RequestHead, key: String, isCacheLookup: Bool) -> String {
        let field = response.fields.combined("no-vary-search")
        let variances = store.tiers.searchVariances
        guard isCacheLookup, request.method == "GET" || request.method == "HEAD", field != nil || !variances.isEmpty else { return key }
        return variances.storeKey(routes.cacheKey(request.pathAndQuery, host: request.header("host")), field: field)
    }

    /// The response's way into the store (a copy of a `compress` type
    /// gzip encoded when that is smaller).
    private func pendingStore(_ response: UpstreamResponse, to request: RequestHead, key: String,
                              directives: StoredResponseBuilder.Directives, through handler: MissHandler) -> PendingStore? {
        var tags = builder.tags(response.received, key: key)
        // A cached query carries its URL's tag: a purge of the URL, or a write to it, reaches it.
        if request.method == "POST" || request.method == "QUERY" {
            BodyKeyedEntries.note(key)
            if let tag = PostQuery.tag(urlKey: PostQuery.urlKey(of: key)), !tags.contains(tag) { tags = (tags + [tag]).sorted() }
        }
        var (status, reason, fields) = (response.status, response.reason, response.fields)
        if status == 206, let piece = PartialContent.piece(contentRange: fields["content-range"]), piece.isWhole {
            // All of it (a `bytes=0-` answer, as video players ask first):
            // stored as the 200 it amounts to, streamed to disk or not.
            (status, reason) = (200, "OK")
            fields.remove("content-range")
        }
        let head = builder.storedHead(key: key, status: status, reason: reason, headers: fields,
                                      timing: response.timing, tags: tags, directives: directives,
                                      varyFrom: { VariantValue.of($0, in: request.headers) })
        var compressed: StoredHead?
        if request.method != "HEAD",
           StoredCompression.applies(status: status, headers: fields, cc: directives.cc, types: builder.compression(for: key)) {
            compressed = builder.storedHead(key: key, status: status, reason: reason,
                                            headers: StoredCompression.fields(fields, codec: builder.compressCodec), timing: response.timing,
                                            tags: tags, directives: directives, varyNames: head.varyNames,
                                            varyFrom: { VariantValue.of($0, in: request.headers) })
        }
        return PendingStore(response, head: head, compressedHead: compressed, cache: self, through: handler)
    }

    /// RFC 9111 section 4.4: a successful unsafe request invalidates the
    /// target and the same-origin Location and Content-Location.
    private func invalidate(after request: RequestHead, key: String, _ headers: HeaderFields) {
        store.remove(key)
        if let canonical = searchVariances.lookupKey(key), canonical != key { store.remove(canonical) }
        // The target's cached queries (QUERY requests and POSTs keyed by their bodies) with it.
        if routes.cachesPost || BodyKeyedEntries.mayBeStored, let tag = PostQuery.tag(urlKey: key) {
            store.purgeWithoutBlocking(.tag(tag), on: loop)
        }
        // RFC 9875 section 3: every stored response of the groups it names
        // from this origin, here and across the fleet (its shared tier too).
        let groups = CacheGroups.parse(headers.combined("cache-group-invalidation"))
        if !groups.isEmpty {
            let origin = builder.groupOrigin(key, method: request.method)
            for group in groups {
                let scope = PurgeScope.tag(PurgeTags.group(group, origin: origin))
                store.purgeWithoutBlocking(scope, on: loop)
                store.announce?(scope)
            }
        }
        for name in ["location", "content-location"] {
            guard let reference = headers[name], let target = cacheKey(of: reference, after: request) else { continue }
            store.remove(target)
        }
    }

    /// The cache key a Location or Content-Location value names, when it
    /// is one of this upstream's (or the client's Host's) URLs.
    private func cacheKey(of reference: String, after request: RequestHead) -> String? {
        let upstream = upstreamOrigin
        return Invalidation.key(for: reference, requestKey: request.pathAndQuery, upstreamAuthority: upstream.authority,
                                upstreamPathPrefix: upstream.pathPrefix, clientAuthority: request.header("host"))
            .map { routes.cacheKey($0, host: request.header("host")) }
    }

    /// A 304 answered a conditional request (a client's, or a background
    /// refresh's): the stored variant it selects refreshed with its fields
    /// (section 4.3.4), and stored again when it may be. Nil when it names
    /// nothing held (ask again without validators). In a fleet the
    /// refreshed response is offered to the shared tier too (`handler`: the
    /// request's, made when it went out).
    func applyNotModified(_ response: UpstreamResponse, validated: CachedResponse, among variants: Variants,
                          through handler: MissHandler) -> (response: CachedResponse, stored: Bool)? {
        guard let (refreshed, storable) = response.refreshing(validated, among: variants, builder: builder) else { return nil }
        if storable, storeRefreshed(refreshed, through: handler) { handler.share(refreshed) }
        WorkerStats.bump(counters.revalidations)
        return (refreshed, storable)
    }

    /// Stores a response refreshed by a 304 (true when a tier took it).
    @discardableResult
    func storeRefreshed(_ refreshed: CachedResponse, through handler: MissHandler) -> Bool {
        guard handler.insert(refreshed) else { return false }
        WorkerStats.bump(counters.stored)
        return true
    }
}
