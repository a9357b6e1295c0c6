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

        var body: UpstreamRequest.Body
        switch request.framing {
        case .none: body = .none
        case .contentLength(let n): body = .streamed(length: n)
        case .chunked: body = .streamed(length: nil)
        }
        if !requestBodyComplete, shouldHoldBody {
            // The transfer starts once the body is here (requestBodyEnd).
            pendingHeaders = headers
            heldBody = []
            if case .contentLength(let n) = request.framing { heldBody!.reserveCapacity(n) }
            return
        }
        if let held = heldBody, requestBodyComplete { body = .streamed(length: held.count) }
        startTransfer(headers: headers, body: body)
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
        if let held = heldBody {
            heldBody = nil
            pendingHeaders = []
            held.withUnsafeBytes { transfer?.supply($0) }
            if requestBodyComplete { transfer?.finishBody() }
        }
    }

    // MARK: request body

    var shouldHoldBody: Bool {
        let limit = worker.configuration.requestBufferBytes
        guard limit > 0 else { return false }
        switch request.framing {
        case .none: return false
        case .contentLength(let n): return n <= limit
        case .chunked: return true  // until it outgrows the limit
        }
    }

    func requestBody(_ bytes: UnsafeRawBufferPointer) {
        guard heldBody != nil, transfer == nil else {
            transfer?.supply(bytes)
            return
        }
        heldBody!.append(contentsOf: bytes)
        if heldBody!.count > worker.configuration.requestBufferBytes {
            // Too large to hold: stream it from here on.
            startTransfer(headers: pendingHeaders, body: .streamed(length: nil))
        }
    }

    func requestBodyEnd() {
        requestBodyComplete = true
        if heldBody != nil, transfer == nil, !machine.clientDone {
            forward()
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
