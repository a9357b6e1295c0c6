import CNGHTTP2

/// What an `HTTP2Session` tells its connection, as frames arrive and as it
/// needs response bytes. All on the connection's thread, from inside
/// `receive` or `send`.
public protocol HTTP2SessionDelegate: AnyObject {
    /// A client opened a stream with a HEADERS frame. False refuses it
    /// (RST_STREAM REFUSED_STREAM; nothing more of it reaches the delegate
    /// but its close): the delegate counts concurrent streams against
    /// `Settings.maxConcurrentStreams`.
    func streamOpened(_ stream: Int32) -> Bool
    /// One field of a request's header section (pseudo-fields included),
    /// already checked by libnghttp2 (RFC 9113 section 8.2). False refuses
    /// the stream (it is reset).
    func field(_ stream: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool
    /// The header section is complete; `endStream`: no body follows.
    func headersEnded(_ stream: Int32, endStream: Bool)
    /// One trailer field of `bytes` (name and value) of a request's body.
    /// False when the trailers so far are over the header-list limit (the
    /// stream is reset; the rest of the block is decoded, never checked).
    func trailerField(_ stream: Int32, bytes: Int) -> Bool
    /// Request body bytes.
    func data(_ stream: Int32, _ bytes: UnsafeRawBufferPointer)
    /// The request's body ended (END_STREAM on DATA or trailers).
    func bodyEnded(_ stream: Int32)
    /// The stream is gone (`errorCode` 0: finished; otherwise reset by
    /// either side, or refused).
    func streamClosed(_ stream: Int32, errorCode: UInt32)
    /// A frame that carries no request (PING, SETTINGS, PRIORITY,
    /// WINDOW_UPDATE with its `increment`, RST_STREAM), for the
    /// connection's budgets.
    func controlFrame(type: UInt8, stream: Int32, increment: Int32)
    /// Up to `buffer.count` bytes of a response body: how many were
    /// written and whether the body ends with them; nil: none yet (the
    /// stream waits until `resume`).
    func body(_ stream: Int32, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool)?
}

/// The server side of one HTTP/2 connection over libnghttp2: bytes in
/// (`receive`), bytes out (`send`), responses submitted per stream.
/// Framing, HPACK, flow control and the protocol's checks are the
/// library's; what a stream means is the delegate's.
public final class HTTP2Session {
    public struct Settings: Equatable, Sendable {
        /// SETTINGS_MAX_CONCURRENT_STREAMS: more are refused.
        public var maxConcurrentStreams = 100
        /// SETTINGS_INITIAL_WINDOW_SIZE: request body bytes a stream may send ahead.
        public var initialWindowSize = 1 << 20
        /// SETTINGS_MAX_HEADER_LIST_SIZE, as `max_header_size` bounds HTTP/1.
        public var maxHeaderListSize = 32 << 10
        /// Streams the client may reset: a burst, then so many a second
        /// (rapid reset, CVE-2023-44487); beyond it the connection ends.
        public var resetBurst = 200
        public var resetRate = 50
        public init() {}
    }

    private var session: OpaquePointer?
    /// The limit the client is told, until the first SETTINGS frame left.
    private var advertisedStreams: UInt32?
    /// The highest stream id a client's HEADERS named.
    private var highestStreamID: Int32 = 0
    public unowned let delegate: any HTTP2SessionDelegate

