// TLS contexts towards clients: certificates chosen by SNI, ALPN, OCSP
// stapling, and the sessions made from them. Every OpenSSL call goes
// through the table tls_library.c fills (tls_api.h).
#include "tls.h"
#include "tls_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

// MARK: contexts

struct larder_tls_context {
    int count;
    int strict_sni;
    SSL_CTX **ctx;
    char **names;           // per certificate: "a.example,*.b.example"
    unsigned char **ocsp;   // per certificate: DER response or NULL
    long *ocsp_length;
    unsigned char alpn[64];
    unsigned alpn_length;
};

// "*.example.com" matches one label; comparison ignores case.
static int name_matches(const char *pattern, size_t pattern_length, const char *name) {
    size_t length = strlen(name);
    if (pattern_length > 2 && pattern[0] == '*' && pattern[1] == '.') {
        const char *dot = strchr(name, '.');
        if (dot == NULL || dot == name) return 0;
        return strlen(dot) == pattern_length - 1 && strncasecmp(dot, pattern + 1, pattern_length - 1) == 0;
    }
    return length == pattern_length && strncasecmp(pattern, name, length) == 0;
}

static int context_for(const larder_tls_context *context, const char *name) {
    for (int i = 0; i < context->count; i++) {
        const char *list = context->names[i];
        while (list != NULL && *list) {
            const char *comma = strchr(list, ',');
            size_t length = comma ? (size_t)(comma - list) : strlen(list);
            if (name_matches(list, length, name)) return i;
            list = comma ? comma + 1 : NULL;
        }
    }
    return -1;
}

static int on_server_name(SSL *ssl, int *alert, void *arg) {
    larder_tls_context *context = arg;
    const char *name = api.SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    int index = name ? context_for(context, name) : -1;
    if (index > 0) api.SSL_set_SSL_CTX(ssl, context->ctx[index]);
    if (index < 0 && context->strict_sni) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    return SSL_TLSEXT_ERR_OK;
}

