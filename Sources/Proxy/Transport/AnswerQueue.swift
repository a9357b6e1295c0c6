import CacheStorage
import EventLoop
import HTTP1
import HTTPHeaders

/// A transport's queue of answers, shared by the HTTP/1.1 connection and
/// an HTTP/2 stream: the exchange's answers are decided once, here (a
/// stored response: `StoredAnswer` chooses whole, 304, 206 or 416;
/// `ClientHead` writes the head into the transport's `Head`, HTTP/1.1 text
/// or HTTP/2 fields), body pieces in the client's framing. An HTTP/2 stream
/// frames its bodies itself (`framesItsOwnBodies`: no chunked coding, no
/// Connection field).
protocol AnswerQueue: ResponseSink {
    associatedtype Head: HeadWriter
    /// What it uses of the worker it runs on (its date, head buffer, draining, log).
    var services: ConnectionServices { get }
    var answerFraming: ClientFraming { get set }
    var answerBodyBytes: Int { get set }
    /// The body bytes the answer's head announced (`Int.max`: none); -1
    /// once a body overran it.
    var answerLimit: Int { get set }
    /// Whether the client is behind with its output.
    var isCongested: Bool { get }
    /// HTTP/2: the transport marks a body's end, and a connection's persistence is its own.
    var framesItsOwnBodies: Bool { get }
    /// Alt-Svc's value on this connection's answers (a TLS listener that
    /// also serves HTTP/3), or nil.
    var altService: String? { get }
    /// The response rules of the exchange being answered (`ResponseEdits`).
    var answerEdits: ResponseEdits? { get set }
    /// The head of an answer; its body follows.
    func enqueue(head: Head)
    /// Body bytes.
    func enqueue(_ bytes: [UInt8])
    func enqueue(copying buffer: UnsafeRawBufferPointer)
    func enqueue(_ bytes: Bytes, from: Int, to: Int?)
    /// Bytes of a stored response (its stored head, or its body, wherever kept).
    func enqueue(stored bytes: StoredBytes)
}

extension ClientConnection: AnswerQueue {
    var framesItsOwnBodies: Bool { false }
    var altService: String? { settings.altService }
    func loggedVersion(of request: RequestHead) -> Int { request.minorVersion == 0 ? 10 : 11 }
    var tlsServerName: String? { stream.tls?.serverName }

    func sendInterim(status: Int, fields: HeaderFields, for request: RequestHead) {
        // RFC 9110 section 15.2: never to an HTTP/1.0 client.
        guard request.minorVersion >= 1 else { return }
        enqueue(head: ClientHead.interim(status: status, fields: fields))
        flushSoon()
    }
}

extension AnswerQueue {
    func setAnswerEdits(_ edits: ResponseEdits?) { answerEdits = edits }

    /// The Connection field of an answer to `request`: kept alive unless
    /// it or a drain says otherwise.
    private func connectionField(_ request: RequestHead) -> ConnectionField {
        if framesItsOwnBodies { return ConnectionField(persistence: .implicit, altService: altService) }
        return ConnectionField(keepAlive: request.keepAlive && !services.draining, minorVersion: request.minorVersion,
                               altService: altService)
    }

