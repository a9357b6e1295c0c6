import CacheSemantics
import Compression
import CacheStorage
import EdgeControls
import HTTP1
import HTTPHeaders
import Routing

/// Turns an upstream response into a `CachedResponse`: the storage decision,
/// the freshness lifetime, and the head prefix serialized once.
struct StoredResponseBuilder: Sendable {
    /// Shared-cache rules (RFC 9111) or a single user's private cache.
    let shared: Bool
    /// Targeted cache-control fields (RFC 9213) that apply to Larder, most
    /// specific first; the first present replaces Cache-Control.
    let targetedFields: [String]
    private let hiddenFields: [String]

    /// Per-route storage rules.
    let routes: RouteTable
    /// false: a response with Set-Cookie is not stored.
    var storeSetCookie = false
    /// The client's Host goes upstream (forward_host): it selects responses.
    var hostIsKeyed = false
    /// pass_request_headers: they reach the upstream, so they select responses.
    var passedKeyed: [String] = []
    /// `compress`: the media types stored gzip encoded (routes override it).
    var compressTypes = MediaTypePatterns()
    /// `compress_codec`: the coding of those copies.
    var compressCodec = Codec.gzip
    /// The edge controls of keys under no route; whether any scope strips cookies.
    var edge: EdgeRules?
    /// The default upstream's name (a route without `upstream` uses it).
    var defaultUpstream = "default"
    var anyStripsCookies = false

    init(_ configuration: ProxyConfiguration) {
        self.init(shared: configuration.sharedCache, targetedField: configuration.targetedCacheControl, routes: configuration.routes,
                  stripTargetedFields: configuration.stripTargetedFields)
        storeSetCookie = configuration.storeSetCookie
        hostIsKeyed = configuration.forwardHost || configuration.preserveHost
        passedKeyed = configuration.passRequestHeaders
        compressTypes = configuration.compressTypes
        compressCodec = configuration.compressCodec
        edge = configuration.edge
        defaultUpstream = configuration.upstreams.defaultPool.name
        anyStripsCookies = (edge?.stripCookies ?? false) || configuration.routes.routes.contains { $0.rules?.stripCookies ?? false }
    }

    /// `strip_cookies` for a key: its response's Set-Cookie reaches neither the store nor clients.
    func stripsCookies(_ key: String) -> Bool {
        guard anyStripsCookies else { return false }
        let route = routes.match(key)
        return (route != nil ? route!.rules : edge)?.stripCookies ?? false
    }

    /// The `compress` list that applies to `key`.
    func compression(for key: String) -> MediaTypePatterns { routes.match(key)?.compress ?? compressTypes }

    init(shared: Bool, targetedField: String, routes: RouteTable = RouteTable(), stripTargetedFields: Bool = false) {
        self.shared = shared
        self.routes = routes
        var fields = [targetedField.lowercased()]
        if !fields.contains("cdn-cache-control") { fields.append("cdn-cache-control") }
        targetedFields = fields
        hiddenFields = stripTargetedFields ? fields : []
    }

    /// Header fields never stored in the head prefix: per-request fields
    /// (filled in on every hit) and framing. Date stays: a cache must not
    /// change the origin's Date (RFC 9110 section 6.6.1).
    static func isPerRequest(_ name: String) -> Bool {
        switch name.utf8.count {
        case 3: return name == "age"
        case 10: return name == "connection" || name == "keep-alive"
        case 12: return name == "cache-status"
        case 14: return name == "content-length"
        case 17: return name == "transfer-encoding"
        default: return false
        }
    }

    /// Whether a response field never reaches clients: the targeted
    /// fields with `strip_targeted_fields` (RFC 9213 section 3 lets a cache
    /// pass them on, for caches further down, which is the default).
    func isHidden(_ name: String) -> Bool { hiddenFields.contains { $0.isField(name) } }

    /// The directives Larder obeys for `key`: a route that ignores the
    /// upstream's Cache-Control gets `max-age=default_ttl` (keeping no-store
    /// unless the route ignores that too); otherwise as `cacheControl(_:)`.
    /// `status`: the response's (a route's TTLs stand only for some).
    func cacheControl(_ headers: HeaderFields, key: String, status: Int) -> (CacheControl, targeted: Bool) {
        let (upstream, targeted) = cacheControl(headers)
        guard let route = routes.match(key), route.ignoreUpstreamCacheControl else { return (upstream, targeted) }
        var cc = CacheControl()
        cc.maxAge = Self.routeTTL(status: status, negative: route.negativeTTL, default: route.defaultTTL) ?? 0
        cc.noStore = upstream.noStore && !route.ignoreNoStore
        return (cc, true)
    }

