import CQUIC
import HTTP2

/// libnghttp3 on the QUIC connection: its control and QPACK streams, its
/// callbacks to the delegate, responses submitted per stream.
extension HTTP3ServerConnection {
    /// Starts HTTP/3 once the handshake allows streams (idempotent).
    func startHTTP3() -> Bool {
        if h3 != nil { return true }
        guard let conn, ngtcp2_conn_get_streams_uni_left(conn) >= 3 else { return false }
        var callbacks = Self.http3Callbacks()
        var h3Settings = nghttp3_settings()
        cq_nghttp3_settings_default(&h3Settings)
        h3Settings.max_field_section_size = UInt64(settings.maxHeaderListSize)
        h3Settings.qpack_max_dtable_capacity = settings.qpackTableCapacity
        h3Settings.qpack_blocked_streams = settings.qpackBlockedStreams
        var made: OpaquePointer?
        guard cq_nghttp3_conn_server_new(&made, &callbacks, &h3Settings, Unmanaged.passUnretained(self).toOpaque()) == 0,
              let made else { return false }
        h3 = made
        nghttp3_conn_set_max_client_streams_bidi(made, UInt64(settings.maxConcurrentStreams))
        var control: Int64 = -1, encoder: Int64 = -1, decoder: Int64 = -1
        guard ngtcp2_conn_open_uni_stream(conn, &control, nil) == 0,
              nghttp3_conn_bind_control_stream(made, control) == 0,
              ngtcp2_conn_open_uni_stream(conn, &encoder, nil) == 0,
              ngtcp2_conn_open_uni_stream(conn, &decoder, nil) == 0,
              nghttp3_conn_bind_qpack_streams(made, encoder, decoder) == 0 else { return false }
        return true
    }

