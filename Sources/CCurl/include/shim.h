// libcurl, opened with dlopen rather than linked: loading it and its ~30
// libraries (TLS, Kerberos, LDAP, SSH, ...) costs about 3 ms of every start,
// and a cache hit needs none of it. `larder_curl_load` opens it (once, from
// any thread; `larder serve` starts it on a thread of its own at start-up)
// and every call below goes through the table it fills. Swift calls the
// typed, non-variadic wrappers only, so it never passes an argument of the
// wrong C type to a vararg function.
#ifndef LARDER_CURL_SHIM_H
#define LARDER_CURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*larder_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*larder_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*larder_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*larder_curl_sockopt_cb)(void *clientp, curl_socket_t fd, int purpose);
typedef int (*larder_curl_closesocket_cb)(void *clientp, curl_socket_t fd);

struct larder_curl_api {
    char *(*version)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_pause)(CURL *, int);
    const char *(*easy_strerror)(CURLcode);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    const char *(*multi_strerror)(CURLMcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLcode (*easy_send)(CURL *, const void *, size_t, size_t *);
    CURLcode (*easy_recv)(CURL *, void *, size_t, size_t *);
};

/// Filled by a successful `larder_curl_load`; read only after it returned 0.
extern struct larder_curl_api larder_curl;

/// Opens libcurl (LARDER_LIBCURL names another file; default libcurl.so.4),
/// finds every function above and runs curl_global_init, once per process:
/// later calls, from any thread, wait for the first and return its result.
/// 0 when libcurl is ready; -1 otherwise, with `larder_curl_error` saying why.
/// A failure for want of descriptors or memory (a burst of connections
/// right after start) is not kept: the next call tries again.
int larder_curl_load(void);
/// The same without waiting for another thread that is loading it now:
/// 1 then (a worker's loop must not wait the ~17 million instructions of
/// relocations out).
int larder_curl_load_unless_busy(void);
const char *larder_curl_error(void);
/// Whether loading failed for a reason trying again cannot mend.
int larder_curl_failed_for_good(void);
/// `larder_curl_load`, or else the reason on stderr and the process ends
/// (exit 1): a daemon that cannot reach its upstream at all is broken.
/// (`UpstreamClient.requireLibrary` first waits out a failure for want of
/// descriptors.)
void larder_curl_require(void);

static inline char *larder_curl_version(void) { return larder_curl.version(); }
static inline CURL *larder_curl_easy_init(void) { return larder_curl.easy_init(); }
static inline void larder_curl_easy_cleanup(CURL *h) { larder_curl.easy_cleanup(h); }
static inline void larder_curl_easy_reset(CURL *h) { larder_curl.easy_reset(h); }
static inline CURLcode larder_curl_easy_perform(CURL *h) { return larder_curl.easy_perform(h); }
static inline CURLcode larder_curl_easy_pause(CURL *h, int bitmask) { return larder_curl.easy_pause(h, bitmask); }
static inline const char *larder_curl_easy_strerror(CURLcode c) { return larder_curl.easy_strerror(c); }
static inline CURLM *larder_curl_multi_init(void) { return larder_curl.multi_init(); }
static inline CURLMcode larder_curl_multi_cleanup(CURLM *m) { return larder_curl.multi_cleanup(m); }
static inline CURLMcode larder_curl_multi_add_handle(CURLM *m, CURL *h) { return larder_curl.multi_add_handle(m, h); }
static inline CURLMcode larder_curl_multi_remove_handle(CURLM *m, CURL *h) { return larder_curl.multi_remove_handle(m, h); }
static inline CURLMcode larder_curl_multi_socket_action(CURLM *m, curl_socket_t s, int ev, int *running) {
    return larder_curl.multi_socket_action(m, s, ev, running);
}
static inline CURLMsg *larder_curl_multi_info_read(CURLM *m, int *left) { return larder_curl.multi_info_read(m, left); }
static inline const char *larder_curl_multi_strerror(CURLMcode c) { return larder_curl.multi_strerror(c); }
static inline struct curl_slist *larder_curl_slist_append(struct curl_slist *l, const char *s) { return larder_curl.slist_append(l, s); }
static inline void larder_curl_slist_free_all(struct curl_slist *l) { larder_curl.slist_free_all(l); }

static inline CURLcode larder_easy_setopt_long(CURL *h, CURLoption o, long v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_datacb(CURL *h, CURLoption o, larder_curl_data_cb v) { return larder_curl.easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_sockoptcb(CURL *h, larder_curl_sockopt_cb v) { return larder_curl.easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, v); }
static inline CURLcode larder_easy_setopt_closesocketcb(CURL *h, larder_curl_closesocket_cb v) { return larder_curl.easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }

/* An upstream connection's socket, opened as libcurl would; when the
   process is out of descriptors, `relief` (set once by the daemon: the
   disk tier closes files it keeps open) is asked to give some back and
   the socket is tried once more. */
void larder_set_descriptor_relief(long (*relief)(void));
curl_socket_t larder_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address);
static inline CURLcode larder_easy_setopt_opensocket(CURL *h) {
    return larder_curl.easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, larder_open_socket);
}

/* A CURLOPT_CONNECT_ONLY connection's raw bytes (an upgraded connection). */
static inline CURLcode larder_curl_easy_send(CURL *h, const void *b, size_t n, size_t *sent) { return larder_curl.easy_send(h, b, n, sent); }
static inline CURLcode larder_curl_easy_recv(CURL *h, void *b, size_t n, size_t *got) { return larder_curl.easy_recv(h, b, n, got); }
static inline CURLcode larder_easy_getinfo_socket(CURL *h, curl_socket_t *s) { return larder_curl.easy_getinfo(h, CURLINFO_ACTIVESOCKET, s); }

static inline CURLcode larder_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return larder_curl.easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return larder_curl.easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return larder_curl.easy_getinfo(h, i, v); }

static inline CURLMcode larder_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return larder_curl.multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return larder_curl.multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_setopt_socketcb(CURLM *m, larder_curl_socket_cb v) { return larder_curl.multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode larder_multi_setopt_timercb(CURLM *m, larder_curl_timer_cb v) { return larder_curl.multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

// CURLMsg carries a union; these read the two fields we need.
static inline CURL *larder_msg_easy(CURLMsg *m) { return m->easy_handle; }
static inline int larder_msg_done(CURLMsg *m) { return m->msg == CURLMSG_DONE; }
static inline CURLcode larder_msg_result(CURLMsg *m) { return m->data.result; }

// Macros Swift cannot import.
static const curl_socket_t LARDER_CURL_SOCKET_TIMEOUT = CURL_SOCKET_TIMEOUT;
static const size_t LARDER_CURL_WRITEFUNC_PAUSE = CURL_WRITEFUNC_PAUSE;
static const size_t LARDER_CURL_READFUNC_PAUSE = CURL_READFUNC_PAUSE;
static const size_t LARDER_CURL_READFUNC_ABORT = CURL_READFUNC_ABORT;
static const int LARDER_CURLPAUSE_CONT = CURLPAUSE_CONT;
static const long LARDER_CURL_HTTP_VERSION_2TLS = CURL_HTTP_VERSION_2TLS;
static const long LARDER_CURL_HTTP_VERSION_1_1 = CURL_HTTP_VERSION_1_1;
static const int LARDER_CURLSOCKTYPE_IPCXN = CURLSOCKTYPE_IPCXN;

#endif
