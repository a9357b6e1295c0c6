import EdgeControls
import HTTP1
import HTTPHeaders
import Telemetry

/// The first two edge controls, in their order: the access list, then the
/// rate limit. A request either passes or is answered here (403, 429)
/// before any lookup: hits count against the limit too.
enum EdgeGate {
    struct Refusal: Equatable {
        let status: Int
        let message: String
        /// Retry-After's seconds (429).
        let retryAfter: Int?
    }

    /// The address a request comes from: the socket's, or, from a trusted
    /// proxy, the one its X-Forwarded-For (or Forwarded) names.
    static func client(of request: RequestHead, socket: IPAddress, trusted: AddressList?) -> IPAddress {
        guard let trusted else { return socket }
        return ClientAddress.resolve(socket: socket, trusted: trusted, forwardedFor: request.combinedHeader("x-forwarded-for"),
                                     forwarded: request.combinedHeader("forwarded"))
    }

    /// Nil when the request may go on; `now`: monotonic microseconds.
    static func refusal(_ rules: EdgeRules, request: RequestHead, client: IPAddress, now: UInt64, counters: WorkerStats) -> Refusal? {
        if !rules.access.isEmpty, !rules.access.admits(client) {
            WorkerStats.bump(counters.accessDenied)
            return Refusal(status: 403, message: "forbidden: \(client) may not use this", retryAfter: nil)
        }
        guard let limiter = rules.rateLimit else { return nil }
        var hash = RateLimiter.hash(client)
        if case .header(let name) = limiter.limit.key, let value = request.combinedHeader(name) { hash = RateLimiter.hash(value) }
        guard case .refuse(let wait) = limiter.take(hash, now: now) else { return nil }
        WorkerStats.bump(counters.rateLimited)
        return Refusal(status: 429, message: "too many requests: over this client's rate limit", retryAfter: CellRate.retryAfterSeconds(wait))
    }

    /// Request rules (and `strip_cookies`) on fields going upstream: a
    /// client's request's, or a background refresh's in its name.
    static func applyRequestRules(_ edge: EdgeRules, to fields: inout HeaderFields, _ values: @autoclosure () -> RequestValues) {
        if edge.stripCookies { fields.remove("cookie") }
        guard !edge.requestHeaders.isEmpty else { return }
        edge.requestHeaders.apply(to: &fields, values())
    }
}

/// What a request's response rules do to the head its client is sent:
/// fields dropped, fields set and added (rendered for this request).
/// Unsafe, and safe: the exchange holds the rules while it answers.
struct ResponseEdits {
    unowned(unsafe) let rules: EdgeRules
    let fields: [HeaderField]

    var headerRules: HeaderRules { rules.responseHeaders }

    /// Whether a stored or forwarded field of this (lowercased) name is left out.
    @inline(__always)
    func drops(_ name: String) -> Bool { !rules.responseHeaders.dropped.isEmpty && rules.responseHeaders.drops(name) }
}
