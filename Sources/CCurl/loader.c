// Opens libcurl at run time (see shim.h for why) and fills `larder_curl`.
#include "shim.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

struct larder_curl_api larder_curl;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
// 1: loaded; -1: failed for good; 0: not yet (or failed for want of a
// descriptor or memory: the next call tries again).
static atomic_int state = 0;
static char error[512] = "libcurl was not loaded";

// Whether a failure came from the process being short of descriptors (a
// burst of connections at start-up) or memory right now, not from the
// library: then it is worth trying again.
static int transient(const char *why) {
    if (why != NULL && (strstr(why, "Too many open files") != NULL || strstr(why, "Cannot allocate memory") != NULL)) return 1;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno == EMFILE || errno == ENFILE || errno == ENOMEM;
    close(fd);
    return 0;
}

// One attempt, under `lock`: returns 1 (loaded), 0 (try again) or -1.
static int load(void) {
    const char *name = getenv("LARDER_LIBCURL");
    if (name == NULL || *name == '\0') name = "libcurl.so.4";
    // RTLD_LOCAL: its symbols stay out of the global scope (nothing else
    // here resolves against them). RTLD_LAZY, as at exec: binding every
    // function of its thirty-odd libraries now cost a first miss ~0.5 ms;
    // the functions used here are looked up (and checked) below.
    void *lib = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(error, sizeof error, "cannot load libcurl (%s): %s", name, why ? why : "unknown error");
        return transient(why) ? 0 : -1;
    }
    struct { const char *symbol; void **slot; } table[] = {
        {"curl_version", (void **)&larder_curl.version},
        {"curl_easy_init", (void **)&larder_curl.easy_init},
        {"curl_easy_cleanup", (void **)&larder_curl.easy_cleanup},
        {"curl_easy_reset", (void **)&larder_curl.easy_reset},
        {"curl_easy_setopt", (void **)&larder_curl.easy_setopt},
        {"curl_easy_getinfo", (void **)&larder_curl.easy_getinfo},
        {"curl_easy_perform", (void **)&larder_curl.easy_perform},
        {"curl_easy_pause", (void **)&larder_curl.easy_pause},
        {"curl_easy_strerror", (void **)&larder_curl.easy_strerror},
        {"curl_multi_init", (void **)&larder_curl.multi_init},
        {"curl_multi_cleanup", (void **)&larder_curl.multi_cleanup},
        {"curl_multi_setopt", (void **)&larder_curl.multi_setopt},
        {"curl_multi_add_handle", (void **)&larder_curl.multi_add_handle},
        {"curl_multi_remove_handle", (void **)&larder_curl.multi_remove_handle},
        {"curl_multi_socket_action", (void **)&larder_curl.multi_socket_action},
        {"curl_multi_info_read", (void **)&larder_curl.multi_info_read},
        {"curl_multi_strerror", (void **)&larder_curl.multi_strerror},
        {"curl_slist_append", (void **)&larder_curl.slist_append},
        {"curl_slist_free_all", (void **)&larder_curl.slist_free_all},
        {"curl_easy_send", (void **)&larder_curl.easy_send},
        {"curl_easy_recv", (void **)&larder_curl.easy_recv},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        *table[i].slot = dlsym(lib, table[i].symbol);
        if (*table[i].slot == NULL) {
            snprintf(error, sizeof error, "%s has no %s: not a libcurl this build can use", name, table[i].symbol);
            return -1;
        }
    }
    CURLcode (*global_init)(long) = (CURLcode (*)(long))dlsym(lib, "curl_global_init");
    if (global_init == NULL || global_init(CURL_GLOBAL_ALL) != CURLE_OK) {
        snprintf(error, sizeof error, "libcurl (%s) failed to initialise", name);
        return transient(NULL) ? 0 : -1;
    }
    return 1;
}

int larder_curl_load(void) {
    if (atomic_load(&state) == 1) return 0;
    pthread_mutex_lock(&lock);
    if (atomic_load(&state) == 0) atomic_store(&state, load());
    int loaded = atomic_load(&state) == 1;
    pthread_mutex_unlock(&lock);
    return loaded ? 0 : -1;
}

int larder_curl_load_unless_busy(void) {
    if (atomic_load(&state) == 1) return 0;
    if (pthread_mutex_trylock(&lock) != 0) return 1;
    if (atomic_load(&state) == 0) atomic_store(&state, load());
    int loaded = atomic_load(&state) == 1;
    pthread_mutex_unlock(&lock);
    return loaded ? 0 : -1;
}

int larder_curl_failed_for_good(void) { return atomic_load(&state) == -1; }

const char *larder_curl_error(void) {
    if (larder_curl_load() == 0) return "";
    return error;
}

void larder_curl_require(void) {
    if (larder_curl_load() == 0) return;
    // Another thread may get here at the same moment: one says why and
    // ends the process; the other waits for that.
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&said)) {
        fprintf(stderr, "larder: %s\n", error);
        fflush(stderr);
        _exit(1);
    }
    for (;;) pause();
}

static _Atomic(long (*)(void)) descriptor_relief = NULL;

void larder_set_descriptor_relief(long (*relief)(void)) { atomic_store(&descriptor_relief, relief); }

curl_socket_t larder_open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *address) {
    (void)clientp;
    (void)purpose;
    int fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
        long (*relief)(void) = atomic_load(&descriptor_relief);
        if (relief != NULL && relief() > 0) fd = socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
    }
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

