import CCurl
import EventLoop
import HTTP1
import HTTPHeaders

/// One upstream exchange: an easy handle on the worker's multi handle.
public final class UpstreamTransfer {
    unowned let client: UpstreamClient
    var easy: UnsafeMutableRawPointer?
    let request: UpstreamRequest
    private weak var delegate: UpstreamTransferDelegate?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var retainedSelf: Unmanaged<UpstreamTransfer>?

    private var status = 0
    private var reason: String?
    private var headers = HeaderFields()
    private var headDelivered = false
    /// Whether any byte of a response arrived: a failure after that is not
    /// a connection failure, and the request must not be sent again.
    private var sawResponseBytes = false
    /// Why a head callback stopped the transfer, when it was the head's fault.
    private var refusedHead: String?
    private var completed = false
    private var cancelled = false
    private var responseTimer: TimerID = .none

    // Request body streaming.
    private var bodyChunks: [[UInt8]] = []
    private var bodyOffset = 0
    private var bodyFinished = false
    private var readPaused = false

    /// Cancelled, failed or finished.
    var hasEnded: Bool { completed }

    /// `easy`: nil for a transfer that fails before it starts (`failEarly`)
    /// or waits for libcurl (`UpstreamClient.begin` gives it one).
    init(client: UpstreamClient, easy: UnsafeMutableRawPointer?, request: UpstreamRequest, delegate: UpstreamTransferDelegate) {
        self.client = client
        self.easy = easy
        self.request = request
        self.delegate = delegate
    }

    /// Bytes of request body waiting for curl to read them.
    public private(set) var bufferedBodyBytes = 0

    /// Called (on a later loop turn, never inside libcurl) when curl has
    /// read every buffered request-body byte, so the supplier can send more.
    public var onBodyDrained: (() -> Void)?

    /// Hands request-body bytes to the transfer.
    public func supply(_ bytes: UnsafeRawBufferPointer) {
        guard !completed, bytes.count > 0 else { return }
        bodyChunks.append(Array(bytes))
        bufferedBodyBytes += bytes.count
        wakeReader()
    }

    /// The request body is complete.
    public func finishBody() {
        guard !bodyFinished else { return }
        bodyFinished = true
        if !completed && responseTimer == .none && !headDelivered { armResponseTimer() }
        wakeReader()
    }

    /// Continues a transfer the delegate paused by refusing body bytes.
    public func resume() {
        guard !completed, easy != nil else { return }
        client.unpause(self)
    }

    /// Abandons the transfer; the delegate hears nothing more.
    public func cancel() {
        guard !completed else { return }
        cancelled = true
        completed = true
        delegate = nil
        client.loop.cancel(responseTimer)
        client.detach(self)
    }

    private func wakeReader() {
        if readPaused {
            readPaused = false
            client.unpause(self)
        }
    }

    // MARK: setup

