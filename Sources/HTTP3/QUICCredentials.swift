import CQUIC
#if canImport(Glibc)
import Glibc
#endif

/// What an error of GnuTLS or ngtcp2 says.
public struct HTTP3Error: Error, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A QUIC listener's certificates in GnuTLS (QUIC's TLS 1.3): every chain
/// and key of the listener in one set, which GnuTLS chooses from by the
/// name the client asks for (SNI), the first when none matches. Made
/// again from the same files when the listener's certificates are
/// reloaded; connections keep the set they began with.
public final class QUICCredentials {
    let credentials: gnutls_certificate_credentials_t
    let priority: gnutls_priority_t
    /// A secret of this set (random, per process) for stateless reset
    /// tokens and Retry tokens.
    public let secret: [UInt8]

    /// QUIC's TLS: 1.3 only, its AEADs and groups, no middlebox
    /// compatibility mode (RFC 9001 section 8.4).
    static let priorityText = "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:"
        + "+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:%DISABLE_TLS13_COMPAT_MODE"

    /// `certificates`: (chain, key) PEM file paths, the default first.
    public init(certificates: [(chain: String, key: String)], secret: [UInt8]? = nil) throws(HTTP3Error) {
        var credentials: gnutls_certificate_credentials_t?
        guard gnutls_certificate_allocate_credentials(&credentials) == 0, let credentials else {
            throw HTTP3Error("GnuTLS: cannot allocate certificate credentials")
        }
        for (chain, key) in certificates {
            let r = gnutls_certificate_set_x509_key_file(credentials, chain, key, GNUTLS_X509_FMT_PEM)
            if r < 0 {
                gnutls_certificate_free_credentials(credentials)
                throw HTTP3Error("GnuTLS cannot load \(chain) with \(key): \(String(cString: gnutls_strerror(r)))")
            }
        }
        var priority: gnutls_priority_t?
        guard gnutls_priority_init(&priority, Self.priorityText, nil) == 0, let priority else {
            gnutls_certificate_free_credentials(credentials)
            throw HTTP3Error("GnuTLS: the QUIC priority string is refused")
        }
        self.credentials = credentials
        self.priority = priority
        if let secret {
            self.secret = secret
        } else {
            var bytes = [UInt8](repeating: 0, count: 32)
            _ = gnutls_rnd(GNUTLS_RND_RANDOM, &bytes, 32)
            self.secret = bytes
        }
    }

    deinit {
        gnutls_priority_deinit(priority)
        gnutls_certificate_free_credentials(credentials)
    }
}

/// A QUIC listener's current credentials, shared by every worker: each new
/// connection takes the set in it, and a reload puts a new one in
/// (connections already open keep theirs). The secret stays the same
/// across reloads, so Retry tokens and resets stay valid.
public final class QUICCredentialsSlot: @unchecked Sendable {
    private var current: QUICCredentials
    private var lock = pthread_mutex_t()

    public init(_ credentials: QUICCredentials) {
        current = credentials
        pthread_mutex_init(&lock, nil)
    }

    public var credentials: QUICCredentials {
        pthread_mutex_lock(&lock)
        defer { pthread_mutex_unlock(&lock) }
        return current
    }

    public func replace(with credentials: QUICCredentials) {
        pthread_mutex_lock(&lock)
        current = credentials
        pthread_mutex_unlock(&lock)
    }
}