    static func http3Callbacks() -> nghttp3_callbacks {
        var c = nghttp3_callbacks()
        c.acked_stream_data = { _, stream, count, user, _ in
            // Body bytes the client acknowledged: their pieces are freed (never sent again).
            HTTP3ServerConnection.of(user).outputs[stream]?.acknowledge(Int(count))
            return 0
        }
        c.begin_headers = { _, stream, user, _ in
            HTTP3ServerConnection.of(user).delegate.streamOpened(stream) ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE
        }
        c.recv_header = { _, stream, _, name, value, _, user, _ in
            let n = nghttp3_rcbuf_get_buf(name), v = nghttp3_rcbuf_get_buf(value)
            let ok = HTTP3ServerConnection.of(user).delegate.field(stream, name: UnsafeRawBufferPointer(start: n.base, count: n.len),
                                             value: UnsafeRawBufferPointer(start: v.base, count: v.len))
            if !ok { HTTP3ServerConnection.of(user).refuse(stream) }
            return 0
        }
        c.end_headers = { _, stream, fin, user, _ in
            HTTP3ServerConnection.of(user).delegate.headersEnded(stream, endStream: fin != 0)
            return 0
        }
        c.recv_trailer = { _, stream, _, name, value, _, user, _ in
            let bytes = nghttp3_rcbuf_get_buf(name).len + nghttp3_rcbuf_get_buf(value).len
            if !HTTP3ServerConnection.of(user).delegate.trailerField(stream, bytes: bytes) { HTTP3ServerConnection.of(user).refuse(stream) }
            return 0
        }
        c.recv_data = { _, stream, data, count, user, _ in
            HTTP3ServerConnection.of(user).delegate.data(stream, UnsafeRawBufferPointer(start: data, count: count))
            return 0
        }
        c.deferred_consume = { _, stream, count, user, _ in
            HTTP3ServerConnection.of(user).extendWindows(stream, by: count)
            return 0
        }
        c.end_stream = { _, stream, user, _ in
            HTTP3ServerConnection.of(user).delegate.bodyEnded(stream)
            return 0
        }
        c.stream_close = { _, stream, code, user, _ in
            HTTP3ServerConnection.of(user).delegate.streamClosed(stream, errorCode: code)
            return 0
        }
        c.stop_sending = { _, stream, code, user, _ in
            guard let conn = HTTP3ServerConnection.of(user).conn else { return 0 }
            return ngtcp2_conn_shutdown_stream_read(conn, stream, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE
        }
        c.reset_stream = { _, stream, code, user, _ in
            guard let conn = HTTP3ServerConnection.of(user).conn else { return 0 }
            return ngtcp2_conn_shutdown_stream_write(conn, stream, code) == 0 ? 0 : NGHTTP3_ERR_CALLBACK_FAILURE
        }
        return c
    }

    // MARK: responses

    /// The response head for `stream`; its body follows from the delegate
    /// (`body`) when `body`, else the stream ends with the head.
    public func respond(_ stream: Int64, head: HeaderBlock, body: Bool) {
        guard let h3 else { return }
        withFields(head) { nva in
            var reader = nghttp3_data_reader(read_data: Self.readBody)
            let r = body ? nghttp3_conn_submit_response(h3, stream, nva, nva.count, &reader)
                         : nghttp3_conn_submit_response(h3, stream, nva, nva.count, nil)
            if r != 0 { reset(stream, code: UInt64(NGHTTP3_H3_INTERNAL_ERROR)) }
        }
    }

    /// An interim response (100, 103).
    public func informational(_ stream: Int64, head: HeaderBlock) {
        guard let h3 else { return }
        withFields(head) { nva in _ = nghttp3_conn_submit_info(h3, stream, nva, nva.count) }
    }

    /// A stream whose body waited has more (or its end).
    public func resume(_ stream: Int64) {
        guard let h3 else { return }
        _ = nghttp3_conn_resume_stream(h3, stream)
    }

    /// Resets `stream` both ways with an HTTP/3 error code, once the
    /// libraries are out of their callbacks (the next `write`, or the end
    /// of `receive`).
    public func reset(_ stream: Int64, code: UInt64) { deferredResets.append((stream, code)) }

    func applyResets() {
        guard !deferredResets.isEmpty, let conn else { return }
        for (stream, code) in deferredResets {
            if let h3 { nghttp3_conn_shutdown_stream_write(h3, stream) }
            _ = ngtcp2_conn_shutdown_stream(conn, stream, code)
        }
        deferredResets.removeAll()
    }

    /// A request that is answered whole while its body still comes: the
    /// client is asked to stop sending it (RFC 9114 section 4.1, H3_NO_ERROR).
    public func stopReading(_ stream: Int64) {
        guard let conn else { return }
        _ = ngtcp2_conn_shutdown_stream_read(conn, stream, UInt64(NGHTTP3_H3_NO_ERROR))
    }

    /// Request body bytes the upstream took: the client's window reopens by as many.
    public func consume(_ stream: Int64, _ count: Int) { extendWindows(stream, by: count) }

    /// Shutting down: GOAWAY names the last stream taken; streams in flight finish.
    public func goAway() {
        guard let h3 else { return }
        _ = nghttp3_conn_submit_shutdown_notice(h3)
        _ = nghttp3_conn_shutdown(h3)
    }

    /// The connection ends now, without error (H3_NO_ERROR) or with `code`: its
    /// CONNECTION_CLOSE goes with the next `write`.
    public func shutDown(code: UInt64 = UInt64(NGHTTP3_H3_NO_ERROR)) {
        guard ending == nil else { return }
        var error = ngtcp2_connection_close_error()
        ngtcp2_connection_close_error_set_application_error(&error, code, nil, 0)
        pendingClose = error
        ending = .closed("shut down")
    }

    /// A field the delegate refused: the stream is reset (the rest of its head is still decoded).
    func refuse(_ stream: Int64) { reset(stream, code: UInt64(NGHTTP3_H3_REQUEST_REJECTED)) }

    private func withFields(_ head: HeaderBlock, _ body: ([nghttp3_nv]) -> Void) {
        head.withFields { bytes, spans in
            let base = UnsafeMutablePointer(mutating: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            var nva: [nghttp3_nv] = []
            nva.reserveCapacity(spans.count)
            for s in spans {
                nva.append(nghttp3_nv(name: base + s.name, value: base + s.value, namelen: s.nameLength, valuelen: s.valueLength,
                                      flags: UInt8(NGHTTP3_NV_FLAG_NONE)))
            }
            body(nva)
        }
    }

    /// libnghttp3 asks for body bytes: a piece from the delegate, kept
    /// until acknowledged.
    static let readBody: nghttp3_read_data_callback = { _, stream, vec, _, flags, user, _ in
        let connection = HTTP3ServerConnection.of(user)
        let output: StreamOutput
        if let known = connection.outputs[stream] { output = known } else {
            output = StreamOutput()
            connection.outputs[stream] = output
        }
        let piece = output.newPiece()
        guard let (count, end) = connection.delegate.body(stream, into: piece) else {
            piece.deallocate()
            return nghttp3_ssize(NGHTTP3_ERR_WOULDBLOCK)
        }
        if end { flags!.pointee |= UInt32(NGHTTP3_DATA_FLAG_EOF) }
        guard count > 0 else {
            piece.deallocate()
            return 0
        }
        output.keep(piece, count: count)
        vec!.pointee = nghttp3_vec(base: piece.baseAddress!.assumingMemoryBound(to: UInt8.self), len: count)
        return 1
    }
}
