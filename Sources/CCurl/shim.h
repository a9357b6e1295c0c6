// Typed, non-variadic wrappers around libcurl's variadic setopt/getinfo, so
// Swift never passes an argument of the wrong C type to a vararg function.
#ifndef LARDER_CURL_SHIM_H
#define LARDER_CURL_SHIM_H

#include <curl/curl.h>

typedef size_t (*larder_curl_data_cb)(char *ptr, size_t size, size_t nmemb, void *userdata);
typedef int (*larder_curl_socket_cb)(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
typedef int (*larder_curl_timer_cb)(CURLM *multi, long timeout_ms, void *userp);
typedef int (*larder_curl_sockopt_cb)(void *clientp, curl_socket_t fd, int purpose);
typedef int (*larder_curl_closesocket_cb)(void *clientp, curl_socket_t fd);

static inline CURLcode larder_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_datacb(CURL *h, CURLoption o, larder_curl_data_cb v) { return curl_easy_setopt(h, o, v); }
static inline CURLcode larder_easy_setopt_sockoptcb(CURL *h, larder_curl_sockopt_cb v) { return curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, v); }
static inline CURLcode larder_easy_setopt_closesocketcb(CURL *h, larder_curl_closesocket_cb v) { return curl_easy_setopt(h, CURLOPT_CLOSESOCKETFUNCTION, v); }

static inline CURLcode larder_easy_getinfo_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *v) { return curl_easy_getinfo(h, i, v); }
static inline CURLcode larder_easy_getinfo_ptr(CURL *h, CURLINFO i, void **v) { return curl_easy_getinfo(h, i, v); }

static inline CURLMcode larder_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
static inline CURLMcode larder_multi_setopt_socketcb(CURLM *m, larder_curl_socket_cb v) { return curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, v); }
static inline CURLMcode larder_multi_setopt_timercb(CURLM *m, larder_curl_timer_cb v) { return curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, v); }

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
static const int LARDER_CURLSOCKTYPE_IPCXN = CURLSOCKTYPE_IPCXN;

#endif