static int on_alpn(SSL *ssl, const unsigned char **out, unsigned char *out_length, const unsigned char *in,
                   unsigned int in_length, void *arg) {
    (void)ssl;
    larder_tls_context *context = arg;
    // The server's preference wins: the first of ours the client offers.
    for (unsigned i = 0; i < context->alpn_length; i += 1 + context->alpn[i]) {
        const unsigned char *ours = context->alpn + i;
        for (unsigned j = 0; j < in_length; j += 1 + in[j]) {
            if (j + 1 + in[j] > in_length) break;
            if (in[j] == ours[0] && memcmp(in + j + 1, ours + 1, ours[0]) == 0) {
                *out = in + j + 1;
                *out_length = in[j];
                return SSL_TLSEXT_ERR_OK;
            }
        }
    }
    // No common protocol: RFC 7301 section 3.2's no_application_protocol
    // alert (a client that offers none gets no callback, and HTTP/1.1).
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static int on_status_request(SSL *ssl, void *arg) {
    larder_tls_context *context = arg;
    SSL_CTX *ctx = api.SSL_get_SSL_CTX(ssl);
    for (int i = 0; i < context->count; i++) {
        if (context->ctx[i] != ctx || context->ocsp[i] == NULL) continue;
        unsigned char *copy = api.CRYPTO_malloc((size_t)context->ocsp_length[i], __FILE__, __LINE__);
        if (copy == NULL) return SSL_TLSEXT_ERR_NOACK;
        memcpy(copy, context->ocsp[i], (size_t)context->ocsp_length[i]);
        api.SSL_ctrl(ssl, SSL_CTRL_SET_TLSEXT_STATUS_REQ_OCSP_RESP, context->ocsp_length[i], copy);
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

// The names a certificate answers to: subjectAltName's DNS names, else the common name.
static char *certificate_names(X509 *certificate) {
    size_t size = 256, used = 0;
    char *out = calloc(1, size);
    if (out == NULL) return NULL;
    GENERAL_NAMES *names = api.X509_get_ext_d2i(certificate, NID_subject_alt_name, NULL, NULL);
    int count = names ? api.OPENSSL_sk_num((const OPENSSL_STACK *)names) : 0;
    for (int i = 0; i < count; i++) {
        GENERAL_NAME *name = api.OPENSSL_sk_value((const OPENSSL_STACK *)names, i);
        if (name->type != GEN_DNS) continue;
        int length = api.ASN1_STRING_length(name->d.dNSName);
        const unsigned char *bytes = api.ASN1_STRING_get0_data(name->d.dNSName);
        if (length <= 0 || memchr(bytes, ',', (size_t)length) || memchr(bytes, 0, (size_t)length)) continue;
        if (used + (size_t)length + 2 > size) {
            size = (used + (size_t)length + 2) * 2;
            char *grown = realloc(out, size);
            if (grown == NULL) break;
            out = grown;
        }
        if (used) out[used++] = ',';
        memcpy(out + used, bytes, (size_t)length);
        used += (size_t)length;
        out[used] = 0;
    }
    if (names) api.GENERAL_NAMES_free(names);
    if (used == 0) {
        char common[256] = "";
        if (api.X509_NAME_get_text_by_NID(api.X509_get_subject_name(certificate), NID_commonName, common, sizeof common) > 0
            && strchr(common, ',') == NULL)
            snprintf(out, size, "%s", common);
    }
    return out;
}

static unsigned char *read_file(const char *path, long *length, char *error, size_t error_size) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        snprintf(error, error_size, "OCSP response %s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char *bytes = malloc(1 << 20);
    size_t n = bytes ? fread(bytes, 1, 1 << 20, file) : 0;
    int over = bytes && n == 1 << 20 && fgetc(file) != EOF;
    fclose(file);
    if (bytes == NULL || n == 0 || over) {
        snprintf(error, error_size, "OCSP response %s: %s", path, over ? "larger than 1 MiB" : "empty or unreadable");
        free(bytes);
        return NULL;
    }
    *length = (long)n;
    return bytes;
}

// TLS 1.2 suites when the client has no 1.3: forward secret, AEAD only
// (Mozilla's "intermediate" list without DHE, which needs parameters).
static const char *ciphers_1_2 = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                 "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                 "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

static SSL_CTX *make_ctx(larder_tls_context *context, const larder_tls_certificate *certificate, char *error,
                         size_t error_size) {
    char why[256];
    SSL_CTX *ctx = api.SSL_CTX_new(api.TLS_server_method());
    if (ctx == NULL) {
        larder_tls_take_error(why, sizeof why);
        snprintf(error, error_size, "cannot make a TLS context: %s", why);
        return NULL;
    }
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
    // No renegotiation (a client could make the server redo handshakes);
    // a client that closes without close_notify ends the stream as a plain
    // socket would (HTTP frames its own messages).
    // The server's order of ciphers wins (TLS 1.2: its list puts forward
    // secrecy and AEAD first).
    api.SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION
                                     | SSL_OP_CIPHER_SERVER_PREFERENCE);
    // Partial writes and a moving buffer: the output queue hands whatever it
    // holds; idle connections give their buffers back.
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS, NULL);
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_SERVER, NULL);
    api.SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"larder", 6);
    api.SSL_CTX_set_cipher_list(ctx, ciphers_1_2);
    if (api.SSL_CTX_use_certificate_chain_file(ctx, certificate->chain) != 1) {
        larder_tls_take_error(why, sizeof why);
        snprintf(error, error_size, "certificate %s: %s", certificate->chain, why);
        goto fail;
    }
    if (api.SSL_CTX_use_PrivateKey_file(ctx, certificate->key, SSL_FILETYPE_PEM) != 1) {
        larder_tls_take_error(why, sizeof why);
        if (strstr(why, "key values mismatch"))
            snprintf(error, error_size, "key %s does not belong to certificate %s", certificate->key, certificate->chain);
        else
            snprintf(error, error_size, "key %s: %s", certificate->key, why);
        goto fail;
    }
    if (api.SSL_CTX_check_private_key(ctx) != 1) {
        larder_tls_take_error(why, sizeof why);
        snprintf(error, error_size, "key %s does not belong to certificate %s (%s)", certificate->key, certificate->chain, why);
        goto fail;
    }
    api.SSL_CTX_callback_ctrl(ctx, SSL_CTRL_SET_TLSEXT_SERVERNAME_CB, (void (*)(void))on_server_name);
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_TLSEXT_SERVERNAME_ARG, 0, context);
    api.SSL_CTX_callback_ctrl(ctx, SSL_CTRL_SET_TLSEXT_STATUS_REQ_CB, (void (*)(void))on_status_request);
    api.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_TLSEXT_STATUS_REQ_CB_ARG, 0, context);
    if (context->alpn_length) api.SSL_CTX_set_alpn_select_cb(ctx, on_alpn, context);
    return ctx;
