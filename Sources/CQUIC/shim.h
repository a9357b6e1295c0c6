// QUIC and HTTP/3 to clients from Debian's libraries: libngtcp2 (QUIC,
// 0.12), libngtcp2-crypto-gnutls with GnuTLS (QUIC's TLS 1.3: Debian's
// OpenSSL has no QUIC API) and libnghttp3 (HTTP/3 framing and QPACK, 0.8).
// The inline functions stand for the libraries' function-like macros,
// which Swift cannot call.
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <ngtcp2/ngtcp2_crypto_gnutls.h>
#include <nghttp3/nghttp3.h>
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>

static inline void cq_settings_default(ngtcp2_settings *s) { ngtcp2_settings_default(s); }
static inline void cq_transport_params_default(ngtcp2_transport_params *p) { ngtcp2_transport_params_default(p); }

static inline int cq_conn_server_new(ngtcp2_conn **conn, const ngtcp2_cid *dcid, const ngtcp2_cid *scid,
                                     const ngtcp2_path *path, uint32_t version, const ngtcp2_callbacks *callbacks,
                                     const ngtcp2_settings *settings, const ngtcp2_transport_params *params,
                                     void *user_data) {
    return ngtcp2_conn_server_new(conn, dcid, scid, path, version, callbacks, settings, params, NULL, user_data);
}

static inline int cq_conn_read_pkt(ngtcp2_conn *conn, const ngtcp2_path *path, const ngtcp2_pkt_info *pi,
                                   const uint8_t *pkt, size_t len, ngtcp2_tstamp ts) {
    return ngtcp2_conn_read_pkt(conn, path, pi, pkt, len, ts);
}

static inline ngtcp2_ssize cq_conn_writev_stream(ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                                                 uint8_t *dest, size_t destlen, ngtcp2_ssize *pdatalen, uint32_t flags,
                                                 int64_t stream_id, const ngtcp2_vec *datav, size_t datavcnt,
                                                 ngtcp2_tstamp ts) {
    return ngtcp2_conn_writev_stream(conn, path, pi, dest, destlen, pdatalen, flags, stream_id, datav, datavcnt, ts);
}

static inline ngtcp2_ssize cq_conn_write_connection_close(ngtcp2_conn *conn, ngtcp2_path *path, ngtcp2_pkt_info *pi,
                                                          uint8_t *dest, size_t destlen,
                                                          const ngtcp2_connection_close_error *error, ngtcp2_tstamp ts) {
    return ngtcp2_conn_write_connection_close(conn, path, pi, dest, destlen, error, ts);
}

static inline void cq_nghttp3_settings_default(nghttp3_settings *s) { nghttp3_settings_default(s); }

static inline int cq_nghttp3_conn_server_new(nghttp3_conn **conn, const nghttp3_callbacks *callbacks,
                                             const nghttp3_settings *settings, void *user_data) {
    return nghttp3_conn_server_new(conn, callbacks, settings, NULL, user_data);
}

/// The ngtcp2 connection a GnuTLS session belongs to (its pointer is the
/// connection reference).
static inline ngtcp2_conn *cq_conn_of_ref(ngtcp2_crypto_conn_ref *ref) { return (ngtcp2_conn *)ref->user_data; }
