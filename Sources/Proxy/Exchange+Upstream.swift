import CacheSemantics
import CacheStorage
import EventLoop
import HTTPHeaders

/// What the fetch tells the exchange: the upstream's head (answered with,
/// or by a stand-in for a failure, or by a 304's refresh), body and end.
extension Exchange: FetchClient {
    var upstreamName: String? { route?.upstream }

    /// The upstream's head: true when it is the answer; false when this
    /// exchange answered otherwise (a stand-in for a 5xx, a 304's
    /// refresh) and the rest of the fetch is not wanted.
    /// An interim response from the upstream, passed on while the client
    /// still waits for its answer (not once a stand-in or stored answer
    /// went out). Its fields are never stored nor merged into the answer.
    func interim(status: Int, fields: HeaderFields) {
        guard machine.state == .forwarding else { return }
        sink.sendInterim(status: status, fields: fields, for: request)
    }

    func takes(_ response: UpstreamResponse) -> Bool {
        perform(machine.upstreamHead(response, now: cache.clock.now()))
    }

    /// Writes the upstream's head for the client (`stored`: the response
    /// is going into the store).
    func streams(_ response: UpstreamResponse, stored: Bool) {
        let head = machine.headSent(status: response.status, stored: stored)
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        if let piece = head.piece {
            // The stored piece and the rest as it comes, in their order:
            // the whole, for a client that asked for it.
            answer.upstreamHead(response.completed(length: piece.piece?.length ?? 0), for: request, age: age,
                                cacheStatus: head.cacheStatus)
            if head.pieceLeads { sendStoredPiece(piece) }
            return
        }
        answer.upstreamHead(response, for: request, age: age, cacheStatus: head.cacheStatus)
    }

    var isCongested: Bool { sink.isBodyCongested }

    func deliver(_ chunk: Bytes) { sink.sendBody(chunk) }
    func deliver(copying bytes: UnsafeRawBufferPointer) { sink.sendBody(copying: bytes) }
    /// `whole`: as long as it said (else the connection is cut, as when the
    /// response broke off).
    func responseEnded(whole: Bool) {
        if let trailing = machine.bodyEnded(whole: whole) { sendStoredPiece(trailing) }
        complete(closing: sink.endBody(whole: whole))
    }

    /// A stored piece's bytes, from memory or its file.
    private func sendStoredPiece(_ piece: CachedResponse) {
        guard request.method != "HEAD" else { return }
        if let file = piece.bodyFile {
            sink.sendBody(file: file)
        } else {
            sink.sendBody(copying: piece.body)
        }
    }
    func responseCut() { complete(closing: true) }
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String) {
        perform(machine.upstreamFailed(kind, detail: detail, now: cache.clock.now()))
    }
}
