import CTLS
import Synchronization

/// TLS towards a server (Redis with `rediss://`): certificates verified
/// against a CA file, or the system's store. One per CA file, made once and
/// shared (loading the system store costs milliseconds). Any thread.
public final class TLSClientContext: @unchecked Sendable {
    let pointer: OpaquePointer

    private init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { larder_tls_client_context_free(pointer) }

    private static let made = Mutex<[String: TLSClientContext]>([:])

    /// The context for `caFile` (nil: the system's certificate authorities).
    public static func verifying(caFile: String?) throws(TLSError) -> TLSClientContext {
        let key = caFile ?? ""
        if let known = made.withLock({ $0[key] }) { return known }
        var error = [CChar](repeating: 0, count: 512)
        guard let pointer = larder_tls_client_context_new(caFile, &error, error.count) else {
            throw TLSError(String(cString: error))
        }
        let context = TLSClientContext(pointer)
        return made.withLock { known in
            if let first = known[key] { return first }
            known[key] = context
            return context
        }
    }
}

extension TLSSession {
    /// A client session towards `host` (its name or address is what the
    /// server's certificate must show) on a connected socket.
    public convenience init?(client context: TLSClientContext, fd: Int32, host: String) {
        guard let session = larder_tls_client_session_new(context.pointer, fd, host) else { return nil }
        self.init(session: session, holding: context, client: true)
    }
}
