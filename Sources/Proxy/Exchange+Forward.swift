import CacheSemantics
import CacheStorage
import EventLoop
import HTTP1
import Upstream
import HTTPHeaders

/// Going upstream: the request's fields and target, a request body held
/// until complete or streamed, and which requests may be retried.
extension Exchange {
    // MARK: forward

    func forward() {
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

        if case .start(let body) = requestBody.forward(fields: headers) { startTransfer(headers: headers, body: body) }
    }

    func startTransfer(headers: HeaderFields, body: UpstreamRequest.Body) {
        // OPTIONS *: the upstream gets the asterisk form too.
        let asterisk = request.target == "*"
        let upstreamRequest = UpstreamRequest(method: request.method,
                                              url: worker.configuration.upstreamBase + (asterisk ? "/" : request.pathAndQuery),
                                              headers: headers, body: body, requestTarget: asterisk ? "*" : nil)
        requestTime = EventLoop.wallSeconds()
        fetchToken = worker.store.fetchToken
        transfer = worker.upstream.start(upstreamRequest, delegate: self)
        if request.framing != .none { transfer?.onBodyDrained = { [weak connection] in connection?.uploadDrained() } }
        if let (held, complete) = requestBody.transferStarted() {
            held.withUnsafeBytes { transfer?.supply($0) }
            if complete { transfer?.finishBody() }
        }
    }

    // MARK: request body

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        switch requestBody.append(bytes) {
        case .held: break
        case .supply: transfer?.supply(bytes)
        case .startStreaming(let headers): startTransfer(headers: headers, body: .streamed(length: nil))
        }
    }

    func requestBodyEnd() {
        if requestBody.end() {
            if !machine.clientDone { forward() }
        } else {
            transfer?.finishBody()
        }
    }

    /// Whether request-body bytes are piling up faster than the upstream reads
    /// them; the connection stops reading from the client meanwhile.
    var isUploadCongested: Bool {
        (transfer?.bufferedBodyBytes ?? 0) >= worker.configuration.clientBufferBytes
    }

    /// Whether a failed connection may be tried again (`Retry`).
    var mayRetry: Bool {
        !machine.responseStarted && Retry.mayRetry(method: request.method, hasBody: request.framing != .none,
                                                   failedAttempts: machine.failedAttempts,
                                                   limit: worker.configuration.upstreamRetries)
    }
}
