/// What the cache knows about one stored response, as the lookup needs it.
public protocol StoredResponseFacts {
    /// Freshness lifetime in seconds (explicit or heuristic).
    var lifetime: Int { get }
    var correctedInitialAge: Int { get }
    var timing: ResponseTiming { get }
    var cacheControl: CacheControl { get }
    var varyNames: [String] { get }
    var varyValues: [String?] { get }
    /// Its Content-Language, read only when a request's Accept-Language
    /// differs from the one that produced it.
    var contentLanguage: String? { get }
    /// Its Content-Encoding, read only for a variant chosen by Accept-Encoding.
    var contentEncoding: String? { get }
}

extension StoredResponseFacts {
    public var contentLanguage: String? { nil }
    public var contentEncoding: String? { nil }
}

/// The parts of a request the lookup looks at.
public struct RequestFacts {
    public var cacheControl: CacheControl
    /// `Pragma: no-cache` (counts only when there is no Cache-Control, section 5.4).
    public var pragmaNoCache: Bool
    /// The combined value of a request field (lowercased name), for Vary.
    public var field: (String) -> String?

    public init(cacheControl: CacheControl, pragmaNoCache: Bool, field: @escaping (String) -> String?) {
        self.cacheControl = cacheControl
        self.pragmaNoCache = pragmaNoCache
        self.field = field
    }
}

/// The outcome of looking a request up among a URL's stored variants.
public enum LookupOutcome: Equatable, Sendable {
    /// Nothing stored for the URL, or (varyMiss) no variant matches the request.
    case miss(varyMiss: Bool)
    /// The variant at `index` may be served as is.
    case fresh(index: Int, age: Int, ttl: Int)
    /// The variant at `index` needs validation first: it is stale, or the
    /// request or response demands it (`requestForced`: the client asked).
    case stale(index: Int, age: Int, ttl: Int, requestForced: Bool)
    /// Stale, but within stale-while-revalidate: serve it now and revalidate
    /// in the background (RFC 5861 section 3).
    case staleWhileRevalidate(index: Int, age: Int, ttl: Int)
    /// Stale, but within the configured grace (Varnish's grace, nginx's
    /// `proxy_cache_use_stale updating`): served at once, revalidated in
    /// the background, as for stale-while-revalidate.
    case staleWithinGrace(index: Int, age: Int, ttl: Int)
}

public enum Lookup {
    /// Section 4: select the most recent variant whose Vary fields match
    /// (4.1), then judge its freshness for this request (4.2, 5.2.1).
    /// `grace`: seconds past expiry a response is served while it is
    /// revalidated, beyond its own stale-while-revalidate (0: none).
    /// Inlinable: on every hit, and specialized for the caller's
    /// collection it reads the variants directly, not through witnesses.
    @inlinable
    public static func decide<C: RandomAccessCollection>(_ request: RequestFacts, _ variants: C, now: Int64,
                                                      shared: Bool = true, grace: Int = 0) -> LookupOutcome
    where C.Element: StoredResponseFacts, C.Index == Int {
        if variants.isEmpty { return .miss(varyMiss: false) }
        var found: Int?
        var index = variants.endIndex
        while index > variants.startIndex {  // the most recent variant that matches
            index -= 1
            if matches(request, variants[index]) {
                found = index
                break
            }
        }
        guard let index = found else { return .miss(varyMiss: true) }
        let entry = variants[index]
        let age = Freshness.currentAge(correctedInitialAge: entry.correctedInitialAge,
                                       responseTime: entry.timing.responseTime, now: now)
        switch Reuse.decide(lifetime: entry.lifetime, currentAge: age, request: request.cacheControl,
                            response: entry.cacheControl, requestPragmaNoCache: request.pragmaNoCache) {
        case .fresh(let ttl):
            return .fresh(index: index, age: age, ttl: ttl)
        case .stale(let ttl):
            let forced = request.cacheControl.noCache
                || (request.pragmaNoCache && !request.cacheControl.hasAnyDirective)
                || request.cacheControl.maxAge.map { age > $0 } ?? false
                || request.cacheControl.minFresh.map { ttl < $0 } ?? false
            if !forced, Stale.mayServeWhileRevalidating(lifetime: entry.lifetime, currentAge: age,
                                                        response: entry.cacheControl, shared: shared) {
                return .staleWhileRevalidate(index: index, age: age, ttl: ttl)
            }
            if !forced, grace > 0, Stale.withinGrace(lifetime: entry.lifetime, currentAge: age, response: entry.cacheControl,
                                                     shared: shared, grace: grace) {
                return .staleWithinGrace(index: index, age: age, ttl: ttl)
            }
            return .stale(index: index, age: age, ttl: ttl, requestForced: forced && ttl > 0)
        }
    }

    /// Section 4.1: every field the stored response's Vary names has the same
    /// normalized value in the request as in the request that produced it;
    /// for Accept-Language, or the language the response is in is one the
    /// request prefers most (`Vary.languageSelects`).
    @inlinable
    public static func matches<S: StoredResponseFacts>(_ request: RequestFacts, _ stored: S) -> Bool {
        for (i, name) in stored.varyNames.enumerated() {
            let value = request.field(name)
            if Vary.normalize(value, field: name) == stored.varyValues[i] {
                // The variant key groups clients by gzip and br alone: a body
                // in a coding Larder does not decode (deflate, several) answers
                // only a client that takes it (gzip, zstd and br are decoded
                // for those that do not).
                if name == "accept-encoding", let coding = stored.contentEncoding, StoredCoding.of(coding) == .none,
                   !AcceptEncoding(value).takes(contentEncoding: coding) { return false }
                continue
            }
            if name == "accept-language", Vary.languageSelects(value, contentLanguage: stored.contentLanguage) { continue }
            return false
        }
        return true
    }
}