    /// What a route's TTLs give a response without explicit freshness (or
    /// whose freshness the route ignores): a 5xx `negative_ttl` alone; a
    /// 404 or 410 `negative_ttl`, else `default_ttl`; the other statuses
    /// RFC 9110 section 15.1 makes heuristically cacheable `default_ttl`;
    /// the rest nothing. An error is never kept as content for
    /// `default_ttl` (an upstream's one 503 served for an hour).
    static func routeTTL(status: Int, negative: Int?, default defaultTTL: Int?) -> Int? {
        if status >= 500 { return negative }
        if status == 404 || status == 410 { return negative ?? defaultTTL }
        return heuristicallyCacheableStatusCodes.contains(status) ? defaultTTL : nil
    }

    /// The directives Larder obeys: a targeted field's when one is present
    /// (RFC 9213 section 2.1), else Cache-Control.
    func cacheControl(_ headers: HeaderFields) -> (CacheControl, targeted: Bool) {
        for name in targetedFields {
            // An empty or unparsable targeted field is ignored (RFC 9213 section 2.1).
            if let value = headers.combined(name), let cc = CacheControl(targeted: value) { return (cc, true) }
        }
        return (CacheControl(headers.combined("cache-control")), false)
    }

    /// The freshness lifetime: explicit (section 4.2.1) or heuristic (4.2.2).
    /// A route's negative_ttl, then default_ttl, stand in for missing
    /// explicit freshness before any heuristic.
    func lifetime(status: Int, headers: HeaderFields, timing: ResponseTiming, key: String) -> Int? {
        let (cc, targeted) = cacheControl(headers, key: key, status: status)
        return lifetime(status: status, headers: headers, timing: timing, key: key, cc: cc, targeted: targeted)
    }

    /// The same with the directives already parsed (they are parsed once per
    /// response: this runs on every miss).
    func lifetime(status: Int, headers: HeaderFields, timing: ResponseTiming, key: String,
                  cc: CacheControl, targeted: Bool) -> Int? {
        // A targeted field replaces Cache-Control and Expires alike.
        let expires = targeted ? nil : headers["expires"]
        if let explicit = Freshness.lifetime(cc, dateValue: timing.dateValue, expires: expires,
                                             responseTime: timing.responseTime, shared: shared) {
            return explicit
        }
        if cc.noCache { return nil }
        if let route = routes.match(key), let ttl = Self.routeTTL(status: status, negative: route.negativeTTL, default: route.defaultTTL) {
            return ttl
        }
        if targeted { return nil }
        return Freshness.heuristicLifetime(status: status, cc, lastModified: headers["last-modified"],
                                           dateValue: timing.dateValue, responseTime: timing.responseTime)
    }

    /// The directives Larder obeys for a response, parsed once (`decision`)
    /// and handed to `build`.
    typealias Directives = (cc: CacheControl, targeted: Bool)

    /// Whether a response to `request` may be stored (RFC 9111 section 3).
    func decide(request: RequestHead, status: Int, headers: HeaderFields,
                timing: ResponseTiming) -> StoreDecision {
        decision(request: request, status: status, headers: headers, timing: timing).decision
    }

    /// The same, with the directives it parsed (routes match on the path,
    /// which the cache key shares with the request target).
    func decision(request: RequestHead, status: Int, headers: HeaderFields,
                  timing: ResponseTiming) -> (decision: StoreDecision, directives: Directives) {
        let directives = cacheControl(headers, key: routeKey(request), status: status)
        return (decide(request: request, status: status, headers: headers, timing: timing, directives: directives), directives)
    }

    /// A POST response may answer later GETs of its target (RFC 9110
    /// section 9.3.3, RFC 9111 section 4) when its Content-Location names
    /// that target (`contentLocationKey`, the key it resolves to), it has
    /// explicit freshness, and it would be stored as a GET response. The
    /// directives then; nil otherwise.
    func postDecision(request: RequestHead, status: Int, headers: HeaderFields, timing: ResponseTiming,
                      contentLocationKey: String?) -> Directives? {
        guard status == 200 || status == 203, let contentLocationKey,
              contentLocationKey == routes.cacheKey(request.pathAndQuery, host: request.header("host")) else { return nil }
        return queryDecision(request: request, status: status, headers: headers, timing: timing)
    }

    /// A POST answer stored as a GET's would be, when it has explicit
    /// freshness: a cached query's (`cache_post`), or one that names its
    /// own target (above). The directives then; nil otherwise.
    func queryDecision(request: RequestHead, status: Int, headers: HeaderFields, timing: ResponseTiming) -> Directives? {
        var asGET = request
        asGET.method = "GET"
        let (decision, directives) = decision(request: asGET, status: status, headers: headers, timing: timing)
        guard decision == .store else { return nil }
        let expires = directives.targeted ? nil : headers["expires"]
        guard let explicit = Freshness.lifetime(directives.cc, dateValue: timing.dateValue, expires: expires,
                                                responseTime: timing.responseTime, shared: shared), explicit > 0 else { return nil }
        return directives
    }

