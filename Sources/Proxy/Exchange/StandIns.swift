import CacheSemantics
import CacheStorage

/// What may answer a request in the upstream's place when it fails before
/// a response, as `UpstreamFailure` decides: the policy's fallback
/// (networkElseCache, however stale), a stale response within
/// stale-if-error or, when the upstream cannot be reached, within the
/// route's `stale_on_disconnect` grace, else a 502/504 whose message says when a
/// must-revalidate response failed to revalidate. Each stored response is
/// offered once: when its body turns out to be gone, asking again gives
/// the next answer down.
struct StandIns {
    var fallback: CachedResponse?
    var stale: CachedResponse?
    /// The request's stale-if-error (it counts too; the only directive of
    /// the request read here, so no whole Cache-Control is kept).
    var requestStaleIfError: Int?
    /// How stale a response may stand in for an unreachable upstream (seconds; 0: off).
    var disconnectedGrace = 0

    enum Answer {
        /// `detail`: what Cache-Status says of it.
        case serve(CachedResponse, detail: String?)
        case gatewayError(Int, message: String)
        /// Not a failure to stand in for: the upstream's response goes through.
        case passThrough
    }

    /// Whether a stored response would answer `kind` (nothing is taken).
    func wouldServe(_ kind: UpstreamFailure.Kind, validating: CacheControl?, now: Int64, shared: Bool) -> Bool {
        guard fallback != nil || stale != nil else { return false }
        var copy = self
        if case .serve = copy.answer(kind, detail: "", validating: validating, now: now, shared: shared) { return true }
        return false
    }

    /// `validating`: the directives of the stored response the request
    /// was revalidating, if any.
    mutating func answer(_ kind: UpstreamFailure.Kind, detail: String, validating: CacheControl?, now: Int64,
                         shared: Bool) -> Answer {
        let candidate = stale.map {
            var request = CacheControl()
            request.staleIfError = requestStaleIfError
            return UpstreamFailure.StaleCandidate(lifetime: $0.lifetime, currentAge: $0.currentAge(now: now),
                                                  response: $0.cacheControl, request: request)
        }
        switch UpstreamFailure.answer(kind, hasFallback: fallback != nil, stale: candidate, validating: validating, shared: shared,
                                      disconnectedGrace: disconnectedGrace) {
        case .serveFallback:
            defer { fallback = nil }
            return .serve(fallback!, detail: nil)
        case .serveStale:
            defer { stale = nil }
            return .serve(stale!, detail: nil)
        case .serveDisconnected:
            defer { stale = nil }
            return .serve(stale!, detail: "upstream-unreachable")
        case .gatewayError(let status):
            let revalidating = validating.map { Stale.mustRevalidate($0, shared: shared) } ?? false
            return .gatewayError(status, message: revalidating
                                 ? "upstream failed to revalidate a must-revalidate response: \(detail)" : detail)
        case .passThrough:
            return .passThrough
        }
    }
}
