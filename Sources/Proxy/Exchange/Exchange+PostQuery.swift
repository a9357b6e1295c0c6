import CacheSemantics
import HTTP1
import Routing
import Telemetry

/// A POST cached as a query (`PostQuery`), or a QUERY: its body is held
/// until complete, then keys a lookup like a GET's; a body that outgrows
/// the route's limit, a GraphQL write or a listed JSON-RPC method goes
/// through uncached (and a POST invalidates, as an unsafe request does).
extension Exchange {
    func holdPostBody(_ bytes: UnsafeRawBufferPointer) {
        guard let post, post.query != nil else { return }
        // Held bodies count against request_buffer_total with those held for
        // the upstream: beyond it, this one goes through uncached.
        let overTotal = !post.reservation.take(bytes.count)
        if overTotal { WorkerStats.bump(upstream.counters.streamedBodies) }
        let overflow = overTotal ? post.query?.body ?? [] : post.query?.add(bytes)
        guard let overflow else { return }
        post.reservation.releaseAll()  // (what goes upstream now is the fetch's to count)
        // Too large to key: uncached, the bytes so far first, the rest as it comes.
        post.query = nil
        perform(machine.start())
        overflow.withUnsafeBytes { fetch?.requestBody($0) }
        fetch?.requestBody(bytes)
    }

    /// A QUERY (RFC 10008) is always keyed by its body and Content-Type:
    /// one without a body at once, one whose body may fit held until
    /// complete; a larger one goes through uncached (and, being safe,
    /// invalidates nothing).
    func keyQueryMethod(_ routes: RouteTable) {
        // One sent incrementally (`Incremental: ?1`) is not held: it goes through uncached.
        if request.framing != .none && IncrementalStream.isIncremental(request.header("incremental")) { return }
        let caching = routes.queryCaching(key, contentType: request.header("content-type"))
        if request.framing == .none {
            guard case .query(let digest, let normalized) = PostQuery(caching: caching).verdict() else { return }
            return becomeQuery(key: PostQuery.key(urlKey: key, digest: digest, keysHost: routes.keysHost), digest: digest, normalized: normalized)
        }
        if case .contentLength(let n) = request.framing, n > caching.maxBody { return }
        post = HeldPost(PostQuery(caching: caching),
                        reservation: HeldBodyReservation(stats: upstream.stats, limit: upstream.configuration.requestBufferTotalBytes))
    }

    func postBodyComplete() {
        guard let post, let query = post.query else { return }
        post.query = nil
        post.body = query.body
        if case .query(let digest, let normalized) = query.verdict() {
            let routes = upstream.configuration.routes
            becomeQuery(key: PostQuery.key(urlKey: key, digest: digest, keysHost: routes.keysHost),
                        digest: digest, normalized: normalized)
        }
        perform(machine.start())
    }
}

/// A POST's body while it is held to key a query, and once complete (it
/// goes with every upstream request the exchange makes).
final class HeldPost {
    var query: PostQuery?
    var body: [UInt8]?
    /// Its share of request_buffer_total, given back when the exchange ends.
    let reservation: HeldBodyReservation

    init(_ query: PostQuery, reservation: HeldBodyReservation) {
        self.query = query
        self.reservation = reservation
    }
}
