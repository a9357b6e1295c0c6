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
    /// (The caller counts a refusal, `count`: reading the counters on
    /// every request cost a retain.)
    static func refusal(_ rules: EdgeRules, request: RequestHead, client: IPAddress, now: UInt64) -> Refusal? {
        if !rules.admits(client) {
            return Refusal(status: 403, message: "forbidden: \(client) may not use this", retryAfter: nil)
        }
        guard let limiter = rules.limiter else { return nil }
        let decision = limiter._withUnsafeGuaranteedRef { limiter in
            var hash = RateLimiter.hash(client)
            if let name = limiter.keyField, let value = request.combinedHeader(name) { hash = RateLimiter.hash(value) }
            return limiter.take(hash, now: now)
        }
        guard case .refuse(let wait) = decision else { return nil }
        return Refusal(status: 429, message: TooManyRequests.message, retryAfter: CellRate.retryAfterSeconds(wait))
    }

    /// A refusal in /metrics.
    static func count(_ refusal: Refusal, in counters: WorkerStats) {
        if refusal.retryAfter == nil { WorkerStats.bump(counters.accessDenied) } else { WorkerStats.bump(counters.rateLimited) }
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
/// fields dropped, fields set and added (the rules' own when they hold
/// no variable, else rendered for this request). Unsafe, and safe: the
/// exchange holds the rules while it answers; the hit path reads them
/// without reference counting (`FieldNames` and the lines are plain values).
struct ResponseEdits {
    let drops: FieldNames
    /// The rules' `EdgeRules.generation`.
    let generation: UInt64
    /// Whether fields were rendered for this request (read without a retain).
    let rendersFields: Bool
    /// The fields set and added as HTTP/1.1 lines, when they hold no
    /// variable (else none: they are rendered per request).
    let literalLines: UnsafeRawBufferPointer
    private unowned(unsafe) let rules: EdgeRules
    /// Held by the exchange (a plain value here: copies count nothing).
    private unowned(unsafe) let renderedFields: RenderedFields?

    init(rules: EdgeRules, rendered: RenderedFields?) {
        (drops, literalLines, self.rules, renderedFields) = (rules.responseDrops, rules.responseLiteralLines, rules, rendered)
        generation = rules.generation
        rendersFields = rendered != nil
    }

    var fields: [HeaderField] { renderedFields?.fields ?? rules.responseLiteralFields ?? [] }

    /// Whether a stored or forwarded field of this (lowercased) name is left out.
    @inline(__always)
    func drops(_ name: String) -> Bool { !drops.isEmpty && drops.contains(name) }

    /// The fields as HTTP/1.1 lines (`literal`: the literal ones too).
    func appendLines(to out: inout [UInt8], literal: Bool = true) {
        guard let renderedFields else { return literal ? out.append(contentsOf: literalLines) : () }
        for field in renderedFields.fields { ResponseSerializer.appendField(field.name, field.value, to: &out) }
    }
}

/// Response fields rendered for one request (a value held a variable).
final class RenderedFields {
    var fields: [HeaderField] = []
    var requestID: String?
}
