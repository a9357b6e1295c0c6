import CQUIC
import EventLoop
import HTTP2

/// What an `HTTP3ServerConnection` tells its connection, as requests
/// arrive and as it needs response bytes (the shape of
/// `HTTP2SessionDelegate`, on QUIC's 62-bit stream ids). All on the
/// connection's thread, from inside `receive`, `write` or `handleExpiry`.
public protocol HTTP3ConnectionDelegate: AnyObject {
    /// A client's request stream began its header section. False refuses it.
    func streamOpened(_ stream: Int64) -> Bool
    /// One field (pseudo-fields included), checked by libnghttp3. False
    /// refuses the stream.
    func field(_ stream: Int64, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Bool
    func headersEnded(_ stream: Int64, endStream: Bool)
    /// A trailer field of `bytes`; false once the trailers are over the limit.
    func trailerField(_ stream: Int64, bytes: Int) -> Bool
    func data(_ stream: Int64, _ bytes: UnsafeRawBufferPointer)
    func bodyEnded(_ stream: Int64)
    /// The stream is gone (`errorCode` H3_NO_ERROR: finished).
    func streamClosed(_ stream: Int64, errorCode: UInt64)
    /// The client reset a stream or asked it to stop (RESET_STREAM,
    /// STOP_SENDING), whether or not its request had begun: for budgets.
    func streamReset(_ stream: Int64)
    /// Up to `buffer.count` bytes of a response body, and whether they end
    /// it; nil: none yet (the stream waits until `resume`).
    func body(_ stream: Int64, into buffer: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool)?
    /// Datagrams to this ID now belong to this connection (or no longer).
    func connectionIDIssued(_ id: ConnectionID)
    func connectionIDRetired(_ id: ConnectionID)
}

/// The server side of one QUIC connection carrying HTTP/3: libngtcp2 for
/// QUIC (packets, recovery, flow control), GnuTLS for its handshake,
/// libnghttp3 for HTTP/3's frames and QPACK. Datagrams in (`receive`),
/// datagrams out (`write`), a timer (`expiry`); what a stream means is the
/// delegate's.
public final class HTTP3ServerConnection {
    public struct Settings {
        /// Client request streams open at once (initial_max_streams_bidi, raised as they close).
        public var maxConcurrentStreams = 100
        /// The largest header section accepted (SETTINGS_MAX_FIELD_SECTION_SIZE).
        public var maxHeaderListSize = 32 << 10
        /// Request body bytes a stream, and the connection, may send ahead.
        public var streamWindow = 1 << 20
        public var connectionWindow = 16 << 20
        /// QPACK's dynamic table the client's encoder may use, and the
        /// streams it may leave blocked on it (bounds what decoding costs).
        public var qpackTableCapacity = 4096
        public var qpackBlockedStreams = 100
        /// Idle (max_idle_timeout) and handshake timeouts, in milliseconds.
        public var idleTimeoutMilliseconds: UInt64 = 60_000
        public var handshakeTimeoutMilliseconds: UInt64 = 10_000
        public init() {}
    }

    /// What ended a connection.
    public enum Ending: Equatable {
        /// Idle, or the peer closed, or its handshake timed out: nothing more is sent.
        case silently
        /// A CONNECTION_CLOSE was sent (an error, or a shutdown).
        case closed(String)
    }

    var conn: OpaquePointer!
    var tls: gnutls_session_t?
    var h3: OpaquePointer?
    let connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>
    let credentials: QUICCredentials
    let settings: Settings
    public unowned let delegate: any HTTP3ConnectionDelegate
    /// The local address and the client's, where ngtcp2's path points.
    let addresses: UnsafeMutablePointer<ngtcp2_path_storage>
    /// Response bytes handed to ngtcp2, kept until the client acknowledged them.
    var outputs: [Int64: StreamOutput] = [:]
    /// The IDs datagrams of this connection may carry (ours).
    public internal(set) var connectionIDs: [ConnectionID] = []
    /// The client's first destination ID (its Initial's), also routed here until the handshake ends.
    public let originalID: ConnectionID
    public internal(set) var ending: Ending?
    public internal(set) var handshakeCompleted = false
    /// The client's address (validated by the handshake, or a Retry).
    public internal(set) var peer: DatagramPeer

