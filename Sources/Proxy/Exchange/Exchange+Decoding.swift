import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import HTTPHeaders
import Telemetry
import Threads

/// A stored gzip, zstd or br body for a client that does not take its
/// coding, decoded as the client drains (`ClientCoding`, `DecodingBody`):
/// the head says what the decoded representation is (its length from the
/// gzip trailer, the zstd frame, or measured once), then at
/// most a turn's worth is decoded per loop turn, and nothing while the
/// client is behind. A body found corrupt or not as long as declared
/// before anything was sent is `undecodable` (the request goes upstream
/// for an identity copy); after its head, the connection is cut, as for an
/// upstream body that breaks off; either way it is remembered (`undecodable`), so
/// the next such client goes upstream instead.
extension Exchange {
    func serveDecoded(_ offered: StoredServing) -> StoredServe {
        let (entry, age, now, cacheStatus) = (offered.entry, offered.age, offered.now, offered.cacheStatus)
        guard !cache.undecodable.contains(entry) else { return .undecodable }
        // The body is opened once (a file's), for its trailer and its bytes.
        guard let file = entry.storedBody.reader() else { return .bodyGone }
        // On the loop from the page cache only; a trailer or first piece not
        // there is read on an I/O thread, the answer going on from there
        // unless the client left.
        let start = DecodingStart(entry, file: file, for: request, undecodable: cache.undecodable, cachedOnly: true)
        guard case .cold = start else { return sendDecoded(start, entry: entry, age: age, now: now, cacheStatus: cacheStatus) }
        WorkerStats.bump(cache.counters.offloadedReads)
        fetch?.cancel()  // a 304's refresh or a stand-in: the fetch is not wanted any more
        fetch = nil
        let (request, undecodable) = (request, cache.undecodable)
        BlockingWork.shared.run({ DecodingStart(entry, file: file, for: request, undecodable: undecodable) }, on: loop) {
            [weak self] start in
            guard let self, self.machine.isOffering else { return }
            self.perform(self.served(offered, self.sendDecoded(start, entry: entry, age: age, now: now, cacheStatus: cacheStatus)))
        }
        return .waiting
    }

    /// The decoded representation's head, then its body pulled as the client drains.
    private func sendDecoded(_ start: DecodingStart, entry: CachedResponse, age: Int, now: Int64,
                             cacheStatus: CacheStatusLine) -> StoredServe {
        let (length, fields, choice, decoder): (Int, HeaderFields, StoredAnswer, DecodingBody?)
        switch start {
        case .gone: return .bodyGone
        case .cold: return .undecodable  // (never off the loop)
        case .undecodable:
            // Once per stored body (then remembered: `UndecodableBodies`).
            upstream.logger.warning("stored \(entry.coding.token) body of \(key) cannot be decoded for a client that does not take \(entry.coding.token) (not in its coding, corrupt, or larger than it may decode to); such clients get it from the upstream")
            return .undecodable
        case .ready(let l, let f, let c, let d): (length, fields, choice, decoder) = (l, f, c, d)
        }
        let wanted = answer.decodedHead(choice, entry: entry, fields: fields, length: length, for: request, age: age, now: now,
                                        cacheStatus: cacheStatus)
        guard let decoder, let wanted, !wanted.isEmpty else { return .served }
        decoder.want(wanted)
        decoder.failed = { [undecodable = cache.undecodable, logger = upstream.logger, key] reason in
            undecodable.insert(entry)
            logger.warning("stored \(entry.coding.token) body of \(key) cannot be decoded for a client that does not take \(entry.coding.token) (\(reason)); connection cut, such clients get it from the upstream")
        }
        // Compressed bytes not in the page cache are read on an I/O thread, then pulled on.
        decoder.offload = (loop, cache.counters, { [weak self] in self?.pullBody() })
        fetch?.cancel()  // a 304's refresh or a stand-in: the fetch is not wanted any more
        fetch = nil
        body = decoder  // pulled once the machine knows (`served(.decoding)`)
        return .decoding
    }
}

/// What decoding a stored coded body for one client starts from: the
/// decoded length (`ClientCoding.declaredLength`), the fields and the
/// answer, and the decoder holding its first piece (a body not in its coding at all
/// fails here, with nothing sent). On a worker's loop it reads the page
/// cache only (`cachedOnly`): `cold` when what it needs is not there (it is
/// made again on an I/O thread, where reading may wait for the disk).
enum DecodingStart {
    case gone, undecodable, cold
    case ready(length: Int, fields: HeaderFields, choice: StoredAnswer, decoder: DecodingBody?)

    /// `cachedOnly`: on a worker's loop, reads only what the page cache holds.
    init(_ entry: CachedResponse, file: StoredBodyReader, for request: RequestHead, undecodable: UndecodableBodies,
         cachedOnly: Bool = false) {
        let length: Int
        switch ClientCoding.declaredLength(of: entry, reading: file, cachedOnly: cachedOnly) {
        case .length(let declared): length = declared
        case .cold: self = .cold; return
        case .none:
            undecodable.insert(entry)
            self = .undecodable
            return
        }
        let fields = ClientCoding.decodedFields(entry)
        let choice = ClientCoding.answer(for: request, entry: entry, fields: fields, length: length)
        guard choice.sendsBody, request.method != "HEAD", length > 0 else {
            self = .ready(length: length, fields: fields, choice: choice, decoder: nil)
            return
        }
        guard let decoder = DecodingBody(entry, reader: file, length: length, wanted: 0..<length) else {
            self = .gone
            return
        }
        guard decoder.prime(cachedOnly: cachedOnly) else {
            if decoder.cold { self = .cold; return }
            undecodable.insert(entry)
            self = .undecodable
            return
        }
        self = .ready(length: length, fields: fields, choice: choice, decoder: decoder)
    }
}
