import CacheSemantics
import CacheStorage
import EventLoop

/// A stored gzip body for a client that does not take gzip, decoded as the
/// client drains (`ClientCoding`, `DecodingBody`): the head says what the
/// decoded representation is (its length from the gzip trailer), then at
/// most a turn's worth is decoded per loop turn, and nothing while the
/// client is behind. A body found corrupt or not as long as declared
/// before anything was sent is `undecodable` (the request goes upstream
/// for an identity copy); after its head, the connection is cut, as for an
/// upstream body that breaks off; either way the worker remembers it, so
/// the next such client goes upstream instead.
extension Exchange {
    func serveDecoded(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: CacheStatusLine) -> StoredServe {
        guard !worker.undecodable.contains(entry) else { return .undecodable }
        // A body file is opened once, for its trailer and its bytes.
        var file: FileBodyReader?
        if let bodyFile = entry.bodyFile {
            guard let opened = FileBodyReader(bodyFile) else { return .bodyGone }
            file = opened
        }
        guard let length = ClientCoding.decodedLength(of: entry, file: file) else {
            worker.undecodable.insert(entry)
            return .undecodable
        }
        let fields = ClientCoding.decodedFields(entry)
        let choice = ClientCoding.answer(for: request, entry: entry, fields: fields, length: length)
        var body: DecodingBody?
        if choice.sendsBody, request.method != "HEAD", length > 0 {
            // The first piece before the head: a body that is not gzip at all fails with nothing sent.
            guard let opened = DecodingBody(entry, file: file, length: length, wanted: 0..<length) else { return .bodyGone }
            guard opened.prime() else {
                worker.undecodable.insert(entry)
                return .undecodable
            }
            body = opened
        }
        let wanted = answer.decodedHead(choice, entry: entry, fields: fields, length: length, for: request, age: age, now: now,
                                        cacheStatus: cacheStatus)
        guard let body, let wanted, !wanted.isEmpty else { return .served }
        body.want(wanted)
        fetch?.cancel()  // a 304's refresh or a stand-in: the fetch is not wanted any more
        fetch = nil
        decoding = body
        return .decoding
    }

    /// Continues on a later loop turn (once), so other connections' events come first.
    func scheduleDecoding() {
        guard !decodingScheduled, let decoding else { return }
        decodingScheduled = true
        let entry = decoding.entry
        worker.loop.schedule(after: 0) { [weak self] in
            guard let self else { return }
            self.decodingScheduled = false
            self.pumpDecoding(entry)
        }
    }

    func pumpDecoding(_ entry: CachedResponse) {
        guard let decoding, !machine.clientDone, !sink.isBodyCongested else { return }
        let step = decoding.pump(budget: DecodingBody.turnBytes) { piece in
            sink.sendBody(copying: piece)
            return !sink.isBodyCongested
        }
        switch step {
        case .more:
            // Behind: `outputDrained` continues; else the next turn does.
            if !sink.isBodyCongested { scheduleDecoding() }
        case .ended:
            complete(closing: sink.endBody(whole: true))
        case .failed(let reason):
            worker.undecodable.insert(entry)
            worker.logger.warning("stored gzip body of \(key) cannot be decoded for a client that does not take gzip (\(reason)); connection cut, such clients get it from the upstream")
            complete(closing: true)
        }
    }
}
