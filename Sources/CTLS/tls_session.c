// TLS sessions towards clients: handshakes, reads and writes, and what a
// session says of itself (ALPN, version, resumption, SNI).
#include "tls.h"
#include "tls_api.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static __thread char session_error[256];

void larder_tls_session_free(larder_tls_session *session) {
    if (session) api.SSL_free(session);
}

void larder_tls_set_error(const char *text) { snprintf(session_error, sizeof session_error, "%s", text); }

// Maps a call's result through SSL_get_error.
int larder_tls_step_outcome(SSL *ssl, int result) {
    switch (api.SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ: return LARDER_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return LARDER_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return LARDER_TLS_CLOSED;
    case SSL_ERROR_SYSCALL:
        if (errno == 0) return LARDER_TLS_CLOSED;
        snprintf(session_error, sizeof session_error, "%s", strerror(errno));
        return LARDER_TLS_FAILED;
    default:
        larder_tls_take_error(session_error, sizeof session_error);
        return LARDER_TLS_FAILED;
    }
}

int larder_tls_handshake(larder_tls_session *session) {
    api.ERR_clear_error();
    errno = 0;
    int result = api.SSL_accept(session);
    if (result == 1) return LARDER_TLS_DONE;
    int why = larder_tls_step_outcome(session, result);
    return why == LARDER_TLS_CLOSED ? LARDER_TLS_FAILED : why;
}

int larder_tls_read(larder_tls_session *session, void *buffer, int length) {
    api.ERR_clear_error();
    errno = 0;
    int result = api.SSL_read(session, buffer, length);
    return result > 0 ? result : larder_tls_step_outcome(session, result);
}

int larder_tls_write(larder_tls_session *session, const void *buffer, int length) {
    api.ERR_clear_error();
    errno = 0;
    int result = api.SSL_write(session, buffer, length);
    if (result > 0) return result;
    int why = larder_tls_step_outcome(session, result);
    return why == LARDER_TLS_CLOSED ? LARDER_TLS_FAILED : why;
}

void larder_tls_shutdown(larder_tls_session *session) {
    api.ERR_clear_error();
    (void)api.SSL_shutdown(session);
    api.ERR_clear_error();
}

const char *larder_tls_session_error(void) { return session_error; }

const char *larder_tls_alpn(const larder_tls_session *session) {
    static __thread char protocol[32];
    const unsigned char *bytes = NULL;
    unsigned length = 0;
    api.SSL_get0_alpn_selected(session, &bytes, &length);
    if (bytes == NULL || length >= sizeof protocol) return "";
    memcpy(protocol, bytes, length);
    protocol[length] = 0;
    return protocol;
}

const char *larder_tls_version(const larder_tls_session *session) { return api.SSL_get_version(session); }

int larder_tls_resumed(const larder_tls_session *session) { return api.SSL_session_reused(session); }

const char *larder_tls_server_name(const larder_tls_session *session) {
    const char *name = api.SSL_get_servername(session, TLSEXT_NAMETYPE_host_name);
    return name ? name : "";
}
