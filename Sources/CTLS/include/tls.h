// TLS towards clients through OpenSSL (Debian's libssl3, the one libcurl
// uses), opened at run time with dlopen as libcurl is (CCurl): a daemon
// without a TLS listener never loads it, and the binary needs no libcrypto
// at exec. Swift sees only these functions and opaque types.
#ifndef LARDER_TLS_H
#define LARDER_TLS_H

#include <stddef.h>

typedef struct larder_tls_context larder_tls_context;
typedef struct ssl_st larder_tls_session;

// Loads libssl once (any thread). 0 on success; otherwise -1 and
// larder_tls_error() says why.
int larder_tls_load(void);
const char *larder_tls_error(void);

// SHA-256 of `length` bytes into `out` (libcrypto's, through the same
// load). 0 on success; -1 when OpenSSL cannot be loaded.
int larder_sha256(const void *data, size_t length, unsigned char out[32]);

// One certificate: a PEM chain (leaf first), its PEM key, and optionally a
// DER OCSP response to staple.
typedef struct {
    const char *chain;
    const char *key;
    const char *ocsp;
} larder_tls_certificate;

// A context for one listener: certificates[0] is the default; the others
// are chosen by SNI against the names in each certificate (DNS names of
// subjectAltName, or the subject's common name when it has none; "*." one
// label). strict_sni: a handshake without a known name is refused. alpn:
// protocols in the server's order of preference, wire format (length-
// prefixed). NULL on failure, with a message in `error`.
larder_tls_context *larder_tls_context_new(const larder_tls_certificate *certificates, int count, int strict_sni,
                                           const unsigned char *alpn, unsigned alpn_length, char *error,
                                           size_t error_size);
void larder_tls_context_free(larder_tls_context *context);
// The names certificate `index` answers to, comma-separated (for the log).
const char *larder_tls_context_names(const larder_tls_context *context, int index);
// The certificate's notBefore and notAfter (seconds since 1970, UTC): 0, or -1.
int larder_tls_context_validity(const larder_tls_context *context, int index, long long *not_before, long long *not_after);

// Results of the calls on a session.
enum {
    LARDER_TLS_DONE = 1,
    LARDER_TLS_CLOSED = 0,       // read: the client closed (close_notify or end of stream)
    LARDER_TLS_WANT_READ = -1,   // try again when the socket is readable
    LARDER_TLS_WANT_WRITE = -2,  // try again when the socket is writable
    LARDER_TLS_FAILED = -3,      // the connection is unusable; larder_tls_session_error says why
};

larder_tls_session *larder_tls_session_new(larder_tls_context *context, int fd);
void larder_tls_session_free(larder_tls_session *session);
// LARDER_TLS_DONE once the handshake is complete, or a wait or a failure.
int larder_tls_handshake(larder_tls_session *session);
// Bytes read (> 0), or LARDER_TLS_CLOSED / WANT_* / FAILED.
int larder_tls_read(larder_tls_session *session, void *buffer, int length);
// Bytes written (> 0: at least one record), or WANT_* / FAILED. A call
// after WANT_* must present the same bytes again (at least as many).
int larder_tls_write(larder_tls_session *session, const void *buffer, int length);
// Sends close_notify (best effort, never waits).
void larder_tls_shutdown(larder_tls_session *session);
// The last failure on this thread, as OpenSSL tells it ("" if none).
const char *larder_tls_session_error(void);
// What was agreed: the ALPN protocol ("" if none), the version, whether the
// session was resumed, the name the client asked for ("" if none).
const char *larder_tls_alpn(const larder_tls_session *session);
const char *larder_tls_version(const larder_tls_session *session);
int larder_tls_resumed(const larder_tls_session *session);
const char *larder_tls_server_name(const larder_tls_session *session);

// The client side (TLS to Redis): a context that verifies servers against
// `ca_file` (PEM), or the system's store when NULL; NULL on failure, with a
// message in `error`.
typedef struct ssl_ctx_st larder_tls_client_context;
larder_tls_client_context *larder_tls_client_context_new(const char *ca_file, char *error, size_t error_size);
void larder_tls_client_context_free(larder_tls_client_context *context);
// A session towards `host` (a name, sent as SNI and checked against the
// certificate, or an IP address, checked alone) on a connected socket.
larder_tls_session *larder_tls_client_session_new(larder_tls_client_context *context, int fd, const char *host);
// One step of the client's handshake: LARDER_TLS_DONE, WANT_*, or FAILED
// (a certificate that does not verify says why).
int larder_tls_connect(larder_tls_session *session);

#endif