    /// Queues a stored response for `request`, as `answer` says. Nil,
    /// having queued nothing, when its body is a disk file that can no
    /// longer be opened.
    func sendStored(_ answer: StoredAnswer, of entry: CachedResponse, for request: RequestHead, age: Int, now: Int64,
                    cacheStatus: CacheStatusLine) -> SentAnswer? {
        let field = connectionField(request)
        let edits = answerEdits
        var tail: ClientHead.Tail {
            ClientHead.Tail(age: age, date: services.dateHeader.current(now: now), cacheStatus: cacheStatus, connection: field,
                            extra: edits?.fields ?? [])
        }
        // Response rules that drop fields: the stored head is copied without them (`EditedHeads`).
        let filtersHead = Head.sendsStoredHeadAsIs && !(edits?.drops.isEmpty ?? true)
        func hidden(_ name: String) -> Bool { services.builder.isHidden(name) || (edits?.drops(name) ?? false) }
        // A body kept in a file (a disk hit served as stored): a small one
        // in one read into the output, from the page cache; a large one, or
        // one the page cache lacks, as the transport sends a file's bytes.
        let body = entry.storedBody
        let sendsBytes = answer.sendsBody && request.method != "HEAD"
        var tailAndBody: (bytes: Bytes, count: Int)?
        if sendsBytes && !body.isInMemory {
            if case .whole = answer, body.count <= Self.readIntoOutputLimit {
                // Read in behind the per-request tail (HTTP/1.1, whose stored
                // head goes as it is): one block for both.
                services.headScratch.removeAll(keepingCapacity: true)
                let edited = Head.sendsStoredHeadAsIs
                    ? appendStoredHead(of: entry, edits: edits, filtered: filtersHead, age: age, cacheStatus: cacheStatus, connection: field)
                    : UnsafeRawBufferPointer(start: nil, count: 0)
                var outcome = StoredBody.ReadInto.failed
                tailAndBody = copiedHead(edited, extra: body.count) { rest in
                    outcome = body.read(into: rest, cachedOnly: true)
                    return outcome == .read
                }
                if outcome == .failed { return bodyGone(body, of: entry) }
            } else if !body.isReadable {
                return bodyGone(body, of: entry)
            }
        }
        switch answer {
        case .notModified:
            enqueue(head: ClientHead.notModified(fields: entry.headers, tail: tail, isHidden: hidden))
            return SentAnswer(status: 304, bodyBytes: 0)
        case .partial(let range, let length, let stored):
            enqueue(head: ClientHead.partial(fields: entry.headers, range: range, length: length, tail: tail, isHidden: hidden))
            if sendsBytes { enqueue(stored: body.slice((range.lowerBound - stored)..<(range.upperBound - stored + 1))) }
            return SentAnswer(status: 206, bodyBytes: range.count)
        case .unsatisfiable(let length):
            enqueue(head: ClientHead.partial(fields: entry.headers, range: nil, length: length, tail: tail, isHidden: hidden))
            return SentAnswer(status: 416, bodyBytes: 0)
        case .whole:
            // HTTP/1.1: the stored head as is, then the per-request tail from
            // a buffer the worker reuses (with a small body from a file read
            // behind it). HTTP/2: fields from the stored ones.
            if Head.sendsStoredHeadAsIs {
                if !filtersHead { enqueue(stored: body.head) }
            } else {
                var head = Head(stored: entry, dropping: edits)
                if let edits { for extra in edits.fields { head.field(extra.name, extra.value) } }
                head.hitTail(age: age, cacheStatus: cacheStatus, connection: field)
                enqueue(head: head)
            }
            if let tailAndBody {
                enqueue(tailAndBody.bytes, from: 0, to: tailAndBody.count)
                return SentAnswer(status: entry.status, bodyBytes: body.count)
            }
            if Head.sendsStoredHeadAsIs {
                services.headScratch.removeAll(keepingCapacity: true)
                let edited = appendStoredHead(of: entry, edits: edits, filtered: filtersHead, age: age, cacheStatus: cacheStatus,
                                              connection: field)
                if let copy = copiedHead(edited, extra: 0, { _ in true }) { enqueue(copy.bytes, from: 0, to: copy.count) }
            }
            if sendsBytes { enqueue(stored: body.whole) }
            return SentAnswer(status: entry.status, bodyBytes: sendsBytes ? body.count : 0)
        }
    }

    /// Queues the head of a stored gzip response decoded for this client
    /// (`ClientCoding`: `answer` for the decoded representation of `length`
    /// bytes with `fields`); the decoded bytes follow through `sendBody`.
    /// The bytes of the representation that follow (none: nil).
    func sendDecodedHead(_ answer: StoredAnswer, entry: CachedResponse, fields: HeaderFields, length: Int, for request: RequestHead,
                         age: Int, now: Int64, cacheStatus: CacheStatusLine) -> (sent: SentAnswer, body: Range<Int>?) {
        let field = connectionField(request), edits = answerEdits
        let tail = ClientHead.Tail(age: age, date: services.dateHeader.current(now: now), cacheStatus: cacheStatus, connection: field,
                                   extra: edits?.fields ?? [])
        func hidden(_ name: String) -> Bool { services.builder.isHidden(name) || (edits?.drops(name) ?? false) }
        switch answer {
        case .notModified:
            enqueue(head: ClientHead.notModified(fields: fields, tail: tail, isHidden: hidden))
            return (SentAnswer(status: 304, bodyBytes: 0), nil)
        case .unsatisfiable(let length):
            enqueue(head: ClientHead.partial(fields: fields, range: nil, length: length, tail: tail, isHidden: hidden))
            return (SentAnswer(status: 416, bodyBytes: 0), nil)
        case .partial(let range, let length, _):
            enqueue(head: ClientHead.partial(fields: fields, range: range, length: length, tail: tail, isHidden: hidden))
            (answerFraming, answerLimit) = (.length, range.count)
            return (SentAnswer(status: 206, bodyBytes: range.count), range.lowerBound..<(range.upperBound + 1))
        case .whole:
            let noBody = request.method == "HEAD"
            sendHead(status: entry.status, reason: entry.reason, fields: fields, length: length, noBody: noBody, age: age,
                     cacheStatus: cacheStatus.value, now: now, for: request)
            return (SentAnswer(status: entry.status, bodyBytes: noBody ? 0 : length), noBody ? nil : 0..<length)
        }
    }

