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
/// upstream body that breaks off; either way it is remembered (`undecodable`), so
/// the next such client goes upstream instead.
extension Exchange {
    func serveDecoded(_ entry: CachedResponse, age: Int, now: Int64, cacheStatus: CacheStatusLine) -> StoredServe {
        guard !cache.undecodable.contains(entry) else { return .undecodable }
        // A body file is opened once, for its trailer and its bytes.
        var file: FileBodyReader?
        if let bodyFile = entry.bodyFile {
            guard let opened = FileBodyReader(bodyFile) else { return .bodyGone }
            file = opened
        }
        guard let length = ClientCoding.decodedLength(of: entry, file: file) else {
            cache.undecodable.insert(entry)
            return .undecodable
        }
        let fields = ClientCoding.decodedFields(entry)
        let choice = ClientCoding.answer(for: request, entry: entry, fields: fields, length: length)
        var decoder: DecodingBody?
        if choice.sendsBody, request.method != "HEAD", length > 0 {
            // The first piece before the head: a body that is not gzip at all fails with nothing sent.
            guard let opened = DecodingBody(entry, file: file, length: length, wanted: 0..<length) else { return .bodyGone }
            guard opened.prime() else {
                cache.undecodable.insert(entry)
                return .undecodable
            }
            decoder = opened
        }
        let wanted = answer.decodedHead(choice, entry: entry, fields: fields, length: length, for: request, age: age, now: now,
                                        cacheStatus: cacheStatus)
        guard let decoder, let wanted, !wanted.isEmpty else { return .served }
        decoder.want(wanted)
        decoder.failed = { [undecodable = cache.undecodable, logger = upstream.logger, key] reason in
            undecodable.insert(entry)
            logger.warning("stored gzip body of \(key) cannot be decoded for a client that does not take gzip (\(reason)); connection cut, such clients get it from the upstream")
        }
        // Compressed bytes not in the page cache are read on an I/O thread, then pulled on.
        decoder.offload = (loop, cache.counters, { [weak self] in self?.pullBody() })
        fetch?.cancel()  // a 304's refresh or a stand-in: the fetch is not wanted any more
        fetch = nil
        body = decoder  // pulled once the machine knows (`served(.decoding)`)
        return .decoding
    }
}
