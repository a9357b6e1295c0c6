import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders
import Routing

/// An upstream response head as every fetch sees it, a client's or a
/// background refresh's: one path, so the two cannot drift. The fields
/// passed on and stored lose the hop-by-hop ones and those Connection
/// nominates, a transfer-coded response's Content-Length, and (when so
/// configured) the tag fields.
struct UpstreamResponse {
    let status: Int
    let reason: String?
    /// RFC 9112 section 6.3; `.invalid` when the body's end cannot be known.
    let framing: ResponseFraming
    let fields: HeaderFields
    /// The fields as received (tags are read from them before stripping).
    let received: HeaderFields
    let timing: ResponseTiming
    /// Microseconds from the request to this head (the access log's upstream_ms).
    var upstreamMicroseconds: Int?
    /// The server that answered (host:port), for the access log.
    var server: String?

    init(status: Int, reason: String?, headers: HeaderFields, requestTime: Int64, responseTime: Int64,
         stripTagHeaders: Bool) {
        self.status = status
        self.reason = reason
        received = headers
        framing = ResponseFraming.of(headers)
        let transferCoded = framing == .transferCoded
        // Most responses have no Connection field: no set built then.
        let nominated = HopByHop.nominated(inFields: headers)
        var passed: HeaderFields = []
        passed.reserveCapacity(headers.count)
        for field in headers {
            if HopByHop.isHopByHop(field.name) || (!nominated.isEmpty && nominated.contains(field.name)) { continue }
            // Transfer-Encoding wins: its Content-Length describes nothing.
            if transferCoded && field.name.isField("content-length") { continue }
            if stripTagHeaders && (field.name.isField("surrogate-key") || field.name.isField("cache-tag")) { continue }
            passed.append(field)
        }
        fields = passed
        timing = ResponseTiming(requestTime: requestTime, responseTime: responseTime,
                                dateValue: headers["date"].flatMap(HTTPDate.parse),
                                ageValue: Freshness.parseAge(headers["age"]) ?? 0)
    }

    /// A 206 with the rest of a stored piece as the 200 of the whole
    /// representation (`length` bytes) a client gets: its fields without
    /// Content-Range, the whole's Content-Length; with `piece`, its
    /// Content-Type (or none) in place of the 206's own (a
    /// multipart/byteranges one's).
    func completed(length: Int, typedAs piece: CachedResponse? = nil) -> UpstreamResponse {
        var headers = completedFields(typedAs: piece)
        headers.append("content-length", String(length))
        // From the fields as passed on (hop-by-hop and, when so configured, tag fields gone).
        return UpstreamResponse(status: 200, reason: "OK", headers: headers, requestTime: timing.requestTime,
                                responseTime: timing.responseTime, stripTagHeaders: false)
    }

    /// This 206's head made to answer `range` of the representation (a
    /// stored piece's bytes and this response's together).
    func completed(range: PartialContent.Piece, typedAs piece: CachedResponse? = nil) -> UpstreamResponse {
        var headers = completedFields(typedAs: piece)
        headers.append("content-range", range.contentRange)
        headers.append("content-length", String(range.count))
        return UpstreamResponse(status: 206, reason: reason, headers: headers, requestTime: timing.requestTime,
                                responseTime: timing.responseTime, stripTagHeaders: false)
    }

    /// Its fields without those of its own framing, `piece`'s Content-Type in place of its own.
    private func completedFields(typedAs piece: CachedResponse?) -> HeaderFields {
        var headers = fields
        if let piece {
            headers.remove("content-type")
            if let type = piece.header("content-type") { headers.append("content-type", type) }
        }
        for name in ["content-range", "content-length", "transfer-encoding"] { headers.remove(name) }
        return headers
    }

    /// Whether no body follows this head (RFC 9112 section 6.3): the
    /// answer to a HEAD, a 1xx, 204 or 304.
    func hasNoBody(answering method: String) -> Bool { Self.hasNoBody(status: status, answering: method) }

    static func hasNoBody(status: Int, answering method: String) -> Bool {
        method == "HEAD" || status == 204 || status == 304 || status < 200
    }

    /// The body's length when the head states it.
    var length: Int? {
        if case .length(let n) = framing { return n }
        return nil
    }

