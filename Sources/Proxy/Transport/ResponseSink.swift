import CacheStorage
import EdgeControls
import HTTP1
import HTTPHeaders
import Telemetry

/// Where one exchange's answer goes, whatever carries it: the HTTP/1.1
/// connection (`ClientConnection`) now, an HTTP/2 stream next. The
/// exchange decides what to answer (`ExchangeMachine`) and says it here
/// (`ClientAnswer`); the sink frames it for its protocol (heads, the
/// connection's persistence, chunks), bounds what it holds, and tells the
/// exchange when the client has caught up (`Exchange.outputDrained`).
/// What the request log reads of it (`AnswerCarrier`: the client's
/// address, also X-Forwarded-For's; the body bytes sent; the version).
protocol ResponseSink: AnswerCarrier {

    // MARK: whole answers

    /// A stored response for `request` as the exchange chose to answer
    /// with it (`answer`: whole, 304, 206 or 416), queued whole. Nil,
    /// having queued nothing, when its body is a disk file that can no
    /// longer be opened.
    func sendStored(_ answer: StoredAnswer, of entry: CachedResponse, for request: RequestHead, age: Int, now: Int64,
                    cacheStatus: CacheStatusLine) -> SentAnswer?

    /// The exchange's response rules, for every head it is sent until it
    /// finishes: the sink forgets them as it finishes or aborts.
    func setAnswerEdits(_ edits: ResponseEdits?)
    /// The client's address (the socket's).
    var peerAddress: IPAddress { get }

    /// An answer made here (400, 502, 504), queued whole.
    func sendMadeHere(status: Int, message: String, extra: HeaderFields, for request: RequestHead)
    /// A rate limit's 429 (`TooManyRequests`), queued whole.
    func sendTooManyRequests(retryAfter: Int, for request: RequestHead)

    /// An interim response (103 Early Hints, 102) passed on before the
    /// answer: its status and the fields to send (hop-by-hop ones dropped
    /// here); nothing for a client that may not get one (HTTP/1.0).
    func sendInterim(status: Int, fields: HeaderFields, for request: RequestHead)

    /// A 304 for a conditional request that an upstream 200 satisfies.
    func sendNotModified(fields: HeaderFields, age: Int, cacheStatus: String, now: Int64, for request: RequestHead)

    // MARK: streamed answers

    /// A head passed on (the upstream's, or a leader's shared one); its
    /// body follows through `sendBody` (none when `noBody`).
    func sendHead(status: Int, reason: String?, fields: HeaderFields, length: Int?, noBody: Bool, age: Int?, cacheStatus: String,
                  now: Int64, for request: RequestHead)

    /// The head of a stored gzip response decoded for this client
    /// (`ClientCoding`); the bytes of the decoded representation that
    /// follow through `sendBody` (nil: none).
    func sendDecodedHead(_ answer: StoredAnswer, entry: CachedResponse, fields: HeaderFields, length: Int, for request: RequestHead,
                         age: Int, now: Int64, cacheStatus: CacheStatusLine) -> (sent: SentAnswer, body: Range<Int>?)

    /// Whether the client is behind with the body: pieces wait until the
    /// exchange is told it drained (backpressure).
    var isBodyCongested: Bool { get }

    /// A body piece, kept as it is.
    func sendBody(_ chunk: Bytes)
    /// A body piece, copied.
    func sendBody(copying bytes: UnsafeRawBufferPointer)
    /// Bytes of a stored response, wherever they are kept (a file's are
    /// read as the client takes them; one cut shorter since, by a hand,
    /// cuts the connection).
    func sendBody(stored bytes: StoredBytes)

    /// The body is over (`whole`: as long as it said); true when the
    /// transport must be cut to say so (a body cut short, or one whose end
    /// only the close marks).
    func endBody(whole: Bool) -> Bool

    /// Writes what is queued now, or once the loop's current batch of
    /// events is handled (several answers leave in one write).
    func flush()
    func flushSoon()

    // MARK: the exchange's end

    /// The whole answer is queued; `keepAlive`: the request lets the
    /// connection stay open (the sink may still close it: draining).
    func exchangeFinished(keepAlive: Bool)
    /// The answer broke off after its head: the client can only be told by a cut.
    func exchangeAborted()
    /// The upstream took every request-body byte given it: read more of it.
    func uploadDrained()
}

/// What a sink queued, for the access log.
struct SentAnswer {
    let status: Int
    let bodyBytes: Int
}
