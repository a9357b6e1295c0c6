// A small epoll event loop: mechanism only, no HTTP.
//
// Level-triggered: an fd stays ready until it is drained, which matches what
// libcurl expects from CURLMOPT_SOCKETFUNCTION and keeps partial reads simple.
// The loop never calls back into Swift: el_poll() fills an array of events
// (fd readiness, expired timers, wake-ups) and the caller dispatches them by
// token. Tokens are chosen by the caller and never reused, so an event for a
// registration removed earlier in the same batch is recognisably stale.
//
// Every function returns a negative errno on failure; none calls exit().
#ifndef LARDER_EL_H
#define LARDER_EL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct el_loop el_loop;

enum {
    EL_READ = 1u,
    EL_WRITE = 2u,
    EL_ERROR = 4u,   // EPOLLERR
    EL_HUP = 8u,     // EPOLLHUP or EPOLLRDHUP
};

enum {
    EL_KIND_FD = 0,
    EL_KIND_TIMER = 1,
    EL_KIND_WAKE = 2,
};

typedef struct {
    uint64_t token;   // the caller's token for the fd or timer; 0 for wake-ups
    uint32_t kind;    // EL_KIND_*
    uint32_t events;  // EL_READ | EL_WRITE | EL_ERROR | EL_HUP for fds
} el_event;

/// Creates a loop (epoll instance + eventfd for wake-ups). NULL on failure,
/// with the errno in *err.
el_loop *el_create(int *err);
void el_destroy(el_loop *loop);

/// Adds or changes (EPOLL_CTL_ADD vs MOD decided by what the loop knows) the
/// interest set of fd. interest may be 0 to keep the fd registered but quiet.
int el_watch(el_loop *loop, int fd, uint32_t interest, uint64_t token);
/// Removes fd from the loop. Call before close().
int el_unwatch(el_loop *loop, int fd);

/// Arms a one-shot timer on the monotonic clock. Returns a non-zero id, or 0
/// when the timer table cannot grow.
uint64_t el_timer_start(el_loop *loop, uint64_t delay_ms, uint64_t token);
/// Cancels a timer that has not fired. Unknown or fired ids are ignored.
void el_timer_cancel(el_loop *loop, uint64_t id);

/// Wakes el_poll() from any thread. Async-signal-safe.
int el_wake(el_loop *loop);

/// Waits for events, at most max_wait_ms (-1: until something happens),
/// and fills up to cap events. Returns the count or a negative errno.
int el_poll(el_loop *loop, el_event *out, int cap, int max_wait_ms);

/// Milliseconds on CLOCK_MONOTONIC.
uint64_t el_now_ms(void);
/* Monotonic microseconds (request latencies). */
uint64_t el_now_us(void);
/* A loop's own clock, under its timers and its connections' deadlines:
   the process's, plus what a test moved this loop on by (on its thread). */
uint64_t el_loop_now_ms(const el_loop *l);
void el_loop_clock_advance(el_loop *l, int64_t ms);
/* When the loop's last poll returned, in monotonic microseconds: the
   arrival time of what that wake brought, without a clock read each. */
uint64_t el_wake_us(const el_loop *l);
/// Seconds since the epoch (CLOCK_REALTIME), for Date headers.
int64_t el_wall_seconds(void);
/* Wall-clock milliseconds since the epoch (the test offset included). */
int64_t el_wall_ms(void);
/* Moves every clock above on by ms (tests only: LARDER_TEST_CLOCK). */
void el_clock_advance(int64_t ms);

/* Whether the calling thread is handling an event loop's events now
   (set by the Swift loop around each batch): work that may block checks
   it in debug builds. A thread-local, so each worker has its own. */
void el_set_on_loop(int on);
int el_on_loop(void);