    /// A connection for a client's first Initial (`header`, from `QUICPackets.accept`).
    /// `retried`: the original destination ID a valid Retry token carried.
    public init(header: ngtcp2_pkt_hd, local: DatagramPeer, remote: DatagramPeer, credentials: QUICCredentials,
                settings: Settings, delegate: any HTTP3ConnectionDelegate, retried: ConnectionID? = nil,
                now: UInt64) throws(HTTP3Error) {
        self.credentials = credentials
        self.settings = settings
        self.delegate = delegate
        peer = remote
        originalID = ConnectionID(header.dcid)
        connRef = .allocate(capacity: 1)
        addresses = .allocate(capacity: 1)
        var local = local, remote = remote
        withUnsafeMutablePointer(to: &local.addr) { l in
            withUnsafeMutablePointer(to: &remote.addr) { r in
                l.withMemoryRebound(to: sockaddr.self, capacity: 1) { l in
                    r.withMemoryRebound(to: sockaddr.self, capacity: 1) { r in
                        ngtcp2_path_storage_init(addresses, l, local.len, r, remote.len, nil)
                    }
                }
            }
        }
        let scid = ConnectionID.random()
        var params = ngtcp2_transport_params()
        cq_transport_params_default(&params)
        params.initial_max_streams_bidi = UInt64(settings.maxConcurrentStreams)
        params.initial_max_streams_uni = 3
        params.initial_max_stream_data_bidi_remote = UInt64(settings.streamWindow)
        params.initial_max_stream_data_uni = 64 << 10
        params.initial_max_data = UInt64(settings.connectionWindow)
        params.max_idle_timeout = settings.idleTimeoutMilliseconds * 1_000_000
        params.active_connection_id_limit = 7
        params.stateless_reset_token_present = 1
        var scidValue = scid.cid
        withUnsafeMutableBytes(of: &params.stateless_reset_token) { token in
            _ = credentials.secret.withUnsafeBytes { secret in
                ngtcp2_crypto_generate_stateless_reset_token(token.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                              secret.baseAddress!.assumingMemoryBound(to: UInt8.self), secret.count, &scidValue)
            }
        }
        if let retried {
            params.original_dcid = retried.cid
            params.retry_scid = header.dcid
            params.retry_scid_present = 1
        } else {
            params.original_dcid = header.dcid
        }
        var quic = ngtcp2_settings()
        cq_settings_default(&quic)
        quic.initial_ts = now
        quic.max_window = UInt64(settings.connectionWindow) * 4
        quic.max_stream_window = UInt64(settings.streamWindow) * 4
        quic.handshake_timeout = settings.handshakeTimeoutMilliseconds * 1_000_000
        var callbacks = Self.callbacks()
        var clientSCID = header.scid
        var connection: OpaquePointer?
        let made = cq_conn_server_new(&connection, &clientSCID, &scidValue, &addresses.pointee.path, header.version,
                                      &callbacks, &quic, &params, Unmanaged.passUnretained(self).toOpaque())
        // (Every stored property is set by now: a throw from here runs deinit, which frees what was made.)
        guard made == 0, let connection else { throw HTTP3Error("ngtcp2: \(String(cString: ngtcp2_strerror(made)))") }
        conn = connection
        connRef.pointee = ngtcp2_crypto_conn_ref(get_conn: { ref in OpaquePointer(ref!.pointee.user_data) },
                                                 user_data: UnsafeMutableRawPointer(connection))
        connectionIDs.append(scid)
        try startTLS()
    }

