import CTLS

/// One client connection's TLS state, on the connection's thread only.
public final class TLSSession {
    private let session: OpaquePointer
    /// Held until the session ends: its callbacks read it during the handshake.
    private let context: AnyObject
    /// Towards a server (Redis): the handshake is the client's.
    private let isClient: Bool
    public private(set) var established = false

    /// What a call came to.
    public enum Progress: Equatable {
        case done
        case wantRead
        case wantWrite
        case failed(String)
    }

    public convenience init?(context: TLSContext, fd: Int32) {
        guard let session = larder_tls_session_new(context.pointer, fd) else { return nil }
        self.init(session: session, holding: context, client: false)
    }

    init(session: OpaquePointer, holding context: AnyObject, client: Bool) {
        self.session = session
        self.context = context
        isClient = client
    }

    deinit { larder_tls_session_free(session) }

    /// One step of the handshake (the server's, or the client's).
    public func handshake() -> Progress {
        let result = isClient ? larder_tls_connect(session) : larder_tls_handshake(session)
        if Int(result) == LARDER_TLS_DONE { established = true }
        return Self.progress(result)
    }

    /// Decrypted bytes into `buffer`: a count (0: the client closed), or
    /// nil when the socket has no more for now (`wantsWrite` says whether
    /// the socket must become writable first).
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> Int? {
        let n = larder_tls_read(session, buffer.baseAddress, Int32(clamping: buffer.count))
        return try count(n)
    }

    /// Encrypts and sends bytes: how many were taken, or nil when the
    /// socket takes no more (call again with the same bytes).
    public func write(_ buffer: UnsafeRawBufferPointer) throws(TLSError) -> Int? {
        guard buffer.count > 0 else { return 0 }
        let n = larder_tls_write(session, buffer.baseAddress, Int32(clamping: buffer.count))
        return try count(n)
    }

    /// Whether the last read or write waits for the socket to be writable.
    public private(set) var wantsWrite = false

    private func count(_ n: Int32) throws(TLSError) -> Int? {
        if n >= 0 { wantsWrite = false; return Int(n) }
        switch Int(n) {
        case LARDER_TLS_WANT_READ: wantsWrite = false; return nil
        case LARDER_TLS_WANT_WRITE: wantsWrite = true; return nil
        default: throw TLSError(String(cString: larder_tls_session_error()))
        }
    }

    /// Sends close_notify, best effort.
    public func shutdown() { larder_tls_shutdown(session) }

    public var alpn: String { String(cString: larder_tls_alpn(session)) }
    public var version: String { String(cString: larder_tls_version(session)) }
    public var resumed: Bool { larder_tls_resumed(session) != 0 }
    public var serverName: String { String(cString: larder_tls_server_name(session)) }

    private static func progress(_ result: Int32) -> Progress {
        switch Int(result) {
        case LARDER_TLS_DONE: return .done
        case LARDER_TLS_WANT_READ: return .wantRead
        case LARDER_TLS_WANT_WRITE: return .wantWrite
        default: return .failed(String(cString: larder_tls_session_error()))
        }
    }
}