    /// A 304 to a conditional request (section 4.3.4): the stored response
    /// its validators select among `variants`, or, when it names no
    /// entity tag, the one that was being validated; nil when it names
    /// nothing held (the request must go again without validators). The
    /// refreshed response, and whether it may be stored (a response
    /// whose status is understood ignores no-store under must-understand).
    func refreshing(_ validated: CachedResponse, among variants: Variants,
                    builder: StoredResponseBuilder) -> (response: CachedResponse, store: Bool)? {
        let etag = fields["etag"]
        let candidates = variants.map { (etag: $0.etag, lastModified: $0.lastModified) }
        guard let entry = Validation.selectValidated(etag: etag, lastModified: fields["last-modified"], candidates: candidates)
            .map({ variants[$0] }) ?? (etag == nil ? validated : nil)
        else { return nil }
        let refreshed = builder.refresh(entry, with: fields, timing: timing)
        return (refreshed, !refreshed.cacheControl.noStore || refreshed.cacheControl.mustUnderstand)
    }

    /// What a response does to the cache (RFC 9111): stored, with the
    /// directives that decided it; the stored response a success that
    /// forbids storing supersedes removed; a HEAD's update of the stored GET response (section
    /// 4.3.5); the targets of a successful unsafe request invalidated
    /// (section 4.4); or nothing.
    enum CacheEffect {
        case store(StoredResponseBuilder.Directives)
        case removeSuperseded
        case updateStored
        case invalidate
        /// A POST response that is a representation of its own target:
        /// the target invalidated, then this stored for later GETs.
        case invalidateAndStore(StoredResponseBuilder.Directives)
        case none
    }

    /// `contentLocationKey`: the cache key the response's Content-Location
    /// names (nil: none, or another origin's).
    func cacheEffect(of request: RequestHead, isCacheLookup: Bool, builder: StoredResponseBuilder,
                     largestBody: @autoclosure () -> Int, contentLocationKey: @autoclosure () -> String? = nil) -> CacheEffect {
        guard isCacheLookup else {
            guard Invalidation.invalidates(method: request.method, status: status) else { return .none }
            if request.method == "POST", let directives = builder.postDecision(request: request, status: status, headers: fields,
                                                                               timing: timing, contentLocationKey: contentLocationKey()),
               (length ?? 0) <= largestBody() {
                return .invalidateAndStore(directives)
            }
            return .invalidate
        }
        if request.method == "POST" {
            // A cached query (`PostQuery`): stored as a GET's answer would be,
            // with explicit freshness only; it invalidates nothing.
            guard let directives = builder.queryDecision(request: request, status: status, headers: fields, timing: timing),
                  (length ?? 0) <= largestBody() else { return .none }
            return .store(directives)
        }
        if request.method == "GET" || request.method == "QUERY" {
            // (A QUERY is stored as a GET is: RFC 10008 section 2.7.)
            let (decision, directives) = builder.decision(request: request, status: status, headers: fields, timing: timing)
            if decision == .store, (length ?? 0) <= largestBody() { return .store(directives) }
            // A response not stored leaves what is stored alone (an error, one
            // too large or without freshness never takes good content away),
            // but for a success whose origin forbids keeping it (no-store, or
            // private in a shared cache): what it supersedes goes.
            let forbids = directives.cc.noStore || (builder.shared && directives.cc.isPrivate)
            return (200..<300).contains(status) && status != 206 && forbids ? .removeSuperseded : .none
        }
        return request.method == "HEAD" && status == 200 ? .updateStored : .none
    }

    /// A 200 to HEAD and the stored GET responses (section 4.3.5): the one
    /// its validators select is refreshed with its fields, or removed when
    /// the length differs (the stored one is outdated).
    enum HeadUpdate {
        case none
        case remove
        case replace(CachedResponse)
    }

    func headUpdate(of variants: Variants, builder: StoredResponseBuilder) -> HeadUpdate {
        guard !variants.isEmpty,
              let index = Validation.selectValidated(etag: fields["etag"], lastModified: fields["last-modified"],
                                                     candidates: variants.map { (etag: $0.etag, lastModified: $0.lastModified) })
        else { return .none }
        let entry = variants[index]
        if let length = fields["content-length"].flatMap({ Int($0) }), length != entry.bodyLength { return .remove }
        return .replace(builder.refresh(entry, with: fields, timing: timing))
    }
}
