/// What RFC 9111 needs to know about one response to judge its age and
/// freshness. Times are seconds since the epoch.
public struct ResponseTiming: Equatable, Sendable {
    /// When the request that produced the response was sent.
    public var requestTime: Int64
    /// When the response was received.
    public var responseTime: Int64
    /// The response's Date header, if valid.
    public var dateValue: Int64?
    /// The response's Age header, if valid.
    public var ageValue: Int

    public init(requestTime: Int64, responseTime: Int64, dateValue: Int64?, ageValue: Int) {
        self.requestTime = requestTime
        self.responseTime = responseTime
        self.dateValue = dateValue
        self.ageValue = ageValue
    }
}

/// Freshness and age (RFC 9111 sections 4.2.1 and 4.2.3), as pure functions.
public enum Freshness {
    /// The explicit freshness lifetime in seconds, or nil when the response
    /// carries none (heuristic freshness is not used).
    /// A shared cache prefers s-maxage; an invalid Expires means "already expired".
    public static func lifetime(_ cc: CacheControl, dateValue: Int64?, expires: String?,
                                responseTime: Int64, shared: Bool) -> Int? {
        if shared, let s = cc.sMaxAge { return s }
        if let m = cc.maxAge { return m }
        if let expires {
            guard let e = HTTPDate.parse(expires) else { return 0 }
            let date = dateValue ?? responseTime
            return Int(clamping: max(0, e.minusSaturating(date)))
        }
        return nil
    }

    /// Heuristic freshness (section 4.2.2): 10% of the time since
    /// Last-Modified, at most a day; only for heuristically cacheable status
    /// codes or responses marked public, and only without explicit freshness.
    public static func heuristicLifetime(status: Int, _ cc: CacheControl, lastModified: String?,
                                         dateValue: Int64?, responseTime: Int64) -> Int? {
        guard heuristicallyCacheableStatusCodes.contains(status) || cc.isPublic else { return nil }
        guard let modified = lastModified.flatMap(HTTPDate.parse) else { return nil }
        let date = dateValue ?? responseTime
        guard date > modified else { return 0 }
        return Int(min(date.minusSaturating(modified) / 10, Int64(maxHeuristicLifetime)))
    }

    /// The cap on heuristic lifetimes.
    public static let maxHeuristicLifetime = 86_400

    /// corrected_initial_age of section 4.2.3.
    public static func correctedInitialAge(_ t: ResponseTiming) -> Int {
        let apparentAge = max(0, t.responseTime.minusSaturating(t.dateValue ?? t.responseTime))
        let responseDelay = max(0, t.responseTime.minusSaturating(t.requestTime))
        let correctedAgeValue = Int64(t.ageValue).plusSaturating(responseDelay)
        return Int(clamping: max(apparentAge, correctedAgeValue))
    }

    /// current_age: the corrected initial age plus the time spent stored.
    public static func currentAge(correctedInitialAge: Int, responseTime: Int64, now: Int64) -> Int {
        correctedInitialAge.plusSaturating(Int(clamping: max(0, now.minusSaturating(responseTime))))
    }

    /// An Age header value: non-negative digits, else nil; saturates at 2^31.
    public static func parseAge(_ value: String?) -> Int? {
        // RFC 9111 section 5.1: a list-based value ("7200, 0", or two Age
        // lines joined) counts by its first member; an invalid one is ignored.
        guard let value else { return nil }
        var first = value.prefix { $0 != "," }
        while first.first == " " || first.first == "\t" { first = first.dropFirst() }
        while first.last == " " || first.last == "\t" { first = first.dropLast() }
        guard !first.isEmpty, first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return CacheControl.seconds(first)
    }
}

/// Why a response is or is not stored (RFC 9111 section 3).
public enum StoreDecision: Equatable, Sendable {
    case store
    case doNotStore(String)
}

/// Status codes whose semantics Larder knows (RFC 9110 section 15), which
/// matters for must-understand (RFC 9111 section 5.2.2.3).
public let understoodStatusCodes: Set<Int> = [
    200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 451, 501,
    400, 403, 500, 502, 503, 504,
]