    public init(settings: Settings, delegate: any HTTP2SessionDelegate) throws(HTTP2Error) {
        self.delegate = delegate
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else { throw HTTP2Error(code: NGHTTP2_ERR_NOMEM.rawValue) }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks) { _, header, user in
            guard let header, header.pointee.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            let session = HTTP2Session.of(user), id = header.pointee.stream_id
            // A stream id lower than one the client used, for a stream the
            // library no longer knows, is a connection error (RFC 9113 section
            // 5.1.1); the library would ignore it (it keeps few closed streams).
            if id < session.highestStreamID && nghttp2_session_find_stream(session.session, id) == nil {
                nghttp2_session_terminate_session(session.session, HTTP2Error.Code.protocolError.rawValue)
            }
            session.highestStreamID = max(session.highestStreamID, id)
            return 0
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue),
                  frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else { return 0 }
            let session = HTTP2Session.of(user)
            let id = frame.pointee.hd.stream_id
            if !session.delegate.streamOpened(id) {
                nghttp2_submit_rst_stream(session.session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, HTTP2Error.Code.refusedStream.rawValue)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            guard let frame, frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
            guard frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST else {
                // Trailers are dropped, but count against the limit (each
                // field is checked by the library: unbounded, that costs CPU).
                let ok = HTTP2Session.of(user).delegate.trailerField(frame.pointee.hd.stream_id, bytes: nameLength + valueLength)
                return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
            }
            let ok = HTTP2Session.of(user).delegate.field(frame.pointee.hd.stream_id,
                                                          name: UnsafeRawBufferPointer(start: name, count: nameLength),
                                                          value: UnsafeRawBufferPointer(start: value, count: valueLength))
            return ok ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            let delegate = HTTP2Session.of(user).delegate
            let header = frame.pointee.hd
            let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            switch Int(header.type) {
            case Int(NGHTTP2_HEADERS.rawValue):
                if frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                    delegate.headersEnded(header.stream_id, endStream: endStream)
                } else if endStream {
                    delegate.bodyEnded(header.stream_id)  // trailers end the body
                }
            case Int(NGHTTP2_DATA.rawValue):
                if endStream { delegate.bodyEnded(header.stream_id) }
            case Int(NGHTTP2_WINDOW_UPDATE.rawValue):
                delegate.controlFrame(type: header.type, stream: header.stream_id,
                                      increment: frame.pointee.window_update.window_size_increment)
            default:
                delegate.controlFrame(type: header.type, stream: header.stream_id, increment: 0)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, user in
            HTTP2Session.of(user).delegate.data(stream, UnsafeRawBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, errorCode, user in
            HTTP2Session.of(user).delegate.streamClosed(stream, errorCode: errorCode)
            return 0
        }
        var options: OpaquePointer?
        guard nghttp2_option_new(&options) == 0, let options else { throw HTTP2Error(code: NGHTTP2_ERR_NOMEM.rawValue) }
        defer { nghttp2_option_del(options) }
        // Request body bytes are acknowledged (the window reopened) as the
        // upstream takes them (`consume`), not as they arrive.
        nghttp2_option_set_no_auto_window_update(options, 1)
        // SETTINGS and PING answers queued for a client that does not read,
        // and entries per SETTINGS frame, are bounded (floods end the session).
        nghttp2_option_set_max_outbound_ack(options, 1000)
        nghttp2_option_set_max_settings(options, 32)
        nghttp2_option_set_stream_reset_rate_limit(options, UInt64(settings.resetBurst), UInt64(settings.resetRate))
        // CONTINUATION frames per header block (CVE-2024-27316 class).
        nghttp2_option_set_max_continuations(options, 8)
        // The HPACK table Larder's encoder keeps for this client.
        nghttp2_option_set_max_deflate_dynamic_table_size(options, 4096)
        let user = Unmanaged.passUnretained(self).toOpaque()
        guard nghttp2_session_server_new2(&session, callbacks, user, options) == 0 else {
            throw HTTP2Error(code: NGHTTP2_ERR_NOMEM.rawValue)
        }
        var entries = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                   value: UInt32(AdvertisedSettings.hardBound(settings.maxConcurrentStreams))),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue),
                                   value: UInt32(settings.initialWindowSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                                   value: UInt32(settings.maxHeaderListSize)),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        advertisedStreams = UInt32(settings.maxConcurrentStreams)
    }

    deinit { nghttp2_session_del(session) }

    fileprivate static func of(_ user: UnsafeMutableRawPointer?) -> HTTP2Session {
        Unmanaged<HTTP2Session>.fromOpaque(user!).takeUnretainedValue()
    }

    /// Feeds bytes from the client; throws when the connection must end
    /// (a protocol error, a flood: the GOAWAY is then queued).
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2Error) {
        guard bytes.count > 0 else { return }
        let n = nghttp2_session_mem_recv(session, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if n < 0 { throw HTTP2Error(code: Int32(n)) }
    }

    /// Hands the bytes to send to `write` (valid during the call), as long
    /// as it takes them whole (returns true); stops when none are left or
    /// `write` returned false (it then kept what it was given).
    public func send(_ write: (UnsafeRawBufferPointer) -> Bool) throws(HTTP2Error) {
        while true {
            var data: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &data)
            if n < 0 { throw HTTP2Error(code: Int32(n)) }
            guard n > 0, let data else { return }
            if let value = advertisedStreams {
                // (Once per connection: a copy of its first bytes.)
                var bytes = Array(UnsafeRawBufferPointer(start: data, count: n))
                if AdvertisedSettings.rewrite(&bytes, maxConcurrentStreams: value) { advertisedStreams = nil }
                if !bytes.withUnsafeBytes(write) { return }
                continue
            }
            if !write(UnsafeRawBufferPointer(start: data, count: n)) { return }
        }
    }

    /// Whether the session expects more from the client, or has more to send.
    public var wantsRead: Bool { nghttp2_session_want_read(session) != 0 }
    public var wantsWrite: Bool { nghttp2_session_want_write(session) != 0 }

    /// A response head for `stream`; with `body`, its bytes are asked of
    /// the delegate (`body(_:into:)`).
    public func respond(_ stream: Int32, head: HeaderBlock, body: Bool) {
        withFields(head) { nva in submit(stream, nva, body: body) }
    }

    /// `head`'s fields as nghttp2's name-value pairs, valid during `body`
    /// (pointers into the block's one buffer; nghttp2 copies them).
    private func withFields(_ head: HeaderBlock, _ body: ([nghttp2_nv]) -> Void) {
        head.withFields { bytes, spans in
            let base = UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            var nva: [nghttp2_nv] = []
            nva.reserveCapacity(spans.count)
            for s in spans {
                nva.append(nghttp2_nv(name: base + s.name, value: base + s.value, namelen: s.nameLength, valuelen: s.valueLength,
                                      flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
            }
            body(nva)
        }
    }

    private func submit(_ stream: Int32, _ nva: [nghttp2_nv], body: Bool) {
        if body {
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, stream, buffer, length, flags, _, user in
                let delegate = HTTP2Session.of(user).delegate
                guard let (count, end) = delegate.body(stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length)) else {
                    return Int(NGHTTP2_ERR_DEFERRED.rawValue)
                }
                if end { flags!.pointee |= UInt32(NGHTTP2_DATA_FLAG_EOF.rawValue) }
                return count
            }
            nghttp2_submit_response(session, stream, nva, nva.count, &provider)
        } else {
            nghttp2_submit_response(session, stream, nva, nva.count, nil)
        }
    }

    /// An interim response (1xx) on `stream`, before its final one.
    public func informational(_ stream: Int32, head: HeaderBlock) {
        withFields(head) { nva in
            _ = nghttp2_submit_headers(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, nil, nva, nva.count, nil)
        }
    }

    /// A stream whose body waited for bytes has some now.
    public func resume(_ stream: Int32) { nghttp2_session_resume_data(session, stream) }

    /// Ends a stream with RST_STREAM.
    public func reset(_ stream: Int32, code: HTTP2Error.Code) {
        nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), stream, code.rawValue)
    }

    /// `count` request body bytes of `stream` were taken: the client may send as many more.
    public func consume(_ stream: Int32, _ count: Int) {
        guard count > 0 else { return }
        nghttp2_session_consume(session, stream, count)
    }

    /// Body bytes of a stream that is gone: only the connection's window reopens.
    public func consumeConnection(_ count: Int) {
        guard count > 0 else { return }
        nghttp2_session_consume_connection(session, count)
    }

    /// GOAWAY with `code` naming the last stream taken; the session ends
    /// once it is sent (streams already taken may still finish when
    /// `code` is noError and the session is not terminated).
    public func goAway(_ code: HTTP2Error.Code, graceful: Bool) {
        if graceful {
            nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nghttp2_session_get_last_proc_stream_id(session),
                                  code.rawValue, nil, 0)
        } else {
            nghttp2_session_terminate_session(session, code.rawValue)
        }
    }
}

/// A failure of the session, as libnghttp2 says it.
public struct HTTP2Error: Error, CustomStringConvertible {
    public let code: Int32
    public var description: String { String(cString: nghttp2_strerror(code)) }

    /// RST_STREAM and GOAWAY codes (RFC 9113 section 7).
    public enum Code: UInt32 {
        case noError = 0, protocolError = 1, internalError = 2, flowControlError = 3, refusedStream = 7, cancel = 8,
             enhanceYourCalm = 0xB
    }
}
