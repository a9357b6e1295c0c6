import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders

/// Why and how a request goes upstream, as its lookup decided
/// (`LookupPlan.Forward`): the reason Cache-Status gives, the stored
/// response being validated, what may stand in if the upstream fails, and
/// the fields that go with it. A request that is not looked up goes with
/// the defaults (`fwd=method`, nothing validated or standing in). A class:
/// made only for a request that goes upstream, so a hit's exchange
/// carries one word for it, not its fields.
final class Forwarding {
    var reason: CacheStatus.Forward = .method
    /// The stored response a conditional upstream request validates.
    var validating: CachedResponse?
    /// What may answer if the upstream fails before a response.
    var standIns = StandIns()
    /// reloadIgnoringLocalAndRemoteCacheData: Cache-Control: no-cache upstream.
    var noCacheUpstream = false
    /// A stored piece that starts or ends the representation, which the
    /// upstream is asked to complete (`PartialContent.restRequest`): the
    /// client gets it and the rest, in their order.
    var completing: CachedResponse?
    /// That piece, when it ends the representation, once the upstream's
    /// bytes before it stream: sent when they are over.
    var trailing: CachedResponse?

    init() {}

    /// The stored piece a GET without Range may be answered from, with
    /// the rest asked of the upstream (`fwd=partial`): one of the variant
    /// the request selects (`facts`: its Vary fields), in memory or in a
    /// file that still holds it, for a client that takes its coding.
    static func completable(among variants: Variants, for request: RequestHead, facts: RequestFacts) -> CachedResponse? {
        guard request.method == "GET", request.header("range") == nil else { return nil }
        return variants.last { entry in
            guard entry.status == 206, entry.bodyFile?.isReadable ?? true, let piece = entry.piece, Lookup.matches(facts, entry),
                  !ClientCoding.mustDecode(entry, for: request) else { return false }
            return PartialContent.restRequest(for: piece, etag: entry.etag) != nil
        }
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
        if let piece = completing?.piece, let (range, ifRange) = PartialContent.restRequest(for: piece, etag: completing?.etag) {
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
    func standIn(_ kind: UpstreamFailure.Kind, detail: String, now: Int64, shared: Bool) -> StandIns.Answer {
        standIns.answer(kind, detail: detail, validating: validating?.cacheControl, now: now, shared: shared)
    }

    /// The Cache-Status value of an answer from upstream.
    func cacheStatus(stored: Bool, fwdStatus: Int? = nil, detail: String? = nil) -> String {
        CacheStatus.forward(reason, stored: stored, fwdStatus: fwdStatus, detail: detail)
    }
}
