#define _GNU_SOURCE
#include "el.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// Timers live in a binary min-heap indexed by slot, so cancel is O(log n)
// rather than a scan: connections arm and cancel idle timers constantly.
typedef struct {
    uint64_t deadline_ms;
    uint64_t token;
    uint32_t generation;  // distinguishes a reused slot from a stale id
    int32_t heap_pos;     // -1 when not armed
} el_timer;

struct el_loop {
    int epfd;
    int wakefd;
    uint32_t *interest;   // per fd: registered interest | 0x80000000 when added
    int interest_cap;
    el_timer *timers;
    uint32_t timers_cap;
    uint32_t *free_slots;
    uint32_t free_count;
    uint32_t *heap;       // slots ordered by deadline
    uint32_t heap_len;
    uint64_t wake_us;     // when the last poll returned (monotonic microseconds)
    int64_t clock_ms;     // this loop's clock moved on by a test, over the process's
};

uint64_t el_loop_now_ms(const el_loop *l) { return el_now_ms() + (uint64_t)l->clock_ms; }
void el_loop_clock_advance(el_loop *l, int64_t ms) { l->clock_ms += ms; }

#define EL_REGISTERED 0x80000000u
#define EL_WAKE_TOKEN UINT64_MAX

el_loop *el_create(int *err) {
    el_loop *loop = calloc(1, sizeof(*loop));
    if (!loop) { *err = ENOMEM; return NULL; }
    // The size argument is only a hint for old kernels.
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) { *err = errno; free(loop); return NULL; }
    loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (loop->wakefd < 0) { *err = errno; close(loop->epfd); free(loop); return NULL; }
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = EL_WAKE_TOKEN };
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0) {
        *err = errno; close(loop->wakefd); close(loop->epfd); free(loop); return NULL;
    }
    return loop;
}

void el_destroy(el_loop *loop) {
    if (!loop) return;
    close(loop->wakefd);
    close(loop->epfd);
    free(loop->interest);
    free(loop->timers);
    free(loop->free_slots);
    free(loop->heap);
    free(loop);
}

static int ensure_interest(el_loop *loop, int fd) {
    if (fd < loop->interest_cap) return 0;
    int cap = loop->interest_cap ? loop->interest_cap : 256;
    while (cap <= fd) cap *= 2;
    uint32_t *grown = realloc(loop->interest, (size_t)cap * sizeof(uint32_t));
    if (!grown) return -ENOMEM;
    memset(grown + loop->interest_cap, 0, (size_t)(cap - loop->interest_cap) * sizeof(uint32_t));
    loop->interest = grown;
    loop->interest_cap = cap;
    return 0;
}

int el_watch(el_loop *loop, int fd, uint32_t interest, uint64_t token) {
    if (fd < 0) return -EBADF;
    int rc = ensure_interest(loop, fd);
    if (rc) return rc;
    struct epoll_event ev = { .events = EPOLLRDHUP, .data.u64 = token };
    if (interest & EL_READ) ev.events |= EPOLLIN;
    if (interest & EL_WRITE) ev.events |= EPOLLOUT;
    int op = (loop->interest[fd] & EL_REGISTERED) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(loop->epfd, op, fd, &ev) < 0) {
        // The fd was closed and reused behind our back: register it afresh.
        if (op == EPOLL_CTL_MOD && errno == ENOENT) {
            if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -errno;
        } else {
            return -errno;
        }
    }
    loop->interest[fd] = interest | EL_REGISTERED;
    return 0;
}

int el_unwatch(el_loop *loop, int fd) {
    if (fd < 0 || fd >= loop->interest_cap || !(loop->interest[fd] & EL_REGISTERED)) return 0;
    loop->interest[fd] = 0;
    if (epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 && errno != EBADF && errno != ENOENT)
        return -errno;
    return 0;
}

// ---- timers -----------------------------------------------------------

static int heap_less(el_loop *l, uint32_t a, uint32_t b) {
    return l->timers[l->heap[a]].deadline_ms < l->timers[l->heap[b]].deadline_ms;
}

static void heap_swap(el_loop *l, uint32_t a, uint32_t b) {
    uint32_t sa = l->heap[a], sb = l->heap[b];
    l->heap[a] = sb; l->heap[b] = sa;
    l->timers[sb].heap_pos = (int32_t)a;
    l->timers[sa].heap_pos = (int32_t)b;
}

static void heap_up(el_loop *l, uint32_t i) {
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!heap_less(l, i, parent)) break;
        heap_swap(l, i, parent);
        i = parent;
    }
}

static void heap_down(el_loop *l, uint32_t i) {
    for (;;) {
        uint32_t left = 2 * i + 1, right = left + 1, least = i;
        if (left < l->heap_len && heap_less(l, left, least)) least = left;
        if (right < l->heap_len && heap_less(l, right, least)) least = right;
        if (least == i) break;
        heap_swap(l, i, least);
        i = least;
    }
}