fail:
    api.SSL_CTX_free(ctx);
    return NULL;
}

larder_tls_context *larder_tls_context_new(const larder_tls_certificate *certificates, int count, int strict_sni,
                                           const unsigned char *alpn, unsigned alpn_length, char *error,
                                           size_t error_size) {
    if (larder_tls_load() != 0) {
        snprintf(error, error_size, "%s", larder_tls_error());
        return NULL;
    }
    if (count < 1 || alpn_length > sizeof ((larder_tls_context *)0)->alpn) {
        snprintf(error, error_size, "no certificate");
        return NULL;
    }
    larder_tls_context *context = calloc(1, sizeof *context);
    if (context == NULL) return NULL;
    context->strict_sni = strict_sni;
    memcpy(context->alpn, alpn, alpn_length);
    context->alpn_length = alpn_length;
    context->ctx = calloc((size_t)count, sizeof *context->ctx);
    context->names = calloc((size_t)count, sizeof *context->names);
    context->ocsp = calloc((size_t)count, sizeof *context->ocsp);
    context->ocsp_length = calloc((size_t)count, sizeof *context->ocsp_length);
    if (!context->ctx || !context->names || !context->ocsp || !context->ocsp_length) {
        snprintf(error, error_size, "out of memory");
        larder_tls_context_free(context);
        return NULL;
    }
    api.ERR_clear_error();
    for (int i = 0; i < count; i++) {
        context->count = i + 1;
        context->ctx[i] = make_ctx(context, &certificates[i], error, error_size);
        if (context->ctx[i] == NULL) goto fail;
        context->names[i] = certificate_names(api.SSL_CTX_get0_certificate(context->ctx[i]));
        if (certificates[i].ocsp != NULL && *certificates[i].ocsp) {
            context->ocsp[i] = read_file(certificates[i].ocsp, &context->ocsp_length[i], error, error_size);
            if (context->ocsp[i] == NULL) goto fail;
        }
    }
    return context;
fail:
    larder_tls_context_free(context);
    return NULL;
}

void larder_tls_context_free(larder_tls_context *context) {
    if (context == NULL) return;
    for (int i = 0; i < context->count; i++) {
        if (context->ctx && context->ctx[i]) api.SSL_CTX_free(context->ctx[i]);
        if (context->names) free(context->names[i]);
        if (context->ocsp) free(context->ocsp[i]);
    }
    free(context->ctx);
    free(context->names);
    free(context->ocsp);
    free(context->ocsp_length);
    free(context);
}

const char *larder_tls_context_names(const larder_tls_context *context, int index) {
    if (index < 0 || index >= context->count || context->names[index] == NULL) return "";
    return context->names[index];
}

int larder_tls_context_validity(const larder_tls_context *context, int index, long long *not_before, long long *not_after) {
    if (index < 0 || index >= context->count) return -1;
    X509 *certificate = api.SSL_CTX_get0_certificate(context->ctx[index]);
    if (certificate == NULL) return -1;
    struct tm before, after;
    if (api.ASN1_TIME_to_tm(api.X509_get0_notBefore(certificate), &before) != 1
        || api.ASN1_TIME_to_tm(api.X509_get0_notAfter(certificate), &after) != 1) return -1;
    *not_before = (long long)timegm(&before);
    *not_after = (long long)timegm(&after);
    return 0;
}


larder_tls_session *larder_tls_session_new(larder_tls_context *context, int fd) {
    SSL *ssl = api.SSL_new(context->ctx[0]);
    if (ssl == NULL) return NULL;
    if (api.SSL_set_fd(ssl, fd) != 1) {
        api.SSL_free(ssl);
        return NULL;
    }
    return ssl;
}