/// Blocks the given signals in the calling thread (threads created later
/// inherit the mask) and returns a nonblocking signalfd delivering them.
int el_signalfd_open(const int *signals, int count);
/// Reads one signal from a signalfd: its number, or -EAGAIN when none.
int el_signalfd_read(int fd);
/// Ignores SIGPIPE process-wide: a client that hangs up must not kill us.
void el_ignore_sigpipe(void);
/// Names the calling thread (Linux keeps 15 bytes), for ps, top -H and gdb.
void el_name_thread(const char *name);
/// Raises the soft limit on open files to the hard limit (a proxy holds two
/// descriptors per proxied request). Returns the new soft limit.
long el_raise_nofile_limit(void);

struct addrinfo;
/// The addresses to bind for host:port (passive, numeric port) of `socktype`;
/// 0, or -errno (-EADDRNOTAVAIL when the name does not resolve).
int el_passive_addresses(const char *host, uint16_t port, int socktype, struct addrinfo **res);

/// A nonblocking, close-on-exec TCP listener on host:port (numeric IPv4 or
/// IPv6 literal, or a name). reuse_port sets SO_REUSEPORT so that each worker
/// can have its own. The bound port is written to *bound_port.
int el_listen_tcp(const char *host, uint16_t port, int backlog, int reuse_port,
                  uint16_t *bound_port);
/// accept4 (nonblocking, close-on-exec, TCP_NODELAY). The peer's numeric
/// address is written to addr (NUL-terminated). -EAGAIN when none is pending.
int el_accept(int listen_fd, char *addr, size_t addr_cap);

ssize_t el_read(int fd, void *buf, size_t len);
/// pread(2) that never waits for the disk (preadv2 with RWF_NOWAIT): -EAGAIN
/// when the bytes are not in the page cache (or fewer bytes than asked, those
/// that are), -errno on other errors. Where the kernel or the file system
/// cannot tell, -EAGAIN too (never a read that may wait).
ssize_t el_pread_nowait(int fd, void *buf, size_t len, int64_t offset);
/* Whether bytes [offset, offset + len) of fd are all in the page cache:
   1 yes, 0 no (a read may wait for the disk), -1 cannot tell. cachestat
   (Linux 6.5) counts the pages; before it, the first and last bytes are
   probed with RWF_NOWAIT. */
int el_range_cached(int fd, int64_t offset, size_t len);
/// sendfile(2): up to count bytes of in_fd from offset to out_fd.
ssize_t el_sendfile(int out_fd, int in_fd, int64_t offset, size_t count);
/// open(path, O_RDONLY | O_CLOEXEC).
int el_open_read(const char *path);
ssize_t el_writev(int fd, const struct iovec *iov, int count);
int el_close(int fd);

/* A word other threads read while one writes it (a stored response's
   flags, read by workers' copies without the tier's lock). */
static inline uintptr_t el_load_word(const void *word) {
    return __atomic_load_n((const uintptr_t *)word, __ATOMIC_ACQUIRE);
}
static inline void el_store_word(void *word, uintptr_t value) {
    __atomic_store_n((uintptr_t *)word, value, __ATOMIC_RELEASE);
}
/* Sets or clears bits of such a word as one step, so that a bit set by a
   thread without the tier's lock is never lost to one changed under it. */
static inline void el_or_word(void *word, uintptr_t bits) {
    __atomic_fetch_or((uintptr_t *)word, bits, __ATOMIC_ACQ_REL);
}
static inline void el_and_word(void *word, uintptr_t bits) {
    __atomic_fetch_and((uintptr_t *)word, bits, __ATOMIC_ACQ_REL);
}
/* Sequentially consistent: a reader announcing itself and then checking
   for a writer, and a writer announcing itself and then checking for
   readers, never both miss each other (Dekker). */
static inline void el_store_word_seq(void *word, uintptr_t value) {
    __atomic_store_n((uintptr_t *)word, value, __ATOMIC_SEQ_CST);
}
static inline uintptr_t el_load_word_seq(const void *word) {
    return __atomic_load_n((const uintptr_t *)word, __ATOMIC_SEQ_CST);
}

#include "el_udp.h"
#endif
