// UDP for QUIC listeners (see el_udp.h).
#define _GNU_SOURCE
#include "el_udp.h"
#include "el.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

int el_udp_bind(const char *host, uint16_t port, int reuse_port, uint16_t *bound_port) {
    struct addrinfo *res = NULL;
    int resolved = el_passive_addresses(host, port, SOCK_DGRAM, &res);
    if (resolved != 0) return resolved;
    int result = -EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) { result = -errno; continue; }
        int one = 1;
        if (reuse_port && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) {
            result = -errno; close(fd); continue;
        }
        // Bursts of Initials and of a connection's packets: room for them.
        int buffer = 4 << 20;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) { result = -errno; close(fd); continue; }
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            *bound_port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                                   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
        result = fd;
        break;
    }
    freeaddrinfo(res);
    return result;
}

int el_udp_local(int fd, el_udp_peer *local) {
    local->len = sizeof(local->addr);
    return getsockname(fd, (struct sockaddr *)&local->addr, &local->len) == 0 ? 0 : -errno;
}

enum { EL_UDP_BATCH = 64 };

int el_udp_recv_batch(int fd, uint8_t *buf, size_t size, int count, size_t *lens, el_udp_peer *peers) {
    struct mmsghdr msgs[EL_UDP_BATCH];
    struct iovec iov[EL_UDP_BATCH];
    if (count > EL_UDP_BATCH) count = EL_UDP_BATCH;
    memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)count);
    for (int i = 0; i < count; i++) {
        iov[i].iov_base = buf + (size_t)i * size;
        iov[i].iov_len = size;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &peers[i].addr;
        msgs[i].msg_hdr.msg_namelen = sizeof(peers[i].addr);
    }
    int n;
    do { n = recvmmsg(fd, msgs, (unsigned)count, MSG_DONTWAIT, NULL); } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    for (int i = 0; i < n; i++) {
        lens[i] = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? size + 1 : msgs[i].msg_len;
        peers[i].len = msgs[i].msg_hdr.msg_namelen;
    }
    return n;
}

int el_udp_send_batch(int fd, uint8_t *const *bufs, const size_t *lens, const el_udp_peer *peers, int count) {
    struct mmsghdr msgs[EL_UDP_BATCH];
    struct iovec iov[EL_UDP_BATCH];
    int sent = 0;
    while (sent < count) {
        int batch = count - sent > EL_UDP_BATCH ? EL_UDP_BATCH : count - sent;
        memset(msgs, 0, sizeof(struct mmsghdr) * (size_t)batch);
        for (int i = 0; i < batch; i++) {
            iov[i].iov_base = bufs[sent + i];
            iov[i].iov_len = lens[sent + i];
            msgs[i].msg_hdr.msg_iov = &iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_name = (void *)&peers[sent + i].addr;
            msgs[i].msg_hdr.msg_namelen = peers[sent + i].len;
        }
        int n;
        do { n = sendmmsg(fd, msgs, (unsigned)batch, MSG_DONTWAIT); } while (n < 0 && errno == EINTR);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return sent;
            // A datagram the kernel refuses (a peer unreachable) is dropped:
            // QUIC recovers what was lost.
            if (errno == ECONNREFUSED || errno == EHOSTUNREACH || errno == ENETUNREACH || errno == EMSGSIZE) { sent++; continue; }
            return sent > 0 ? sent : -errno;
        }
        sent += n;
        if (n < batch) return sent;
    }
    return sent;
}

int el_udp_send_segments(int fd, const uint8_t *buf, size_t len, size_t segment, const el_udp_peer *peer) {
    struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
    char control[CMSG_SPACE(sizeof(uint16_t))];
    memset(control, 0, sizeof(control));
    struct msghdr msg = { .msg_name = (void *)&peer->addr, .msg_namelen = peer->len, .msg_iov = &iov, .msg_iovlen = 1,
                          .msg_control = control, .msg_controllen = sizeof(control) };
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_UDP;
    cm->cmsg_type = UDP_SEGMENT;
    cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
    uint16_t size = (uint16_t)segment;
    memcpy(CMSG_DATA(cm), &size, sizeof(size));
    ssize_t n;
    do { n = sendmsg(fd, &msg, MSG_DONTWAIT); } while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    return 1;
}

void el_udp_peer_text(const el_udp_peer *peer, char *out, size_t cap) {
    if (cap == 0) return;
    out[0] = 0;
    if (peer->addr.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&peer->addr;
        inet_ntop(AF_INET6, &a->sin6_addr, out, (socklen_t)cap);
    } else if (peer->addr.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&peer->addr;
        inet_ntop(AF_INET, &a->sin_addr, out, (socklen_t)cap);
    }
}