static void heap_remove(el_loop *l, uint32_t i) {
    uint32_t slot = l->heap[i];
    l->heap_len--;
    if (i != l->heap_len) {
        heap_swap(l, i, l->heap_len);
        heap_down(l, i);
        heap_up(l, i);
    }
    l->timers[slot].heap_pos = -1;
    l->timers[slot].generation++;
    l->free_slots[l->free_count++] = slot;
}

static int grow_timers(el_loop *l) {
    uint32_t cap = l->timers_cap ? l->timers_cap * 2 : 64;
    el_timer *t = realloc(l->timers, cap * sizeof(el_timer));
    if (!t) return -ENOMEM;
    l->timers = t;
    uint32_t *f = realloc(l->free_slots, cap * sizeof(uint32_t));
    if (!f) return -ENOMEM;
    l->free_slots = f;
    uint32_t *h = realloc(l->heap, cap * sizeof(uint32_t));
    if (!h) return -ENOMEM;
    l->heap = h;
    for (uint32_t s = cap; s > l->timers_cap; s--) {
        uint32_t slot = s - 1;
        l->timers[slot].heap_pos = -1;
        l->timers[slot].generation = 1;
        l->free_slots[l->free_count++] = slot;
    }
    l->timers_cap = cap;
    return 0;
}

uint64_t el_timer_start(el_loop *l, uint64_t delay_ms, uint64_t token) {
    if (l->free_count == 0 && grow_timers(l) < 0) return 0;
    uint32_t slot = l->free_slots[--l->free_count];
    el_timer *t = &l->timers[slot];
    t->deadline_ms = el_loop_now_ms(l) + delay_ms;
    t->token = token;
    t->heap_pos = (int32_t)l->heap_len;
    l->heap[l->heap_len++] = slot;
    heap_up(l, (uint32_t)t->heap_pos);
    return ((uint64_t)t->generation << 32) | slot;
}

void el_timer_cancel(el_loop *l, uint64_t id) {
    uint32_t slot = (uint32_t)(id & 0xffffffffu);
    uint32_t generation = (uint32_t)(id >> 32);
    if (id == 0 || slot >= l->timers_cap) return;
    el_timer *t = &l->timers[slot];
    if (t->generation != generation || t->heap_pos < 0) return;
    heap_remove(l, (uint32_t)t->heap_pos);
}

// ---- polling ----------------------------------------------------------

int el_wake(el_loop *loop) {
    uint64_t one = 1;
    if (write(loop->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN) return -errno;
    return 0;
}

uint64_t el_wake_us(const el_loop *l) { return l->wake_us; }

static _Thread_local int on_loop;
void el_set_on_loop(int on) { on_loop = on; }
int el_on_loop(void) { return on_loop; }

int el_poll(el_loop *l, el_event *out, int cap, int max_wait_ms) {
    if (cap <= 0) return -EINVAL;
    int timeout = max_wait_ms;
    if (l->heap_len > 0) {
        uint64_t now = el_loop_now_ms(l);
        uint64_t deadline = l->timers[l->heap[0]].deadline_ms;
        int until = deadline <= now ? 0 : (deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now));
        if (timeout < 0 || until < timeout) timeout = until;
    }
    struct epoll_event evs[256];
    int want = cap < 256 ? cap : 256;
    int n = epoll_wait(l->epfd, evs, want, timeout);
    if (n < 0) {
        if (errno != EINTR) return -errno;
        n = 0;
    }
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (evs[i].data.u64 == EL_WAKE_TOKEN) {
            uint64_t drained;
            while (read(l->wakefd, &drained, sizeof(drained)) > 0) {}
            out[count++] = (el_event){ .token = 0, .kind = EL_KIND_WAKE, .events = EL_READ };
            continue;
        }
        uint32_t e = 0;
        if (evs[i].events & EPOLLIN) e |= EL_READ;
        if (evs[i].events & EPOLLOUT) e |= EL_WRITE;
        if (evs[i].events & EPOLLERR) e |= EL_ERROR;
        if (evs[i].events & (EPOLLHUP | EPOLLRDHUP)) e |= EL_HUP;
        out[count++] = (el_event){ .token = evs[i].data.u64, .kind = EL_KIND_FD, .events = e };
    }
    // One clock read per wake serves the timers and the requests it brings.
    // (Latencies are measured on the process's clock; timers on the loop's.)
    l->wake_us = el_now_us();
    uint64_t now = l->wake_us / 1000u + (uint64_t)l->clock_ms;
    while (count < cap && l->heap_len > 0) {
        el_timer *t = &l->timers[l->heap[0]];
        if (t->deadline_ms > now) break;
        out[count++] = (el_event){ .token = t->token, .kind = EL_KIND_TIMER, .events = 0 };
        heap_remove(l, 0);
    }
    return count;
}

// ---- signals ----------------------------------------------------------

