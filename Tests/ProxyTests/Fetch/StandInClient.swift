import EdgeControls
import CacheSemantics
import CacheStorage
import HTTP1
import HTTPHeaders
import Upstream
@testable import Proxy

/// A client that writes down what it is told.
final class StandInClient: FetchClient {
    let request: RequestHead
    let key: String
    var isCacheLookup: Bool { request.method == "GET" }
    let variants = Variants()
    let toDisk = false
    let peer = "127.0.0.1"
    var takesHead = true
    var congested = false
    private(set) var events: [String] = []

    init(request: RequestHead, key: String) {
        self.request = request
        self.key = key
    }

    func takes(_ response: UpstreamResponse) -> Bool { takesHead }
    func streams(_ response: UpstreamResponse, stored: Bool) { events.append("head \(response.status)" + (stored ? " stored" : "")) }
    var isCongested: Bool { congested }
    func deliver(_ chunk: Bytes) { events.append("body \(chunk.count)") }
    func deliver(copying bytes: UnsafeRawBufferPointer) { events.append("body \(bytes.count)") }
    func responseEnded(whole: Bool) { events.append(whole ? "ended whole" : "ended short") }
    func responseCut() { events.append("cut") }
    func fetchFailed(_ kind: UpstreamFailure.Kind, detail: String) { events.append("failed \(kind)") }
    func interim(status: Int, fields: HeaderFields) { events.append("interim \(status)") }
    func requestBodyDrained() { events.append("body drained") }
}

/// An upstream that writes down what it is asked and gives the test the
/// transfers' delegates to answer through.
final class StandInUpstream: UpstreamRequester {
    var settings = UpstreamSettings()
    var started: [StandInTransfer] = []
    var requests: [UpstreamRequest] = []
    var delegates: [UpstreamTransferDelegate] = []

    func start(_ request: UpstreamRequest, delegate: UpstreamTransferDelegate) -> any UpstreamTransferControl {
        let transfer = StandInTransfer()
        started.append(transfer)
        requests.append(request)
        delegates.append(delegate)
        return transfer
    }
}

final class StandInTransfer: UpstreamTransferControl {
    var bufferedBodyBytes = 0
    var onBodyDrained: (() -> Void)?
    var cancelled = false
    var resumes = 0
    var supplied: [UInt8] = []
    var bodyFinished = false
    func supply(_ bytes: UnsafeRawBufferPointer) { supplied += bytes }
    func finishBody() { bodyFinished = true }
    func resume() { resumes += 1 }
    func cancel() { cancelled = true }
}

/// A sink that writes down what it is told, as a transport would carry it.
final class RecordingSink: ResponseSink {
    let peer = "127.0.0.1"
    let peerAddress = IPAddress("127.0.0.1")!
    func setAnswerEdits(_ edits: ResponseEdits?) {}
    var congested = false
    var exchange: Exchange?
    private(set) var events: [String] = []
    private(set) var answerBodyBytes = 0
    func loggedVersion(of request: RequestHead) -> Int { 11 }
    var tlsServerName: String? { nil }

    func sendStored(_ answer: StoredAnswer, of entry: CachedResponse, for request: RequestHead, age: Int, now: Int64,
                    cacheStatus: CacheStatusLine) -> SentAnswer? {
        events.append("stored \(entry.status) \(entry.bodyLength) \(cacheStatus.value)")
        return SentAnswer(status: entry.status, bodyBytes: entry.bodyLength)
    }

    func sendInterim(status: Int, fields: HeaderFields, for request: RequestHead) { events.append("interim \(status)") }

    func sendMadeHere(status: Int, message: String, extra: HeaderFields, for request: RequestHead) {
        events.append("made \(status) \(message)")
    }

    func sendTooManyRequests(retryAfter: Int, for request: RequestHead) { events.append("made 429 retry \(retryAfter)") }

    func sendNotModified(fields: HeaderFields, age: Int, cacheStatus: String, now: Int64, for request: RequestHead) {
        events.append("304 \(cacheStatus)")
    }

    func sendHead(status: Int, reason: String?, fields: HeaderFields, length: Int?, noBody: Bool, age: Int?, cacheStatus: String,
                  now: Int64, for request: RequestHead) {
        events.append("head \(status) \(cacheStatus)")
    }

    func sendDecodedHead(_ answer: StoredAnswer, entry: CachedResponse, fields: HeaderFields, length: Int, for request: RequestHead,
                         age: Int, now: Int64, cacheStatus: CacheStatusLine) -> (sent: SentAnswer, body: Range<Int>?) {
        events.append("decoded head \(length)")
        return (SentAnswer(status: 200, bodyBytes: length), 0..<length)
    }

    var isBodyCongested: Bool { congested }
    func sendBody(_ chunk: Bytes) { record(chunk.count) }
    func sendBody(copying bytes: UnsafeRawBufferPointer) { record(bytes.count) }
    func sendBody(stored bytes: StoredBytes) { record(bytes.count) }

    func note(_ event: String) { events.append(event) }

    private func record(_ count: Int) {
        events.append("body \(count)")
        answerBodyBytes += count
    }

    func endBody(whole: Bool) -> Bool {
        events.append(whole ? "end whole" : "end short")
        return !whole
    }

    func flush() {}
    func flushSoon() {}

    func exchangeFinished(keepAlive: Bool) {
        events.append(keepAlive ? "finished keep-alive" : "finished close")
        exchange = nil
    }

    func exchangeAborted() {
        events.append("aborted")
        exchange = nil
    }

    func uploadDrained() {}
}
