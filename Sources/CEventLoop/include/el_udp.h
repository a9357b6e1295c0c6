// UDP for QUIC listeners: a bound socket, datagrams in and out in batches
// (recvmmsg, sendmmsg), and one send of many same-sized datagrams to one
// peer (UDP GSO) where the kernel has it.
#ifndef EL_UDP_H
#define EL_UDP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/// Where a datagram came from or goes to.
typedef struct {
    struct sockaddr_storage addr;
    socklen_t len;
} el_udp_peer;

/// A nonblocking UDP socket bound to host:port (SO_REUSEPORT when asked),
/// or -errno. `bound_port` gets the port bound (useful with 0).
int el_udp_bind(const char *host, uint16_t port, int reuse_port, uint16_t *bound_port);

/// The socket's own address (for QUIC's paths).
int el_udp_local(int fd, el_udp_peer *local);

/// Receives up to `count` datagrams, the i-th into buf + i * size (a longer
/// one is cut, and its length says so: larger than size); their lengths
/// and senders. Returns how many arrived (0: none waiting), or -errno.
int el_udp_recv_batch(int fd, uint8_t *buf, size_t size, int count, size_t *lens, el_udp_peer *peers);

/// Sends `count` datagrams (bufs[i], lens[i]) to peers[i]. Returns how many
/// left (fewer when the socket's buffer is full), or -errno.
int el_udp_send_batch(int fd, uint8_t *const *bufs, const size_t *lens, const el_udp_peer *peers, int count);

/// Sends `len` bytes to `peer` as datagrams of `segment` bytes (the last
/// may be shorter) in one call: UDP_SEGMENT. Returns 1 when sent, 0 when
/// the socket's buffer is full, or -errno (-EIO, -EINVAL: no GSO here).
int el_udp_send_segments(int fd, const uint8_t *buf, size_t len, size_t segment, const el_udp_peer *peer);

/// A peer's address as text ("1.2.3.4" or "::1"), into out.
void el_udp_peer_text(const el_udp_peer *peer, char *out, size_t cap);

#endif