    /// Sets up the transfer on its handle. A handle keeps its options
    /// between transfers (handles are pooled per client): the options every
    /// transfer shares are set when the handle is new (`fresh`), and every
    /// per-request one, the method's included, is set each time.
    func configure(fresh: Bool) -> CURLcode {
        guard let easy else { return CURLE_FAILED_INIT }
        retainedSelf = Unmanaged.passRetained(self)  // released in releaseResources
        let me = retainedSelf!.toOpaque()
        var result = fresh ? Self.configureHandle(easy, client: client) : CURLE_OK
        func set(_ code: CURLcode) { if result == CURLE_OK && code != CURLE_OK { result = code } }

        set(larder_easy_setopt_str(easy, CURLOPT_URL, request.url))
        // Waiting for a connection to say whether it multiplexes pays only
        // where it may (HTTP/2 over TLS). Towards a cleartext HTTP/1.1
        // upstream it made concurrent requests for one host take turns
        // until a response on a new connection arrived: collapsed waiters
        // released by a failed leader fetched one after another.
        set(larder_easy_setopt_long(easy, CURLOPT_PIPEWAIT, request.url.hasPrefix("https:") ? 1 : 0))
        // "OPTIONS *": the asterisk form, which a URL cannot express.
        set(larder_easy_setopt_str(easy, CURLOPT_REQUEST_TARGET, request.requestTarget))
        set(larder_easy_setopt_ptr(easy, CURLOPT_PRIVATE, me))
        set(larder_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, me))
        set(larder_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, me))

        var list: UnsafeMutablePointer<curl_slist>?
        var hasAccept = false
        for field in request.headers {
            if field.name.isField("accept") { hasAccept = true }
            list = Self.append(field.name, field.value, to: list)
        }
        // Suppress fields curl would invent: the client did not send them.
        if !hasAccept { list = larder_curl_slist_append(list, "Accept:") }
        list = larder_curl_slist_append(list, "Expect:")

        // HTTPGET also clears UPLOAD and NOBODY left by an earlier transfer.
        set(larder_easy_setopt_long(easy, CURLOPT_HTTPGET, 1))
        set(larder_easy_setopt_ptr(easy, CURLOPT_CUSTOMREQUEST, nil))
        set(larder_easy_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, -1))
        switch request.body {
        case .none:
            switch request.method {
            case "GET": break
            case "HEAD": set(larder_easy_setopt_long(easy, CURLOPT_NOBODY, 1))
            default: set(larder_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, request.method))
            }
            if request.method != "GET" && request.method != "HEAD" {
                // A bodiless POST/PUT still says so, as the client did.
                if request.method == "POST" || request.method == "PUT" || request.method == "PATCH" {
                    list = larder_curl_slist_append(list, "Content-Length: 0")
                }
            }
        case .streamed(let length):
            set(larder_easy_setopt_long(easy, CURLOPT_UPLOAD, 1))
            set(larder_easy_setopt_str(easy, CURLOPT_CUSTOMREQUEST, request.method))
            set(larder_easy_setopt_off(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(length ?? -1)))
            set(larder_easy_setopt_datacb(easy, CURLOPT_READFUNCTION, curlReadFunction))
            set(larder_easy_setopt_ptr(easy, CURLOPT_READDATA, me))
        }
        headerList = list
        set(larder_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list))
        return result
    }

    /// "name: value" appended to a curl header list, assembled in place
    /// (curl copies it) rather than through string interpolation.
    private static func append(_ name: String, _ value: String, to list: UnsafeMutablePointer<curl_slist>?)
        -> UnsafeMutablePointer<curl_slist>? {
        var name = name
        return name.withUTF8 { n in
            // The value's own bytes (obs-text included), not its UTF-8.
            FieldBytes.withBytes(value) { v in
                withUnsafeTemporaryAllocation(of: CChar.self, capacity: n.count + v.count + 3) { line in
                    let raw = UnsafeMutableRawPointer(line.baseAddress!)
                    if n.count > 0 { raw.copyMemory(from: n.baseAddress!, byteCount: n.count) }
                    line[n.count] = 0x3A  // ':'
                    line[n.count + 1] = 0x20
                    if v.count > 0 { (raw + n.count + 2).copyMemory(from: v.baseAddress!, byteCount: v.count) }
                    line[n.count + v.count + 2] = 0
                    return larder_curl_slist_append(list, line.baseAddress!)
                }
            }
        }
    }

    /// The options every transfer on a client's handles shares.
    static func configureHandle(_ easy: UnsafeMutableRawPointer, client: UpstreamClient) -> CURLcode {
        let s = client.settings
        var result = CURLE_OK
        func set(_ code: CURLcode) { if result == CURLE_OK && code != CURLE_OK { result = code } }
        set(larder_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(larder_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, LARDER_CURL_HTTP_VERSION_2TLS))
        set(larder_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        set(larder_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0))  // bytes pass through as sent
        // The target was normalized once, before routing and keying: curl
        // must send exactly that path, not squash dot segments of its own.
        set(larder_easy_setopt_long(easy, CURLOPT_PATH_AS_IS, 1))
        // Straight to the upstream: http_proxy, all_proxy and no_proxy in the
        // environment are not consulted (as nginx's proxy_pass ignores them);
        // it also spares libcurl scanning the environment on every request.
        set(larder_easy_setopt_str(easy, CURLOPT_PROXY, ""))
        set(larder_easy_setopt_str(easy, CURLOPT_NOPROXY, ""))
        set(larder_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1))
        set(larder_easy_setopt_long(easy, CURLOPT_TCP_KEEPALIVE, 1))
        // Timeouts, every one explicit. The total one is off by default: a
        // large body may legitimately take long; the response timer (ours)
        // bounds the wait for the head and low-speed bounds a stalled body.
        set(larder_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, s.connectTimeoutMilliseconds))
        set(larder_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, s.totalTimeoutMilliseconds))
        set(larder_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1))
        set(larder_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, s.idleTimeoutSeconds))
        set(larder_easy_setopt_long(easy, CURLOPT_EXPECT_100_TIMEOUT_MS, 1000))
        set(larder_easy_setopt_long(easy, CURLOPT_DNS_CACHE_TIMEOUT, 60))
        set(larder_easy_setopt_long(easy, CURLOPT_MAXAGE_CONN, s.maxIdleConnectionAgeSeconds))
        set(larder_easy_setopt_long(easy, CURLOPT_MAXLIFETIME_CONN, 0))  // 0: no limit on a busy connection's life
        set(larder_easy_setopt_long(easy, CURLOPT_HAPPY_EYEBALLS_TIMEOUT_MS, 200))
        set(larder_easy_setopt_long(easy, CURLOPT_CA_CACHE_TIMEOUT, 3600))
        set(larder_easy_setopt_long(easy, CURLOPT_SSL_VERIFYPEER, s.verifyTLS ? 1 : 0))
        set(larder_easy_setopt_long(easy, CURLOPT_SSL_VERIFYHOST, s.verifyTLS ? 2 : 0))
        if let ca = s.caFile { set(larder_easy_setopt_str(easy, CURLOPT_CAINFO, ca)) }

        // Connection sockets are announced and closed through the client,
        // so that a pooled connection can stay registered with epoll.
        let clientPointer = Unmanaged.passUnretained(client).toOpaque()
        set(larder_easy_setopt_opensocket(easy))
        set(larder_easy_setopt_sockoptcb(easy, curlSockoptFunction))
        set(larder_easy_setopt_ptr(easy, CURLOPT_SOCKOPTDATA, clientPointer))
        set(larder_easy_setopt_closesocketcb(easy, curlCloseSocketFunction))
        set(larder_easy_setopt_ptr(easy, CURLOPT_CLOSESOCKETDATA, clientPointer))

        set(larder_easy_setopt_datacb(easy, CURLOPT_HEADERFUNCTION, curlHeaderFunction))
        set(larder_easy_setopt_datacb(easy, CURLOPT_WRITEFUNCTION, curlWriteFunction))
        return result
    }

    /// The handle goes back to the pool: nothing of this transfer stays
    /// reachable from its options (the header list is freed next).
    func clearRequestOptions() {
        guard let easy else { return }
        _ = larder_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, nil)
        _ = larder_easy_setopt_ptr(easy, CURLOPT_PRIVATE, nil)
        _ = larder_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, nil)
        _ = larder_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, nil)
        _ = larder_easy_setopt_ptr(easy, CURLOPT_READDATA, nil)
    }

    func armResponseTimer() {
        guard responseTimer == .none else { return }  // armed while it waited for libcurl: counts from then
        // Holds the transfer (no weak reference: that would give every
        // transfer a side table) until it fires or is cancelled, which
        // happens when the head arrives or the transfer ends.
        responseTimer = client.loop.schedule(after: UInt64(client.settings.responseTimeoutMilliseconds)) { [self] in
            guard !self.headDelivered, !self.completed else { return }
            let delegate = self.delegate
            self.completed = true
            self.client.detach(self)
            delegate?.upstreamDidComplete(.timedOut("upstream sent no response within \(self.client.settings.responseTimeoutMilliseconds) ms"))
        }
    }

    func failEarly(_ error: UpstreamError) {
        completed = true
        if let easy { larder_curl_easy_reset(easy); larder_curl_easy_cleanup(easy) }
        easy = nil
        releaseResources()
        let delegate = self.delegate
        client.loop.schedule(after: 0) { delegate?.upstreamDidComplete(error) }
    }

    func releaseResources() {
        if let headerList { larder_curl_slist_free_all(headerList) }
        headerList = nil
        retainedSelf?.release()
        retainedSelf = nil
    }

    /// Called once curl reports the transfer done.
    func finish(_ code: CURLcode) {
        client.loop.cancel(responseTimer)
        guard !completed else { return }
        completed = true
        guard let delegate else { return }
        if code == CURLE_OK {
            if !headDelivered {
                delegate.upstreamDidComplete(.invalidResponse("upstream closed without a complete response head"))
                return
            }
            delegate.upstreamDidComplete(nil)
            return
        }
        if let refusedHead {
            delegate.upstreamDidComplete(.invalidResponse("invalid upstream response: \(refusedHead)"))
            return
        }
        let text = String(cString: larder_curl_easy_strerror(code))
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            delegate.upstreamDidComplete(.timedOut("upstream timed out: \(text)"))
        case CURLE_WEIRD_SERVER_REPLY, CURLE_UNSUPPORTED_PROTOCOL, CURLE_BAD_CONTENT_ENCODING, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            delegate.upstreamDidComplete(.invalidResponse("invalid upstream response: \(text)"))
        default:
            if sawResponseBytes {
                // The response broke off (its head too large, a reset mid-head):
                // the upstream got the request, so it is not sent again.
                delegate.upstreamDidComplete(.invalidResponse("upstream response broke off: \(text)"))
            } else {
                delegate.upstreamDidComplete(.unreachable("upstream unreachable: \(text)"))
            }
        }
    }

    // MARK: callbacks (inside libcurl)

    fileprivate func headerLine(_ line: UnsafeRawBufferPointer) -> Int {
        if cancelled { return 0 }
        sawResponseBytes = true
        if headDelivered { return line.count }  // trailers: ignored
        var end = line.count
        let bytes = line.bindMemory(to: UInt8.self)
        while end > 0 && (bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D) { end -= 1 }
        if end == 0 {
            // Blank line: the end of a head. An interim one (1xx) is handed
            // on, except 100 (Larder answers a client's Expect itself) and
            // 101 (refused); the final head starts over.
            if status >= 200 {
                headDelivered = true
                client.loop.cancel(responseTimer)
                delegate?.upstreamDidReceiveHead(status: status, reason: reason, headers: headers)
            } else if status > 101 {
                delegate?.upstreamDidReceiveInterim(status: status, headers: headers)
            } else if status == 101 {
                // Larder asks for no upgrade: libcurl would wait for a final
                // head on a connection that now speaks something else.
                refusedHead = "101 Switching Protocols to a request without Upgrade"
                return 0
            }
            return line.count
        }
        let content = UnsafeRawBufferPointer(rebasing: line[0..<end])
        // Field lines go straight from bytes to name and value strings.
        let isStatusLine = end >= 5 && bytes[0] == 0x48 && bytes[1] == 0x54 && bytes[2] == 0x54 && bytes[3] == 0x50 && bytes[4] == 0x2F  // "HTTP/"
        if !isStatusLine {
            if let field = ResponseLine.field(bytes: content) { headers.append(field) }
            return line.count
        }
        // A status line: a new head (after a 1xx, or the first): start over.
        guard let statusLine = ResponseLine.statusAndReason(bytes: content) else { return 0 }  // not HTTP: abort
        status = statusLine.status
        reason = statusLine.reason
        // Room for a typical head at once instead of growing 1, 2, 4, 8, 16.
        if headers.fields.capacity == 0 { headers.reserveCapacity(16) } else { headers.removeAll(keepingCapacity: true) }
        return line.count
    }

    fileprivate func bodyBytes(_ bytes: UnsafeRawBufferPointer) -> Int {
        if cancelled { return 0 }
        guard let delegate else { return 0 }
        if delegate.upstreamDidReceiveBody(bytes) { return bytes.count }
        return LARDER_CURL_WRITEFUNC_PAUSE
    }

    fileprivate func readBody(_ out: UnsafeMutableRawBufferPointer) -> Int {
        if cancelled { return LARDER_CURL_READFUNC_ABORT }
        var written = 0
        while written < out.count, !bodyChunks.isEmpty {
            let chunk = bodyChunks[0]
            let n = min(out.count - written, chunk.count - bodyOffset)
            chunk.withUnsafeBytes { src in
                (out.baseAddress! + written).copyMemory(from: src.baseAddress! + bodyOffset, byteCount: n)
            }
            written += n
            bodyOffset += n
            if bodyOffset == chunk.count {
                bodyChunks.removeFirst()
                bodyOffset = 0
            }
        }
        bufferedBodyBytes -= written
        if bufferedBodyBytes == 0 && written > 0, let drained = onBodyDrained {
            client.loop.schedule(after: 0) { drained() }
        }
        if written > 0 { return written }
        if bodyFinished { return 0 }
        readPaused = true
        return LARDER_CURL_READFUNC_PAUSE
    }
}

private let curlHeaderFunction: larder_curl_data_cb = { ptr, size, count, userdata in
    guard let userdata, let ptr else { return 0 }
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.headerLine(UnsafeRawBufferPointer(start: ptr, count: size * count))
}

private let curlWriteFunction: larder_curl_data_cb = { ptr, size, count, userdata in
    guard let userdata, let ptr else { return 0 }
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.bodyBytes(UnsafeRawBufferPointer(start: ptr, count: size * count))
}

private let curlReadFunction: larder_curl_data_cb = { ptr, size, count, userdata in
    guard let userdata, let ptr else { return LARDER_CURL_READFUNC_ABORT }
    let transfer = Unmanaged<UpstreamTransfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.readBody(UnsafeMutableRawBufferPointer(start: ptr, count: size * count))
}
