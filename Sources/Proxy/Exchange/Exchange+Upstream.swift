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
        guard case .passInterim = machine.interim() else { return }
        sink.sendInterim(status: status, fields: fields, for: request)
    }

    func takes(_ response: UpstreamResponse) -> Bool {
        perform(machine.upstreamHead(response, now: cache.clock.now()))
    }

    /// Writes the upstream's head for the client (`stored`: the response
    /// is going into the store).
    func streams(_ response: UpstreamResponse, stored: Bool) {
        let head = machine.headSent(response, stored: stored, client: request,
                                    mayFinishWithoutClient: fetch?.mayFinishWithoutClient == true)
        let age = isCacheLookup ? Freshness.correctedInitialAge(response.timing) : nil
        if let completion = head.completion {
            // The stored piece's bytes and the rest as it comes, in their
            // order: what the client asked for (the whole, or its range).
            // A multipart 206 (the piece lay inside) stands for the piece's type.
            let typed = completion.liesInside ? completion.piece : nil
            let answered = completion.answersWhole ? response.completed(length: completion.held.length, typedAs: typed)
                : response.completed(range: completion.wanted, typedAs: typed)
            answer.upstreamHead(answered, for: request, age: age, cacheStatus: head.cacheStatus, notModified: head.notModified)
            if completion.pieceLeads && !head.notModified { sendStored(completion.sent, of: completion) }
            return
        }
        answer.upstreamHead(response, for: request, age: age, cacheStatus: head.cacheStatus, notModified: head.notModified)
        if head.endsAtHead {
            // A HEAD fetched as a GET is answered now: its body is stored only
            // if the fetch goes on without the client.
            // The HEAD has its answer; the GET's body goes to the store alone
            // (`UpstreamFetch.clientLeft`: when storable within finish_store_limit).
            let fetch = self.fetch
            self.fetch = nil
            fetch?.clientLeft()
            complete()
        }
    }

    var isCongested: Bool { sink.isBodyCongested }

    func deliver(_ chunk: Bytes) {
        if let completion = machine.assembledCompletion { return withExtendedLifetime(chunk) { deliverAround(chunk.buffer, completion) } }
        sink.sendBody(chunk)
    }
    func deliver(copying bytes: UnsafeRawBufferPointer) {
        if let completion = machine.assembledCompletion { return deliverAround(bytes, completion) }
        sink.sendBody(copying: bytes)
    }
    /// `whole`: as long as it said (else the connection is cut, as when the
    /// response broke off).
    func endsBody() -> Bool {
        guard let completion = machine.assembledCompletion else { return true }
        return machine.finishAssembly { send($0, completion) } ?? true
    }

    func responseEnded(whole: Bool) {
        if let trailing = machine.bodyEnded(whole: whole) { sendStored(trailing.sent, of: trailing) }
        if let completion = machine.assembledCompletion {
            // A body that did not hold every byte wanted is cut, as one that
            // broke off, and the piece goes: the next request asks plainly
            // rather than making the same request up again.
            let assembled = whole && machine.finishAssembly { send($0, completion) } == true
            if !assembled { cache.store.remove(key) }
            return complete(closing: sink.endBody(whole: assembled))
        }
        complete(closing: sink.endBody(whole: whole))
    }

    /// Upstream bytes of a completion around a stored piece: its parts'
    /// data and the piece's bytes, in order, as the machine assembles them.
    private func deliverAround(_ bytes: UnsafeRawBufferPointer, _ completion: Completion) {
        machine.assemble(bytes) { send($0, completion) }
    }

    /// (Called while the machine assembles: it uses the request and the sink, never the machine.)
    private func send(_ output: CompletionAround.Output, _ completion: Completion) {
        switch output {
        case .upstream(let bytes): sink.sendBody(copying: bytes)
        case .stored(let sent): sendStored(sent, of: completion)
        }
    }

    /// Bytes of a completed piece the client gets, wherever the piece is kept.
    private func sendStored(_ sent: PartialContent.Piece, of completion: Completion) {
        guard request.method != "HEAD" else { return }
        let offset = sent.first - completion.held.first
        sink.sendBody(stored: completion.piece.storedBody.slice(offset..<(offset + sent.count)))
    }
    func responseCut() { complete(closing: true) }
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String) {
        perform(machine.upstreamFailed(kind, detail: detail, now: cache.clock.now()))
    }
}