    private func startTLS() throws(HTTP3Error) {
        var session: gnutls_session_t?
        guard gnutls_init(&session, UInt32(GNUTLS_SERVER.rawValue)) == 0, let session else { throw HTTP3Error("GnuTLS: no session") }
        tls = session
        guard gnutls_priority_set(session, credentials.priority) == 0,
              gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials.credentials)) == 0,
              ngtcp2_crypto_gnutls_configure_server_session(session) == 0 else {
            throw HTTP3Error("GnuTLS: cannot configure a QUIC session")
        }
        gnutls_session_set_ptr(session, connRef)
        var alpn = [UInt8]("h3".utf8)
        let set = alpn.withUnsafeMutableBufferPointer { bytes -> Int32 in
            var datum = gnutls_datum_t(data: bytes.baseAddress, size: 2)
            return gnutls_alpn_set_protocols(session, &datum, 1, UInt32(GNUTLS_ALPN_MANDATORY.rawValue))
        }
        guard set == 0 else { throw HTTP3Error("GnuTLS: cannot offer h3") }
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(session))
    }

    private func free() {
        for output in outputs.values { output.release() }
        outputs.removeAll()
        if let h3 { nghttp3_conn_del(h3) }
        h3 = nil
        if let conn { ngtcp2_conn_del(conn) }
        conn = nil
        if let tls { gnutls_deinit(tls) }
        tls = nil
    }

    deinit {
        free()
        connRef.deallocate()
        addresses.deallocate()
    }

    static func of(_ user: UnsafeMutableRawPointer?) -> HTTP3ServerConnection {
        Unmanaged<HTTP3ServerConnection>.fromOpaque(user!).takeUnretainedValue()
    }

    /// The TLS server name the client asked for (SNI), read once the
    /// handshake is done (each access-log line asks for it).
    public var serverName: String? {
        if let knownName { return knownName }
        guard handshakeCompleted, let tls else { return nil }
        var name = [UInt8](repeating: 0, count: 256)
        var length = 256, type: UInt32 = 0
        let read = gnutls_server_name_get(tls, &name, &length, &type, 0) == 0
        knownName = .some(read ? String(decoding: name.prefix(length), as: UTF8.self) : nil)
        return knownName!
    }
    /// (Outer nil: not read yet; inner nil: the client sent none.)
    private var knownName: String??

    // MARK: datagrams in

    /// A datagram of this connection from `peer`. The connection ends
    /// (`ending` set) when the packet closes it or is an error.
    public func receive(_ datagram: UnsafeRawBufferPointer, from peer: DatagramPeer, now: UInt64) {
        guard ending == nil, let conn else { return }
        var remote = peer
        let result = withUnsafeMutablePointer(to: &remote.addr) { r in
            r.withMemoryRebound(to: sockaddr.self, capacity: 1) { r -> Int32 in
                var path = addresses.pointee.path
                path.remote = ngtcp2_addr(addr: r, addrlen: peer.len)
                var info = ngtcp2_pkt_info()
                return cq_conn_read_pkt(conn, &path, &info, datagram.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                        datagram.count, now)
            }
        }
        applyResets()
        if result == 0 {
            self.peer = peer
            return
        }
        if result == NGTCP2_ERR_DRAINING || result == NGTCP2_ERR_DROP_CONN {
            ending = .silently
        } else {
            fail(liberr: result)
        }
    }

    /// The next moment the connection must act (loss detection, ACKs, the
    /// idle timeout, pacing), in nanoseconds of the monotonic clock.
    public var expiry: UInt64 { conn.map { ngtcp2_conn_get_expiry($0) } ?? UInt64.max }

    /// The timer fired: retransmissions or the end of an idle connection.
    public func handleExpiry(now: UInt64) {
        guard ending == nil, let conn else { return }
        let result = ngtcp2_conn_handle_expiry(conn, now)
        if result == NGTCP2_ERR_IDLE_CLOSE || result == NGTCP2_ERR_HANDSHAKE_TIMEOUT {
            ending = .silently
        } else if result != 0 {
            fail(liberr: result)
        }
    }

    /// A library error ends the connection: its CONNECTION_CLOSE goes with the next `write`.
    func fail(liberr: Int32) {
        guard ending == nil else { return }
        var error = ngtcp2_connection_close_error()
        ngtcp2_connection_close_error_set_transport_error_liberr(&error, liberr, nil, 0)
        pendingClose = error
        ending = .closed(String(cString: ngtcp2_strerror(liberr)))
    }

    /// Streams to reset once out of the libraries' callbacks.
    var deferredResets: [(stream: Int64, code: UInt64)] = []
    /// A CONNECTION_CLOSE to send once, then nothing.
    var pendingClose: ngtcp2_connection_close_error?
}
