import CacheSemantics
import CacheStorage

/// What may answer a request in the upstream's place when it fails before
/// a response, as `UpstreamFailure` decides: the policy's fallback
/// (networkElseCache, however stale), a stale response within
/// stale-if-error, else a 502/504 whose message says when a
/// must-revalidate response failed to revalidate. Each stored response is
/// offered once: when its body turns out to be gone, asking again gives
/// the next answer down.
struct StandIns {
    var fallback: CachedResponse?
    var stale: CachedResponse?
    /// The request's directives (its stale-if-error counts too).
    var request = CacheControl()

    enum Answer {
        case serve(CachedResponse)
        case gatewayError(Int, message: String)
        /// Not a failure to stand in for: the upstream's response goes through.
        case passThrough
    }

    /// `validating`: the directives of the stored response the request
    /// was revalidating, if any.
    mutating func answer(_ kind: UpstreamFailure.Kind, detail: String, validating: CacheControl?, now: Int64,
                         shared: Bool) -> Answer {
        let candidate = stale.map {
            UpstreamFailure.StaleCandidate(lifetime: $0.lifetime, currentAge: $0.currentAge(now: now), response: $0.cacheControl,
                                           request: request)
        }
        switch UpstreamFailure.answer(kind, hasFallback: fallback != nil, stale: candidate, validating: validating, shared: shared) {
        case .serveFallback:
            defer { fallback = nil }
            return .serve(fallback!)
        case .serveStale:
            defer { stale = nil }
            return .serve(stale!)
        case .gatewayError(let status):
            let revalidating = validating.map { Stale.mustRevalidate($0, shared: shared) } ?? false
            return .gatewayError(status, message: revalidating
                                 ? "upstream failed to revalidate a must-revalidate response: \(detail)" : detail)
        case .passThrough:
            return .passThrough
        }
    }
}
