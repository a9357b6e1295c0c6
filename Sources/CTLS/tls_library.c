// OpenSSL opened at run time (see tls.h for why): the table of its calls, and
// SHA-256 for cached POST queries' keys.
// Only types and constants come from OpenSSL's headers; every call goes
// through the table `load` fills.
#include "tls.h"
#include "tls_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct larder_ssl_api api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded = -1;
static char load_error[512] = "OpenSSL was not loaded";

static void load(void) {
    const char *name = getenv("LARDER_LIBSSL");
    if (name == NULL || *name == '\0') name = "libssl.so.3";
    void *lib = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load OpenSSL (%s): %s; install libssl3", name, why ? why : "unknown error");
        return;
    }
#define SYMBOL(s) {#s, (void **)&api.s}
    struct { const char *symbol; void **slot; } table[] = {
        SYMBOL(TLS_server_method), SYMBOL(SSL_CTX_new), SYMBOL(SSL_CTX_free), SYMBOL(SSL_CTX_ctrl),
        SYMBOL(SSL_CTX_callback_ctrl), SYMBOL(SSL_CTX_set_options), SYMBOL(SSL_CTX_set_cipher_list),
        SYMBOL(SSL_CTX_set_session_id_context), SYMBOL(SSL_CTX_use_certificate_chain_file),
        SYMBOL(SSL_CTX_use_PrivateKey_file), SYMBOL(SSL_CTX_check_private_key), SYMBOL(SSL_CTX_get0_certificate),
        SYMBOL(SSL_CTX_set_alpn_select_cb), SYMBOL(SSL_new), SYMBOL(SSL_free), SYMBOL(SSL_set_fd), SYMBOL(SSL_accept),
        SYMBOL(SSL_read), SYMBOL(SSL_write), SYMBOL(SSL_get_error), SYMBOL(SSL_shutdown), SYMBOL(SSL_ctrl),
        SYMBOL(SSL_get_servername), SYMBOL(SSL_set_SSL_CTX), SYMBOL(SSL_get_SSL_CTX), SYMBOL(SSL_get0_alpn_selected),
        SYMBOL(SSL_session_reused), SYMBOL(SSL_get_version), SYMBOL(ERR_get_error), SYMBOL(ERR_error_string_n),
        SYMBOL(ERR_clear_error), SYMBOL(X509_get_ext_d2i), SYMBOL(OPENSSL_sk_num), SYMBOL(OPENSSL_sk_value),
        SYMBOL(GENERAL_NAMES_free), SYMBOL(ASN1_STRING_get0_data), SYMBOL(ASN1_STRING_length),
        SYMBOL(X509_get_subject_name), SYMBOL(X509_NAME_get_text_by_NID), SYMBOL(CRYPTO_malloc),
        SYMBOL(EVP_sha256), SYMBOL(EVP_Digest), SYMBOL(X509_get0_notBefore), SYMBOL(X509_get0_notAfter),
        SYMBOL(ASN1_TIME_to_tm), SYMBOL(TLS_client_method), SYMBOL(SSL_connect), SYMBOL(SSL_CTX_set_verify),
        SYMBOL(SSL_CTX_load_verify_locations), SYMBOL(SSL_CTX_set_default_verify_paths), SYMBOL(SSL_get0_param),
        SYMBOL(X509_VERIFY_PARAM_set1_host), SYMBOL(X509_VERIFY_PARAM_set1_ip_asc), SYMBOL(SSL_get_verify_result),
        SYMBOL(X509_verify_cert_error_string),
    };
#undef SYMBOL
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].slot = dlsym(lib, table[i].symbol);
        if (*table[i].slot == NULL) {
            snprintf(load_error, sizeof load_error, "%s has no %s: Larder needs OpenSSL 3", name, table[i].symbol);
            return;
        }
    }
    loaded = 0;
}

int larder_tls_load(void) {
    pthread_once(&once, load);
    return loaded;
}

const char *larder_tls_error(void) { return load_error; }

int larder_sha256(const void *data, size_t length, unsigned char out[32]) {
    if (larder_tls_load() != 0) return -1;
    unsigned int size = 0;
    return api.EVP_Digest(data, length, out, &size, api.EVP_sha256(), NULL) == 1 && size == 32 ? 0 : -1;
}

void larder_tls_take_error(char *out, size_t size) {
    unsigned long code = api.ERR_get_error(), next;
    while ((next = api.ERR_get_error()) != 0) (void)next;
    if (code == 0) {
        snprintf(out, size, "%s", errno ? strerror(errno) : "unknown error");
        return;
    }
    api.ERR_error_string_n(code, out, size);
}
