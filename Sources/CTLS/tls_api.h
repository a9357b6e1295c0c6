// The OpenSSL calls Larder makes, filled by `larder_tls_load` from the
// library opened at run time (only types and constants come from
// OpenSSL's headers), shared by the C files of this target.
#ifndef LARDER_TLS_API_H
#define LARDER_TLS_API_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct larder_ssl_api {
    const SSL_METHOD *(*TLS_server_method)(void);
    SSL_CTX *(*SSL_CTX_new)(const SSL_METHOD *);
    void (*SSL_CTX_free)(SSL_CTX *);
    long (*SSL_CTX_ctrl)(SSL_CTX *, int, long, void *);
    long (*SSL_CTX_callback_ctrl)(SSL_CTX *, int, void (*)(void));
    uint64_t (*SSL_CTX_set_options)(SSL_CTX *, uint64_t);
    int (*SSL_CTX_set_cipher_list)(SSL_CTX *, const char *);
    int (*SSL_CTX_set_session_id_context)(SSL_CTX *, const unsigned char *, unsigned int);
    int (*SSL_CTX_use_certificate_chain_file)(SSL_CTX *, const char *);
    int (*SSL_CTX_use_PrivateKey_file)(SSL_CTX *, const char *, int);
    int (*SSL_CTX_check_private_key)(const SSL_CTX *);
    X509 *(*SSL_CTX_get0_certificate)(const SSL_CTX *);
    void (*SSL_CTX_set_alpn_select_cb)(SSL_CTX *, SSL_CTX_alpn_select_cb_func, void *);
    SSL *(*SSL_new)(SSL_CTX *);
    void (*SSL_free)(SSL *);
    int (*SSL_set_fd)(SSL *, int);
    int (*SSL_accept)(SSL *);
    int (*SSL_read)(SSL *, void *, int);
    int (*SSL_write)(SSL *, const void *, int);
    int (*SSL_get_error)(const SSL *, int);
    int (*SSL_shutdown)(SSL *);
    long (*SSL_ctrl)(SSL *, int, long, void *);
    const char *(*SSL_get_servername)(const SSL *, const int);
    SSL_CTX *(*SSL_set_SSL_CTX)(SSL *, SSL_CTX *);
    SSL_CTX *(*SSL_get_SSL_CTX)(const SSL *);
    void (*SSL_get0_alpn_selected)(const SSL *, const unsigned char **, unsigned int *);
    int (*SSL_session_reused)(const SSL *);
    const char *(*SSL_get_version)(const SSL *);
    unsigned long (*ERR_get_error)(void);
    void (*ERR_error_string_n)(unsigned long, char *, size_t);
    void (*ERR_clear_error)(void);
    void *(*X509_get_ext_d2i)(const X509 *, int, int *, int *);
    int (*OPENSSL_sk_num)(const OPENSSL_STACK *);
    void *(*OPENSSL_sk_value)(const OPENSSL_STACK *, int);
    void (*GENERAL_NAMES_free)(GENERAL_NAMES *);
    const unsigned char *(*ASN1_STRING_get0_data)(const ASN1_STRING *);
    int (*ASN1_STRING_length)(const ASN1_STRING *);
    X509_NAME *(*X509_get_subject_name)(const X509 *);
    int (*X509_NAME_get_text_by_NID)(X509_NAME *, int, char *, int);
    void *(*CRYPTO_malloc)(size_t, const char *, int);
    const void *(*EVP_sha256)(void);
    const ASN1_TIME *(*X509_get0_notBefore)(const X509 *);
    const ASN1_TIME *(*X509_get0_notAfter)(const X509 *);
    int (*ASN1_TIME_to_tm)(const ASN1_TIME *, struct tm *);
    int (*EVP_Digest)(const void *, size_t, unsigned char *, unsigned int *, const void *, void *);
    // The client side (TLS to Redis).
    const SSL_METHOD *(*TLS_client_method)(void);
    int (*SSL_connect)(SSL *);
    void (*SSL_CTX_set_verify)(SSL_CTX *, int, SSL_verify_cb);
    int (*SSL_CTX_load_verify_locations)(SSL_CTX *, const char *, const char *);
    int (*SSL_CTX_set_default_verify_paths)(SSL_CTX *);
    X509_VERIFY_PARAM *(*SSL_get0_param)(SSL *);
    int (*X509_VERIFY_PARAM_set1_host)(X509_VERIFY_PARAM *, const char *, size_t);
    int (*X509_VERIFY_PARAM_set1_ip_asc)(X509_VERIFY_PARAM *, const char *);
    long (*SSL_get_verify_result)(const SSL *);
    const char *(*X509_verify_cert_error_string)(long);
};

extern struct larder_ssl_api api;

// The oldest queued OpenSSL error as text (the queue is emptied).
void larder_tls_take_error(char *out, size_t size);
// A step's result through SSL_get_error (LARDER_TLS_*), its failure kept
// for larder_tls_session_error; and setting that text.
int larder_tls_step_outcome(SSL *ssl, int result);
void larder_tls_set_error(const char *text);

#endif
