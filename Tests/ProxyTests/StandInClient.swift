import CacheSemantics
import CacheStorage
import HTTP1
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