    /// HTTP/1.1's hit head: the stored head without the fields response
    /// rules drop (`filtered`; else it goes from the block as it is) and the
    /// literal fields they set and add, returned as `EditedHeads` keeps it
    /// (valid until its next call; none: empty); in the worker's scratch
    /// buffer, what else goes in the head: fields rendered for this
    /// request, the per-request tail.
    private func appendStoredHead(of entry: CachedResponse, edits: ResponseEdits?, filtered: Bool, age: Int,
                                  cacheStatus: CacheStatusLine, connection: ConnectionField) -> UnsafeRawBufferPointer {
        // (The services read unretained: each call through them cost a retain and a release.)
        Unmanaged.passUnretained(services)._withUnsafeGuaranteedRef { services in
            var edited = UnsafeRawBufferPointer(start: nil, count: 0)
            if filtered, let edits {
                let head = entry.headPrefix
                if let kept = services.editedHeads.edited(head, drops: edits.drops, lines: edits.literalLines, generation: edits.generation) {
                    edited = kept
                } else {
                    EditedHeads.append(head, drops: edits.drops, lines: edits.literalLines, to: &services.headScratch)
                }
                if edits.rendersFields { edits.appendLines(to: &services.headScratch, literal: false) }
            } else if let edits {
                edits.appendLines(to: &services.headScratch)
            }
            ClientHead.appendHitTail(age: age, cacheStatus: cacheStatus, connection: connection, to: &services.headScratch)
            return edited
        }
    }

    /// A hit's head (`edited`, then the worker's scratch buffer) and `extra`
    /// bytes that `fill` writes behind it, in one output block (one copy each).
    @inline(__always)
    private func copiedHead(_ edited: UnsafeRawBufferPointer, extra: Int,
                            _ fill: (UnsafeMutableRawBufferPointer) -> Bool) -> (bytes: Bytes, count: Int)? {
        services.headScratch.withUnsafeBytes { tail in
            copied(count: edited.count + tail.count + extra) { block in
                if !edited.isEmpty { block.copyMemory(from: edited) }
                UnsafeMutableRawBufferPointer(rebasing: block[edited.count...]).copyMemory(from: tail)
                return fill(UnsafeMutableRawBufferPointer(rebasing: block[(edited.count + tail.count)...]))
            }
        }
    }

    /// `count` bytes written by `fill` (false: nil) into the worker's output
    /// block when no output holds it any more, else into a new one.
    func copied(count: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Bool) -> (bytes: Bytes, count: Int)? {
        if count <= ConnectionServices.outputBlockBytes, let block = services.outputBlock.reusableBuffer() {
            return fill(UnsafeMutableRawBufferPointer(rebasing: block[..<count])) ? (services.outputBlock, count) : nil
        }
        return Bytes(count: count, fill).map { ($0, count) }
    }

    /// Bodies up to this size in a file are read into the output (one
    /// read, one writev with the head); larger ones go by sendfile.
    static var readIntoOutputLimit: Int { 64 << 10 }

    /// A body file cut short behind Larder's back (sent as is, every hit
    /// would be a short body and a cut connection): nil, and the entry is
    /// dropped and fetched again.
    private func bodyGone(_ body: StoredBody, of entry: CachedResponse) -> SentAnswer? {
        services.logger.warning("stored body in \(body.place) is shorter than recorded: entry dropped, fetching \(entry.key) again")
        return nil
    }

