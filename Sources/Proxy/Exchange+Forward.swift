import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// Going upstream: the request's fields and target, and a request body
/// held until complete or streamed.
extension Exchange {
    // MARK: forward

    /// `leading`: this request holds the key's claim (Collapser), which
    /// the fetch keeps.
    func forward(leading: Bool = false) {
        machine.forward()
        var headers = UpstreamHeaders.forward(request, peer: connection.peer, forwardHost: worker.configuration.forwardHost,
                                              passed: worker.configuration.passRequestHeaders)
        if let validating { UpstreamHeaders.addValidators(for: validating, among: variants, to: &headers) }
        if askUpstreamCachesToReload {
            headers.remove("cache-control")
            headers.remove("pragma")
            headers.append("cache-control", "no-cache")
            headers.append("pragma", "no-cache")
        }

        // (A looked-up request has no body: it starts here, leading or not.)
        if case .start(let body) = requestBody.forward(fields: headers) { startFetch(headers: headers, body: body, leading: leading) }
    }

    func startFetch(headers: HeaderFields, body: UpstreamRequest.Body, leading: Bool = false) {
        // OPTIONS *: the upstream gets the asterisk form too.
        let asterisk = request.target == "*"
        let upstreamRequest = UpstreamRequest(method: request.method,
                                              url: worker.configuration.upstreamBase + (asterisk ? "/" : request.pathAndQuery),
                                              headers: headers, body: body, requestTarget: asterisk ? "*" : nil)
        let fetch = UpstreamFetch(upstreamRequest, for: self, worker: worker, leading: leading)
        self.fetch = fetch
        fetch.start()
        guard let transfer = fetch.transfer, request.framing != .none else { return }
        transfer.onBodyDrained = { [weak connection] in connection?.uploadDrained() }
        if let (held, complete) = requestBody.transferStarted() {
            held.withUnsafeBytes { transfer.supply($0) }
            if complete { transfer.finishBody() }
        }
    }

    // MARK: request body

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        switch requestBody.append(bytes) {
        case .held: break
        case .supply: fetch?.transfer?.supply(bytes)
        case .startStreaming(let headers): startFetch(headers: headers, body: .streamed(length: nil))
        }
    }

    func requestBodyEnd() {
        if requestBody.end() {
            if !machine.clientDone { forward() }
        } else {
            fetch?.transfer?.finishBody()
        }
    }

    /// Whether request-body bytes are piling up faster than the upstream reads
    /// them; the connection stops reading from the client meanwhile.
    var isUploadCongested: Bool {
        (fetch?.transfer?.bufferedBodyBytes ?? 0) >= worker.configuration.clientBufferBytes
    }
}