    /// What routes match a request on: its target, and with virtual hosts its key.
    private func routeKey(_ request: RequestHead) -> String {
        routes.keysHost ? routes.cacheKey(request.pathAndQuery, host: request.header("host")) : request.pathAndQuery
    }

    private func decide(request: RequestHead, status: Int, headers: HeaderFields,
                        timing: ResponseTiming, directives: Directives) -> StoreDecision {
        let key = routeKey(request)
        let (cc, targeted) = directives
        let hasValidator = headers["etag"] != nil || headers["last-modified"] != nil
        let reusable = hasValidator || cc.noCache
            || lifetime(status: status, headers: headers, timing: timing, key: key, cc: cc, targeted: targeted) != nil
        if Vary.fieldNames(headers.combined("vary")) == nil { return .doNotStore("Vary: *") }
        if !storeSetCookie && headers.contains("set-cookie") { return .doNotStore("Set-Cookie") }
        if IncrementalStream.applies(incremental: headers["incremental"], contentType: headers["content-type"]) {
            return .doNotStore("an incremental stream")
        }
        return Storability.decide(method: request.method, status: status,
                                  request: CacheControl(request.combinedHeader("cache-control")), response: cc,
                                  hasAuthorization: request.header("authorization") != nil, shared: shared,
                                  reusable: reusable,
                                  storablePiece: status == 206 && Self.isStorablePiece(headers))
    }

    /// A 206 of one range of a known complete length, or a multipart/byteranges
    /// one (split into its pieces when stored; RFC 9111 section 3.3).
    private static func isStorablePiece(_ headers: HeaderFields) -> Bool {
        guard let contentRange = headers.combined("content-range") else {
            return MultipartByteranges.boundary(contentType: headers.combined("content-type")) != nil
        }
        return PartialContent.piece(contentRange: contentRange) != nil
    }

    /// The purge tags of a response stored under `key`: its Surrogate-Key
    /// and Cache-Tag fields (`headers` as received), its Cache-Groups
    /// (RFC 9875: a group is a tag) and the route's tags.
    func tags(_ headers: HeaderFields, key: String) -> [String] {
        let route = routes.match(key)?.tags ?? []
        guard route.isEmpty == false || headers.contains("surrogate-key") || headers.contains("cache-tag")
            || headers.contains("cache-groups")
        else { return [] }
        let groups = CacheGroups.parse(headers.combined("cache-groups"))
        return PurgeTags.from(surrogateKey: headers.values("surrogate-key"), cacheTag: headers.values("cache-tag"),
                              groups: groups, groupOrigin: groups.isEmpty ? "" : groupOrigin(key), route: route)
    }

    /// Where a request to `key` gets its answer, as RFC 9875 scopes groups
    /// (section 2.1, one origin): the upstream its route sends it to and,
    /// with virtual hosts, its host.
    func groupOrigin(_ key: String, method: String = "GET") -> String {
        let upstream = routes.match(key, method: method)?.upstream ?? defaultUpstream
        guard routes.keysHost, let host = VirtualHosts.split(key).host else { return upstream }
        return upstream + " " + host
    }

    /// Builds the stored form. `varyFrom` supplies the request's values of
    /// the fields the response's Vary names. The body is copied into the entry.
    func build(key: String, status: Int, reason: String?, headers: HeaderFields, body: UnsafeRawBufferPointer,
               timing: ResponseTiming, tags: [String], directives: Directives? = nil,
               varyNames: [String]? = nil, varyFrom request: (String) -> String?) -> CachedResponse {
        let head = storedHead(key: key, status: status, reason: reason, headers: headers, timing: timing, tags: tags,
                              directives: directives, varyNames: varyNames, varyFrom: request)
        return CachedResponse.make(head: head, body: body)
    }

