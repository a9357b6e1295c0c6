/// What to answer when the upstream fails before anything was sent to the
/// client: RFC 9111 sections 4.2.4 and 5.2.2.2 (must-revalidate), RFC 5861
/// section 4 (stale-if-error) and the request policy's fallback
/// (networkElseCache). One decision for every place a failure shows up:
/// a transport error, a timeout, an invalid response head, a 5xx.
public enum UpstreamFailure {
    public enum Kind: Equatable, Sendable {
        /// No connection, or it broke before a response (after any retries).
        case unreachable
        case timedOut
        /// A response head that cannot be framed (RFC 9112 section 6.3).
        case invalidResponse
        /// A complete response head with this status.
        case status(Int)
    }

    /// A stale stored response that might stand in, with what decides it.
    public struct StaleCandidate: Sendable {
        public var lifetime: Int
        public var currentAge: Int
        public var response: CacheControl
        public var request: CacheControl
        public init(lifetime: Int, currentAge: Int, response: CacheControl, request: CacheControl) {
            self.lifetime = lifetime
            self.currentAge = currentAge
            self.response = response
            self.request = request
        }
    }

    public enum Answer: Equatable, Sendable {
        /// The policy's fallback: the stored response, however stale.
        case serveFallback
        /// The stale candidate (stale-if-error).
        case serveStale
        /// The stale candidate, because the upstream cannot be reached
        /// (section 4.2.4, within the configured grace).
        case serveDisconnected
        /// An error generated here: 504 or 502.
        case gatewayError(Int)
        /// Not a failure to stand in for: the upstream's response goes to the client.
        case passThrough
    }

    /// - hasFallback: the policy names a stored response to serve instead
    ///   (when serving it fails, ask again with false).
    /// - validating: the directives of the stored response this request
    ///   was revalidating, if any.
    /// - disconnectedGrace: how stale (seconds) a response may be served
    ///   when the upstream is unreachable or timed out (0: not at all).
    public static func answer(_ kind: Kind, hasFallback: Bool, stale: StaleCandidate?, validating: CacheControl?,
                              shared: Bool, disconnectedGrace: Int = 0) -> Answer {
        if case .status(let status) = kind, !Stale.isErrorStatus(status) {
            // 501, 505, ...: no stand-in, but never passed off as a revalidation.
            if status >= 500, let validating, Stale.mustRevalidate(validating, shared: shared) { return .gatewayError(504) }
            return .passThrough
        }
        if hasFallback { return .serveFallback }
        if let stale, kind == .unreachable || kind == .timedOut,
           Stale.mayServeDisconnected(lifetime: stale.lifetime, currentAge: stale.currentAge, response: stale.response,
                                      shared: shared, grace: disconnectedGrace) {
            return .serveDisconnected
        }
        if let stale, Stale.mayServeOnError(lifetime: stale.lifetime, currentAge: stale.currentAge, response: stale.response,
                                            request: stale.request, shared: shared) {
            return .serveStale
        }
        // Section 4.2.4: a must-revalidate response is never served stale,
        // and no error is passed off as its revalidation.
        if let validating, Stale.mustRevalidate(validating, shared: shared) { return .gatewayError(504) }
        switch kind {
        case .timedOut: return .gatewayError(504)
        case .unreachable, .invalidResponse: return .gatewayError(502)
        case .status: return .passThrough
        }
    }
}

/// RFC 9110 section 9.2.2: which requests may go upstream again after the
/// connection failed before any response byte.
public enum Retry {
    /// Idempotent methods only, and never a request with a body (a streamed
    /// body cannot be replayed), within `limit` attempts.
    public static func mayRetry(method: String, hasBody: Bool, failedAttempts: Int, limit: Int) -> Bool {
        guard !hasBody, failedAttempts < limit else { return false }
        switch method {
        case "GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE", "QUERY": return true
        default: return false
        }
    }
}