/// Status codes that may be reused with heuristic freshness (RFC 9110 section 15.1).
public let heuristicallyCacheableStatusCodes: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

public enum Storability {
    /// Whether a response may be stored, for a shared cache unless `shared` is false.
    /// `reusable`: it has a freshness lifetime (explicit or heuristic), a
    /// validator, or `no-cache` — storing anything else would be useless,
    /// since it could never be reused or revalidated.
    /// `storablePiece`: a 206 is one byte range with a known complete
    /// length (`PartialContent.piece`) or multipart/byteranges
    /// (`MultipartByteranges`), which Larder stores and combines.
    public static func decide(method: String, status: Int, request: CacheControl, response: CacheControl,
                              hasAuthorization: Bool, shared: Bool, reusable: Bool, storablePiece: Bool = false) -> StoreDecision {
        // QUERY responses are cacheable as GET's are (RFC 10008 section 2.7),
        // keyed by the request content too (the caller's key).
        guard method == "GET" || method == "QUERY" else { return .doNotStore("method \(method)") }
        // Section 3: any final status may be stored; 206 and 304 only by a
        // cache that understands them (3.3: a 206 of one range, kept as a
        // piece, a multipart one split into pieces; a 304 is never stored on its own).
        guard status >= 200, status <= 999, status != 304, status != 206 || storablePiece else {
            return .doNotStore("status \(status)")
        }
        // 412 and 416 answer the request's preconditions or Range, not the
        // target: stored (without a Vary naming those fields) they would
        // answer every later request, a cache any client could poison.
        if status == 412 || status == 416 { return .doNotStore("status \(status) answers the request's conditions") }
        if request.noStore { return .doNotStore("request no-store") }
        if response.mustUnderstand {
            // Section 5.2.2.3: store only understood codes, and then ignore no-store.
            guard understoodStatusCodes.contains(status) else { return .doNotStore("must-understand status \(status)") }
        } else if response.noStore {
            return .doNotStore("no-store")
        }
        if shared && response.isPrivate { return .doNotStore("private") }
        // Section 3.5: a shared cache may store a response to an authorized
        // request only when the response explicitly allows it.
        if shared && hasAuthorization && !(response.mustRevalidate || response.isPublic || response.sMaxAge != nil) {
            return .doNotStore("authorization")
        }
        if !reusable { return .doNotStore("no freshness information or validator") }
        return .store
    }
}

/// How a stored response may be used for a request (section 4.2 and 5.2.1).
public enum ReuseDecision: Equatable, Sendable {
    /// Serve it; `ttl` seconds of freshness remain.
    case fresh(ttl: Int)
    /// Stale (or must be validated) for this request: go upstream.
    case stale(ttl: Int)
}

public enum Reuse {
    public static func decide(lifetime: Int, currentAge: Int, request: CacheControl, response: CacheControl,
                              requestPragmaNoCache: Bool) -> ReuseDecision {
        let ttl = lifetime.minusSaturating(currentAge)
        if response.noCache || request.noCache || (requestPragmaNoCache && !request.hasAnyDirective) {
            return .stale(ttl: ttl)
        }
        if let maxAge = request.maxAge, currentAge > maxAge { return .stale(ttl: ttl) }
        if let minFresh = request.minFresh, ttl < minFresh { return .stale(ttl: ttl) }
        if ttl > 0 { return .fresh(ttl: ttl) }
        // Serving stale on request max-stale is allowed unless the response forbids it.
        if let maxStale = request.maxStale, !response.mustRevalidate, !response.proxyRevalidate,
           !(response.sMaxAge != nil), -ttl <= maxStale {
            return .fresh(ttl: ttl)
        }
        return .stale(ttl: ttl)
    }
}

extension CacheControl {
    /// Whether any directive was present (Pragma only counts without Cache-Control).
    public var hasAnyDirective: Bool { self != CacheControl() }
}