    /// Queues a head passed on (the upstream's, or a shared fetch's) and
    /// chooses how its body is framed for this client.
    func sendHead(status: Int, reason: String?, fields: HeaderFields, length: Int?, noBody: Bool, age: Int?, cacheStatus: String,
                  now: Int64, for request: RequestHead) {
        answerFraming = framesItsOwnBodies ? (noBody ? .none : length != nil ? .length : .endOfStream)
            : ClientFraming.choose(noBody: noBody, length: length, minorVersion: request.minorVersion)
        answerLimit = answerFraming == .length ? length ?? .max : .max
        let edits = answerEdits
        enqueue(head: ClientHead.forwarded(status: status, reason: reason, fields: fields, framing: answerFraming, length: length,
                                           noBody: noBody, age: age, cacheStatus: cacheStatus, date: services.dateHeader.current(now: now),
                                           connection: connectionField(request), extra: edits?.fields ?? [],
                                           isHidden: { services.builder.isHidden($0) || (edits?.drops($0) ?? false) }))
    }

    /// Queues a 304 for a conditional request that an upstream 200 satisfies.
    func sendNotModified(fields: HeaderFields, age: Int, cacheStatus: String, now: Int64, for request: RequestHead) {
        let edits = answerEdits
        let tail = ClientHead.Tail(age: age, date: services.dateHeader.current(now: now),
                                   cacheStatus: CacheStatusLine(cacheStatus), connection: connectionField(request), extra: edits?.fields ?? [])
        enqueue(head: ClientHead.notModified(fields: fields, tail: tail, isHidden: { edits?.drops($0) ?? false }))
    }

    /// Queues an answer made here.
    func sendMadeHere(status: Int, message: String, extra: HeaderFields, for request: RequestHead) {
        var extra = extra
        if let edits = answerEdits {
            extra.fields.removeAll { edits.drops($0.name) }
            for field in edits.fields { extra.append(field) }
        }
        let made = ClientHead.madeHere(status: status, message: message, extra: extra,
                                       close: !framesItsOwnBodies && (!request.keepAlive || services.draining), as: Head.self)
        enqueue(head: made.head)
        enqueue(made.body)
    }

    /// Whether the client is behind with a body being passed on.
    var isBodyCongested: Bool { answerFraming != .none && isCongested }

    /// Queues a body piece in the answer's framing.
    func sendBody(_ chunk: Bytes) { sendFramed(chunk.count) { enqueue(chunk, from: 0, to: nil) } }

    /// Queues a copy of a body piece in the answer's framing.
    func sendBody(copying bytes: UnsafeRawBufferPointer) { sendFramed(bytes.count) { enqueue(copying: bytes) } }

    func sendBody(stored bytes: StoredBytes) { sendFramed(bytes.count) { enqueue(stored: bytes) } }

    /// `count` bytes queued by `enqueueBytes`, in a chunk when chunked;
    /// nothing for a bodiless answer.
    func sendFramed(_ count: Int, _ enqueueBytes: () -> Void) {
        guard answerFraming != .none else { return }
        guard answerBodyBytes + count <= answerLimit else {
            // More than the head announced (an upstream whose body overruns
            // what it said): never passed on (the client would read it as
            // the next answer); nothing more goes, and the end is a cut.
            answerLimit = -1
            return
        }
        let chunked = answerFraming == .chunked
        if chunked { enqueue(ResponseSerializer.chunkHeader(count)) }
        enqueueBytes()
        if chunked { enqueue([0x0D, 0x0A]) }
        answerBodyBytes += count
        flushSoon()
    }

    /// The answer's body is over (`whole`: as long as it said): true when
    /// the connection must close, to end a close-delimited body or to cut
    /// one short of its length (`BodyEnd`).
    func endBody(whole: Bool) -> Bool {
        // As long as announced, or it is cut (a body that fell short of the head's length).
        let whole = whole && (answerLimit == .max || answerBodyBytes == answerLimit)
        switch BodyEnd.decide(framing: answerFraming, whole: whole) {
        case .cut:
            return true
        case .end(let terminator, let close):
            if terminator { enqueue(Array("0\r\n\r\n".utf8)) }
            return close
        }
    }
}