    /// What every tier keeps of a response but its body: the head prefix a
    /// hit sends (serialized once), lifetime, directives, Vary and tags.
    /// `varyNames`: the fields that select it, when not the Vary of
    /// `headers` (a copy stored compressed sends a Vary it does not select on).
    func storedHead(key: String, status: Int, reason: String?, headers: HeaderFields, timing: ResponseTiming,
                    tags: [String], directives: Directives? = nil, varyNames: [String]? = nil,
                    varyFrom request: (String) -> String?) -> StoredHead {
        let (cc, targeted) = directives ?? cacheControl(headers, key: key, status: status)
        // Fields named by no-cache="..." are not stored (RFC 9111 section
        // 5.2.2.4: they may not be reused unvalidated), nor, in a shared
        // cache, those named by private="..." (5.2.2.7). Set-Cookie is stored like any field, as RFC 9111
        // section 7.3 allows; an origin that must not share it says
        // private="Set-Cookie" or no-store.
        let kept = storedFields(headers, cc)
        // The head prefix is serialized straight from the kept fields, sized
        // once (no intermediate field array: this runs on every miss).
        var prefix: [UInt8] = []
        prefix.reserveCapacity(kept.reduce(64 + (reason?.utf8.count ?? 16)) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
                               + 64)
        ResponseSerializer.appendStatusLine(status, reason: reason, to: &prefix)
        // Fields kept for Larder only (targeted cache-control): stored beside
        // the head, never sent. Framing and per-request fields are rebuilt.
        var otherFields: HeaderFields = []
        var hasDate = false, hasValidator = false, coding = StoredCoding.none
        for field in kept where !Self.isPerRequest(field.name) {
            if field.name.isField("content-encoding") { coding = StoredCoding.of(field.value) }
            if field.name.isField("date") { hasDate = true }
            if field.name.isField("etag") || field.name.isField("last-modified") { hasValidator = true }
            if isHidden(field.name) {
                otherFields.append(field)
            } else {
                ResponseSerializer.appendField(field.name, field.value, to: &prefix)
            }
        }
        if !hasDate {
            // No Date from the origin: the one Larder added when it received the response.
            ResponseSerializer.appendField("date", HTTPDate.formatString(timing.responseTime), to: &prefix)
        }
        let names = varyNames ?? variantFields(headers, key: key)
        let lifetime = keptLifetime(status: status, headers: headers, kept: kept, timing: timing, key: key, cc: cc, targeted: targeted)
        return StoredHead(key: key, status: status, headPrefix: prefix, otherFields: otherFields, timing: timing,
                          lifetime: lifetime ?? 0, directives: PackedCacheControl(cc), hasValidator: hasValidator,
                          varyNames: names, varyValues: names.map { Vary.normalize(request($0), field: $0) }, tags: tags,
                          coding: coding)
    }

    /// The lifetime of the stored copy: computed from the kept fields, with
    /// the already parsed directives when no field was dropped (the usual case).
    private func keptLifetime(status: Int, headers: HeaderFields, kept: HeaderFields,
                              timing: ResponseTiming, key: String, cc: CacheControl, targeted: Bool) -> Int? {
        guard kept.count == headers.count else { return lifetime(status: status, headers: kept, timing: timing, key: key) }
        return lifetime(status: status, headers: kept, timing: timing, key: key, cc: cc, targeted: targeted)
    }

    /// The fields a stored copy keeps: without those no-cache="..." names
    /// and, in a shared cache, those private="..." names.
    private func storedFields(_ headers: HeaderFields, _ cc: CacheControl) -> HeaderFields {
        var dropped = Set(cc.noCacheFields)
        if shared { dropped.formUnion(cc.privateFields) }
        return dropped.isEmpty ? headers : headers.filter { !dropped.contains($0.name) }
    }

    /// A stored response refreshed by a 304 (or HEAD) response (section 4.3.4):
    /// merged header fields, the new response's timing, the same body,
    /// selected as before.
    func refresh(_ entry: CachedResponse, with update: HeaderFields, timing: ResponseTiming) -> CachedResponse {
        let stored = entry.headers
        var merged = Validation.merge(stored: stored, update: update)
        if entry.coding != .none { merged = StoredCompression.keepWeak(stored: stored["etag"], merged: merged) }
        let names = entry.varyNames, values = entry.varyValues
        return entry.withHead(storedHead(key: entry.key, status: entry.status, reason: entry.reason, headers: merged, timing: timing,
                                         tags: entry.tags, varyNames: names) { name in
            names.firstIndex(of: name).flatMap { values[$0] }
        })
    }

    /// The request fields that select a variant: the response's Vary plus
    /// the route's key_headers (a route-made Vary that clients never see).
    func variantFields(_ headers: HeaderFields, key: String) -> [String] {
        var vary = Vary.fieldNames(headers.combined("vary")) ?? []
        let route = routes.match(key)
        var extra = route?.keyHeaders ?? []
        if let rules = route != nil ? route!.rules : edge, rules.stripCookies || !rules.keyCookies.isEmpty {
            // The upstream never sees a stripped Cookie; with key_cookies only
            // the cookies named select (`VariantValue`), not the whole field.
            vary.removeAll { $0 == "cookie" }
            extra += rules.keyCookies.map(Cookies.variantField)
        }
        guard hostIsKeyed || !extra.isEmpty || !passedKeyed.isEmpty else { return vary }
        var fields = Set(vary).union(extra).union(passedKeyed)
        // With forward_host the client's Host goes upstream as
        // X-Forwarded-Host, so a response may depend on it (absolute links):
        // it selects the stored response like a Vary field, and one host's
        // answer is never served for another.
        if hostIsKeyed { fields.insert("host") }
        return fields.sorted()
    }
}
