/// Serving stale responses: RFC 9111 section 4.2.4 and RFC 5861.
public enum Stale {
    /// Whether directives forbid serving this response stale at all
    /// (must-revalidate; proxy-revalidate and s-maxage in a shared cache;
    /// no-cache, which needs validation every time).
    public static func forbidden(_ response: CacheControl, shared: Bool) -> Bool {
        response.mustRevalidate || response.noCache
            || (shared && (response.proxyRevalidate || response.sMaxAge != nil))
    }

    /// Section 4.2.4 / 5.2.2.2 and 5.2.2.8: must-revalidate (and, in a
    /// shared cache, proxy-revalidate): when validation fails, a 504 rather
    /// than the stale response or the error.
    public static func mustRevalidate(_ response: CacheControl, shared: Bool) -> Bool {
        response.mustRevalidate || (shared && response.proxyRevalidate)
    }

    /// RFC 5861 section 3: within `stale-while-revalidate` seconds past
    /// expiry, the stale response may be served while it is revalidated in
    /// the background.
    public static func mayServeWhileRevalidating(lifetime: Int, currentAge: Int, response: CacheControl,
                                                 shared: Bool) -> Bool {
        guard let window = response.staleWhileRevalidate, !forbidden(response, shared: shared) else { return false }
        let staleness = currentAge.minusSaturating(lifetime)
        return staleness >= 0 && staleness <= window
    }

    /// RFC 5861 section 4: when the upstream fails (error, timeout, 5xx),
    /// a response stale by at most `stale-if-error` seconds (from the
    /// response, or the request's own) may be served instead.
    public static func mayServeOnError(lifetime: Int, currentAge: Int, response: CacheControl, request: CacheControl,
                                       shared: Bool) -> Bool {
        guard !forbidden(response, shared: shared) else { return false }
        let window = max(response.staleIfError ?? -1, request.staleIfError ?? -1)
        return window >= 0 && currentAge.minusSaturating(lifetime) <= window
    }

    /// Section 4.2.4 ("disconnected"): when the upstream cannot be reached
    /// at all (no connection, reset or timeout before any response byte),
    /// a response stale by at most `grace` seconds may be served unless
    /// its directives forbid serving it stale (0: never).
    public static func mayServeDisconnected(lifetime: Int, currentAge: Int, response: CacheControl, shared: Bool,
                                            grace: Int) -> Bool {
        withinGrace(lifetime: lifetime, currentAge: currentAge, response: response, shared: shared, grace: grace)
    }

    /// Stale by at most `grace` seconds (0: never), and nothing in its
    /// directives forbids serving it stale.
    public static func withinGrace(lifetime: Int, currentAge: Int, response: CacheControl, shared: Bool, grace: Int) -> Bool {
        grace > 0 && !forbidden(response, shared: shared) && currentAge.minusSaturating(lifetime) <= grace
    }

    /// Status codes that count as an upstream error for stale-if-error.
    public static func isErrorStatus(_ status: Int) -> Bool {
        status == 500 || status == 502 || status == 503 || status == 504
    }
}
