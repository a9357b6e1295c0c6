import CacheSemantics
import CacheStorage
import HTTP1

/// What a stored response becomes for one request: a 304 to the client's
/// own conditional, the whole response, one range of it (206) or a 416.
enum StoredAnswer: Equatable {
    case notModified
    case whole
    case partial(ClosedRange<Int>)
    case unsatisfiable

    /// Validators are read from the stored head only when the client sent
    /// a conditional, and the Range field only on a GET of a 200.
    static func choose(for request: RequestHead, entry: CachedResponse) -> StoredAnswer {
        guard entry.status == 200 else { return .whole }
        if hasConditional(request),
           clientIsNotModified(request, etag: entry.etag, lastModified: entry.lastModified, dateValue: entry.timing.dateValue ?? entry.timing.responseTime) {
            return .notModified
        }
        guard request.method == "GET", request.header("range") != nil else { return .whole }
        switch ByteRange.evaluate(range: request.combinedHeader("range"), ifRange: request.header("if-range"),
                                  length: entry.bodyLength, etag: entry.etag, lastModified: entry.lastModified) {
        case .full: return .whole
        case .partial(let first, let last): return .partial(first...last)
        case .unsatisfiable: return .unsatisfiable
        }
    }

    /// Whether the request carries a validator of its own (RFC 9110 section 13.1).
    static func hasConditional(_ request: RequestHead) -> Bool {
        request.header("if-none-match") != nil || request.header("if-modified-since") != nil
    }

    /// Whether the client's conditional matches a response with these
    /// validators: it then gets a 304 instead of the body.
    static func clientIsNotModified(_ request: RequestHead, etag: String?, lastModified: String?, dateValue: Int64?) -> Bool {
        guard hasConditional(request) else { return false }
        return Validation.clientNotModified(ifNoneMatch: request.combinedHeader("if-none-match"),
                                            ifModifiedSince: request.header("if-modified-since"),
                                            etag: etag, lastModified: lastModified, dateValue: dateValue)
    }
}
