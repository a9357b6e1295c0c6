import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders

/// Why and how a request goes upstream, as its lookup decided
/// (`LookupPlan.Forward`): the reason Cache-Status gives, the stored
/// response being validated, what may stand in if the upstream fails, and
/// the fields that go with it. A request that is not looked up goes with
/// the defaults (`fwd=method`, nothing validated or standing in). A value
/// the exchange's machine holds (nil for a hit: its exchange initialises
/// one tag, not these fields) and changes itself.
struct Forwarding {
    var reason: CacheStatus.Forward = .method
    /// The stored response a conditional upstream request validates.
    var validating: CachedResponse?
    /// What may answer if the upstream fails before a response.
    var standIns = StandIns()
    /// reloadIgnoringLocalAndRemoteCacheData: Cache-Control: no-cache upstream.
    var noCacheUpstream = false
    /// A stored piece the upstream is asked to complete
    /// (`PartialContent.restRequest`): the client gets its bytes and the
    /// rest, in their order.
    var completing: Completion?
    /// That completion, when the piece's bytes follow the upstream's, once
    /// those stream: sent when they are over.
    var trailing: Completion?
    /// That completion, when the piece lies inside what the client wants:
    /// the upstream's parts and the piece's bytes, put in order as they come.
    var around: CompletionAround?
    /// The upstream failure being stood in for.
    var failure: (kind: UpstreamFailure.Kind, detail: String)?

    init() {}

    /// The stored piece a GET may be answered from in part, with the rest
    /// asked of the upstream (`fwd=partial`): one of the variant the
    /// request selects (`facts`: its Vary fields), in memory or in a file
    /// that still holds it, for a client that takes its coding, which holds
    /// the start or the end of what the client wants (all of it, or the
    /// one range it asks for, its If-Range holding against the piece), or
    /// lies inside it (the upstream is asked for the bytes on both sides).
    static func completable(among variants: Variants, for request: RequestHead, facts: RequestFacts) -> Completion? {
        guard request.method == "GET" else { return nil }
        let range = request.combinedHeader("range")
        for entry in variants.reversed() {
            guard entry.status == 206, entry.storedBody.isReadable, let held = entry.piece, Lookup.matches(facts, entry),
                  !ClientCoding.mustDecode(entry, for: request) else { continue }
            let wanted = range == nil ? PartialContent.Piece(first: 0, last: held.length - 1, length: held.length)
                : PartialContent.wanted(range: range, ifRange: request.header("if-range"), piece: held, etag: entry.etag,
                                        lastModified: entry.lastModified)
            guard let wanted, !PartialContent.gaps(of: held, wanted: wanted).isEmpty else { continue }
            return Completion(piece: entry, held: held, wanted: wanted, answersWhole: range == nil)
        }
        return nil
    }

    /// `isGet`: only a GET is sent conditionally (a HEAD's 304 would
    /// refresh nothing); `requestStaleIfError`: the request's (it counts
    /// for a stale stand-in); `disconnectedGrace`: how stale a stand-in for
    /// an unreachable upstream may be (seconds).
    init(_ how: LookupPlan.Forward, variants: Variants, isGet: Bool, requestStaleIfError: Int?, disconnectedGrace: Int) {
        // Kept until the upstream answers: their own blocks (see `CachedResponse.owned`).
        let variants = variants.owned()
        reason = how.reason
        if let index = how.validate, variants[index].hasValidator, isGet { validating = variants[index] }
        if let index = how.staleCandidate {
            (standIns.stale, standIns.requestStaleIfError, standIns.disconnectedGrace) = (variants[index], requestStaleIfError,
                                                                                          disconnectedGrace)
        }
        if let index = how.fallback { standIns.fallback = variants[index] }
        noCacheUpstream = how.noCacheUpstream
    }

    /// The upstream request's fields: the client's as forwarded
    /// (`UpstreamHeaders.forward`), with the validators of what is
    /// validated, and no-cache for a reload through remote caches.
    func upstreamFields(_ forwarded: HeaderFields, among variants: Variants) -> HeaderFields {
        var fields = forwarded
        if let validating { UpstreamHeaders.addValidators(for: validating, among: variants, to: &fields) }
        if let completing, let (range, ifRange) = PartialContent.restRequest(for: completing.held, wanted: completing.wanted,
                                                                             etag: completing.piece.etag) {
            fields.remove("range")
            fields.remove("if-range")
            fields.append("range", range)
            if let ifRange { fields.append("if-range", ifRange) }
        }
        if noCacheUpstream {
            fields.remove("cache-control")
            fields.remove("pragma")
            fields.append("cache-control", "no-cache")
            fields.append("pragma", "no-cache")
        }
        return fields
    }

    /// The upstream failed before a response: what answers in its place
    /// (`StandIns`, told what was being validated).
    mutating func standIn(_ kind: UpstreamFailure.Kind, detail: String, now: Int64, shared: Bool) -> StandIns.Answer {
        standIns.answer(kind, detail: detail, validating: validating?.cacheControl, now: now, shared: shared)
    }

    /// Whether a cache lookup goes upstream as a GET: a HEAD that found
    /// nothing stored, so that the response is stored for the requests
    /// that follow (as nginx's proxy_cache_convert_head and Varnish do); its
    /// client gets the head at once, the body is stored without it. A HEAD
    /// that validates a stored response goes as a HEAD (section 4.3.5).
    static func fetchesAsGet(_ method: String, reason: CacheStatus.Forward) -> Bool {
        method == "HEAD" && (reason == .uriMiss || reason == .varyMiss)
    }

    /// Whether the fetch may be shared with requests collapsed onto it: not
    /// a completion (its upstream answer is the rest alone).
    var mayShare: Bool { completing == nil }
}

/// A stored piece completed by the upstream for one client: what it
/// holds, what the client wants (all of the representation, or the range
/// it asked for), and in which order the two go.
struct Completion {
    let piece: CachedResponse
    /// The bytes the piece holds (its Content-Range).
    let held: PartialContent.Piece
    let wanted: PartialContent.Piece
    /// The client asked for all of it (a 200), not a range (a 206).
    let answersWhole: Bool

    /// The piece holds the start of what is wanted: its bytes go first.
    var pieceLeads: Bool { held.first <= wanted.first }
    /// The piece lies inside what is wanted: bytes on both sides are asked for.
    var liesInside: Bool { wanted.first < held.first && held.last < wanted.last }

    /// Whether the upstream's 206 (its fields) completes the piece: the
    /// rest it lacks, of the same representation (`PartialContent`).
    func isCompleted(by fields: HeaderFields) -> Bool {
        if liesInside {
            return PartialContent.mayCompleteAround(held, wanted: wanted, etag: piece.etag, contentRange: fields["content-range"],
                                                    contentType: fields["content-type"], restETag: fields["etag"])
        }
        return PartialContent.completes(held, wanted: wanted, etag: piece.etag, contentRange: fields["content-range"],
                                        restETag: fields["etag"])
    }
    /// Kept until the upstream answers: the piece in its own block (see `CachedResponse.owned`).
    func owned() -> Completion { Completion(piece: piece.owned(), held: held, wanted: wanted, answersWhole: answersWhole) }

    /// The piece's bytes the client gets (all of them that it wants).
    var sent: PartialContent.Piece {
        PartialContent.Piece(first: max(held.first, wanted.first), last: min(held.last, wanted.last), length: held.length)
    }
}