int el_signalfd_open(const int *signals, int count) {
    sigset_t mask;
    sigemptyset(&mask);
    for (int i = 0; i < count; i++) sigaddset(&mask, signals[i]);
    int rc = pthread_sigmask(SIG_BLOCK, &mask, NULL);
    if (rc) return -rc;
    int fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

int el_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    if (n < 0) return -errno;
    if (n != sizeof(info)) return -EIO;
    return (int)info.ssi_signo;
}

void el_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }

void el_name_thread(const char *name) {
    char shown[16];
    snprintf(shown, sizeof shown, "%s", name);
    pthread_setname_np(pthread_self(), shown);
}

long el_raise_nofile_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -errno;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -errno;
    }
    return (long)rl.rlim_cur;
}

// ---- sockets ----------------------------------------------------------

int el_passive_addresses(const char *host, uint16_t port, int socktype, struct addrinfo **res) {
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = socktype,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    char service[8];
    snprintf(service, sizeof(service), "%u", (unsigned)port);
    *res = NULL;
    int gai = getaddrinfo(host, service, &hints, res);
    if (gai != 0) return gai == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
    return 0;
}

int el_listen_tcp(const char *host, uint16_t port, int backlog, int reuse_port,
                  uint16_t *bound_port) {
    struct addrinfo *res = NULL;
    int resolved = el_passive_addresses(host, port, SOCK_STREAM, &res);
    if (resolved != 0) return resolved;
    int result = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) { result = -errno; continue; }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
            result = -errno; close(fd); continue;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, backlog) < 0) {
            result = -errno; close(fd); continue;
        }
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            *bound_port = ss.ss_family == AF_INET6
                ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
        result = fd;
        break;
    }
    freeaddrinfo(res);
    return result;
}

int el_accept(int listen_fd, char *addr, size_t addr_cap) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int fd;
    do {
        fd = accept4(listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (addr && addr_cap > 0) {
        addr[0] = 0;
        if (ss.ss_family == AF_INET)
            inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, (socklen_t)addr_cap);
        else if (ss.ss_family == AF_INET6)
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, (socklen_t)addr_cap);
    }
    return fd;
}

ssize_t el_pread_nowait(int fd, void *buf, size_t len, int64_t offset) {
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    ssize_t n;
    do { n = preadv2(fd, &iov, 1, (off_t)offset, RWF_NOWAIT); } while (n < 0 && errno == EINTR);
    /* Where RWF_NOWAIT is not supported, nothing is known to be cached:
       the caller reads on an I/O thread rather than block its loop. */
    if (n < 0 && (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) return -EAGAIN;
    return n < 0 ? -errno : n;
}

#ifndef __NR_cachestat
#define __NR_cachestat 451  /* the same on every architecture (Linux 6.5) */
#endif

/* Whether a 1-byte read at offset would be served from the page cache. */
static int el_byte_cached(int fd, int64_t offset) {
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    ssize_t n;
    do { n = preadv2(fd, &iov, 1, (off_t)offset, RWF_NOWAIT); } while (n < 0 && errno == EINTR);
    if (n >= 0) return 1;
    return errno == EAGAIN ? 0 : -1;
}

int el_range_cached(int fd, int64_t offset, size_t len) {
    static int no_cachestat;
    if (len == 0) return 1;
    if (!__atomic_load_n(&no_cachestat, __ATOMIC_RELAXED)) {
        struct { uint64_t off, len; } range = {(uint64_t)offset, (uint64_t)len};
        struct { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; } stat;
        if (syscall(__NR_cachestat, fd, &range, &stat, 0) == 0) {
            uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
            uint64_t pages = ((uint64_t)offset + len - 1) / page - (uint64_t)offset / page + 1;
            if (stat.nr_cache < pages) return 0;
            /* Pages being read ahead count as present before their bytes are
               in: the last one, read last, must be readable without waiting. */
            return el_byte_cached(fd, offset + (int64_t)len - 1) == 0 ? 0 : 1;
        }
        if (errno != ENOSYS && errno != EPERM) return -1;
        __atomic_store_n(&no_cachestat, 1, __ATOMIC_RELAXED);
    }
    /* Before Linux 6.5: the range's first and last bytes stand for it. */
    int first = el_byte_cached(fd, offset);
    if (first != 1) return first;
    return el_byte_cached(fd, offset + (int64_t)len - 1);
}

ssize_t el_read(int fd, void *buf, size_t len) {
    ssize_t n;
    do { n = read(fd, buf, len); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

ssize_t el_sendfile(int out_fd, int in_fd, int64_t offset, size_t count) {
    off_t off = (off_t)offset;
    ssize_t n;
    do { n = sendfile(out_fd, in_fd, &off, count); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int el_open_read(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

ssize_t el_writev(int fd, const struct iovec *iov, int count) {
    ssize_t n;
    do { n = writev(fd, iov, count); } while (n < 0 && errno == EINTR);
    return n < 0 ? -errno : n;
}

int el_close(int fd) { return close(fd) < 0 ? -errno : 0; }

