import CacheSemantics
import CacheStorage
import HTTP1
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
