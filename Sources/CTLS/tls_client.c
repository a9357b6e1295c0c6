// TLS from Larder to a server (Redis with `rediss://`): a context that
// verifies certificates, sessions that check the server's name or address.
#include "tls.h"
#include "tls_api.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

larder_tls_client_context *larder_tls_client_context_new(const char *ca_file, char *error, size_t error_size) {
    if (larder_tls_load() != 0) {
        snprintf(error, error_size, "%s", larder_tls_error());
        return NULL;
    }
    api.ERR_clear_error();
    SSL_CTX *context = api.SSL_CTX_new(api.TLS_client_method());
    if (context == NULL) {
        larder_tls_take_error(error, error_size);
        return NULL;
    }
    (void)api.SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
    api.SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    int loaded = ca_file ? api.SSL_CTX_load_verify_locations(context, ca_file, NULL) : api.SSL_CTX_set_default_verify_paths(context);
    if (loaded != 1) {
        char why[256];
        larder_tls_take_error(why, sizeof why);
        snprintf(error, error_size, "cannot load the certificate authorities%s%s: %s", ca_file ? " from " : "", ca_file ? ca_file : "", why);
        api.SSL_CTX_free(context);
        return NULL;
    }
    return context;
}

void larder_tls_client_context_free(larder_tls_client_context *context) {
    if (context) api.SSL_CTX_free(context);
}

larder_tls_session *larder_tls_client_session_new(larder_tls_client_context *context, int fd, const char *host) {
    SSL *ssl = api.SSL_new(context);
    if (ssl == NULL) return NULL;
    unsigned char address[16];
    int isAddress = inet_pton(AF_INET, host, address) == 1 || inet_pton(AF_INET6, host, address) == 1;
    X509_VERIFY_PARAM *param = api.SSL_get0_param(ssl);
    int checked = isAddress ? api.X509_VERIFY_PARAM_set1_ip_asc(param, host) : api.X509_VERIFY_PARAM_set1_host(param, host, 0);
    // SNI carries names only (RFC 6066 section 3).
    if (checked != 1 || api.SSL_set_fd(ssl, fd) != 1
        || (!isAddress && api.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)host) != 1)) {
        api.SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

int larder_tls_connect(larder_tls_session *session) {
    api.ERR_clear_error();
    errno = 0;
    int result = api.SSL_connect(session);
    if (result == 1) return LARDER_TLS_DONE;
    int why = larder_tls_step_outcome(session, result);
    long verified = api.SSL_get_verify_result(session);
    if (why == LARDER_TLS_FAILED && verified != X509_V_OK) larder_tls_set_error(api.X509_verify_cert_error_string(verified));
    return why == LARDER_TLS_CLOSED ? LARDER_TLS_FAILED : why;
}
