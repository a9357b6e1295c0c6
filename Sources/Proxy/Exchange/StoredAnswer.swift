import CacheSemantics
import CacheStorage
import HTTP1

/// What a stored response becomes for one request: a 304 to the client's
/// own conditional, the whole response, one range of it (206) or a 416.
enum StoredAnswer: Equatable {
    case notModified
    case whole
    /// Bytes `range` of a representation of `length` bytes; the stored
    /// body begins with byte `stored` of it (0 but for a stored piece).
    case partial(ClosedRange<Int>, length: Int, stored: Int)
    /// 416 for a representation of `length` bytes.
    case unsatisfiable(length: Int)

    /// Validators are read from the stored head only when the client sent
    /// a conditional, and the Range field only on a GET of a 200 or of a
    /// stored piece (206).
    static func choose(for request: RequestHead, entry: CachedResponse) -> StoredAnswer {
        guard entry.status == 200 || entry.status == 206 else { return .whole }
        if hasConditional(request),
           clientIsNotModified(request, etag: entry.etag, lastModified: entry.lastModified, dateValue: entry.timing.dateValue ?? entry.timing.responseTime) {
            return .notModified
        }
        if entry.status == 206 { return piece(for: request, entry: entry) }
        // The validators are read from the stored head only for a Range.
        guard asksForRange(request) else { return .whole }
        return range(for: request, length: entry.bodyLength, etag: entry.etag, lastModified: entry.lastModified)
    }

    /// The same for a representation described by its facts (a stored gzip
    /// body as a client gets it decoded: `ClientCoding`).
    static func choose(for request: RequestHead, status: Int, length: Int, etag: String?, lastModified: String?,
                       dateValue: Int64) -> StoredAnswer {
        guard status == 200 else { return .whole }
        if hasConditional(request), clientIsNotModified(request, etag: etag, lastModified: lastModified, dateValue: dateValue) {
            return .notModified
        }
        guard asksForRange(request) else { return .whole }
        return range(for: request, length: length, etag: etag, lastModified: lastModified)
    }

    private static func asksForRange(_ request: RequestHead) -> Bool {
        request.method == "GET" && request.header("range") != nil
    }

    private static func range(for request: RequestHead, length: Int, etag: String?, lastModified: String?) -> StoredAnswer {
        switch ByteRange.evaluate(range: request.combinedHeader("range"), ifRange: request.header("if-range"),
                                  length: length, etag: etag, lastModified: lastModified) {
        case .full: return .whole
        case .partial(let first, let last): return .partial(first...last, length: length, stored: 0)
        case .unsatisfiable: return .unsatisfiable(length: length)
        }
    }

    /// A stored piece answers only the ranges it holds (`usable` left the
    /// others out of the lookup); nothing else of it is ever sent.
    private static func piece(for request: RequestHead, entry: CachedResponse) -> StoredAnswer {
        guard let piece = entry.piece else { return .unsatisfiable(length: 0) }
        switch answer(from: piece, of: entry, for: request) {
        case .partial(let first, let last): return .partial(first...last, length: piece.length, stored: piece.first)
        case .unsatisfiable, .notHeld: return .unsatisfiable(length: piece.length)
        }
    }

    private static func answer(from piece: PartialContent.Piece, of entry: CachedResponse,
                               for request: RequestHead) -> PartialContent.Answer {
        guard request.method == "GET" else { return .notHeld }
        return PartialContent.answer(range: request.combinedHeader("range"), ifRange: request.header("if-range"), piece: piece,
                                     etag: entry.etag, lastModified: entry.lastModified)
    }

    /// Whether a stored piece (206) is among `variants`.
    @inline(__always)
    static func hasPiece(_ variants: Variants) -> Bool {
        for entry in variants where entry.status == 206 { return true }
        return false
    }

    /// The stored variants that may answer `request`: a stored piece (206)
    /// only for a range it holds, and not to a client that would need its
    /// gzip decoded (a piece of gzip cannot be). Asked only when `hasPiece`:
    /// the usual lookup, with none, is not copied.
    static func usable(_ variants: Variants, for request: RequestHead) -> Variants {
        Variants(variants.filter { entry in
            guard entry.status == 206 else { return true }
            guard let piece = entry.piece, !ClientCoding.mustDecode(entry, for: request) else { return false }
            return answer(from: piece, of: entry, for: request) != .notHeld
        })
    }

    /// Whether a body follows (a file body is opened for it).
    var sendsBody: Bool {
        switch self {
        case .whole, .partial: return true
        case .notModified, .unsatisfiable: return false
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

extension CachedResponse {
    /// The bytes a stored 206 holds (`storedPiece`).
    var piece: PartialContent.Piece? { storedPiece }
}
