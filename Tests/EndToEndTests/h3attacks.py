#!/usr/bin/env python3
"""Hostile QUIC datagrams for Larder's HTTP/3 tests (aioquic builds the real
Initials; the rest is raw UDP). No code shared with Larder.

    h3attacks.py PORT MODE [ARG...]

Modes (each prints its findings, then "RESULT ok"):
  amplification     one client Initial, never answered: prints "SENT <bytes>
                    RECEIVED <bytes>" after 3 s (the server's resends included)
  garbage N         N random datagrams, N Initials cut to 600 bytes, N short-header
                    packets for unknown connections: "REPLIES <random> <cut> <short>"
                    (datagrams that came back for each kind) and "BIGGEST <bytes>"
                    (the largest reply to a short-header packet, against its size)
  flood N           N client Initials, each from its own source port: "ANSWERED <n>"
                    (ports that got any reply within 2 s) and "RETRIES <n>" (replies
                    that were Retry packets)
  half N            N handshakes begun and left (the server's first flight read,
                    never acknowledged); prints "LEFT <n>"
  relay LOSS        a lossy path: a UDP relay to PORT that drops each datagram, either
                    way, with probability LOSS (0..1, a fixed seed); prints "PORT <n>" (where
                    clients send) and runs until killed (120 s at most); one client at a time
"""
import os
import socket
import ssl
import sys
import time

from aioquic.h3.connection import H3_ALPN
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


def first_flight():
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE, server_name="localhost")
    client = QuicConnection(configuration=config)
    client.connect(("127.0.0.1", 0), now=time.time())
    return b"".join(data for data, _ in client.datagrams_to_send(now=time.time()))


def drain(sock, seconds):
    sizes = []
    sock.settimeout(0.1)
    end = time.time() + seconds
    while time.time() < end:
        try:
            sizes.append(len(sock.recv(65536)))
        except socket.timeout:
            pass
    return sizes


def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    return s


def main(port, mode, args):
    server = ("127.0.0.1", port)
    if mode == "amplification":
        s = udp()
        initial = first_flight()
        s.sendto(initial, server)
        print("SENT %d RECEIVED %d" % (len(initial), sum(drain(s, 3.0))))
    elif mode == "garbage":
        n = int(args[0])
        replies = []
        biggest = 0
        for kind in ("random", "cut", "short"):
            s = udp()
            for _ in range(n):
                if kind == "random":
                    s.sendto(os.urandom(1 + os.urandom(1)[0] * 5), server)
                elif kind == "cut":
                    s.sendto(first_flight()[:600], server)
                else:
                    s.sendto(bytes([0x40 | (os.urandom(1)[0] & 0x3F)]) + os.urandom(60), server)
            got = drain(s, 1.0)
            replies.append(len(got))
            if kind == "short":
                biggest = max(got or [0])
        print("REPLIES %d %d %d" % tuple(replies))
        print("BIGGEST %d" % biggest)
    elif mode == "flood":
        sockets = [udp() for _ in range(int(args[0]))]
        for s in sockets:
            s.sendto(first_flight(), server)
        answered = retries = 0
        end = time.time() + 2.0
        for s in sockets:
            s.settimeout(max(0.01, end - time.time()))
            try:
                data = s.recv(65536)
            except socket.timeout:
                continue
            answered += 1
            # A long header whose type bits say Retry (RFC 9000 section 17.2.5).
            if data[0] & 0x80 and (data[0] & 0x30) == 0x30:
                retries += 1
        print("ANSWERED %d" % answered)
        print("RETRIES %d" % retries)
    elif mode == "half":
        left = 0
        for _ in range(int(args[0])):
            s = udp()
            s.sendto(first_flight(), server)
            if drain(s, 0.3):
                left += 1
        print("LEFT %d" % left)
    elif mode == "relay":
        relay(server, float(args[0]))
    print("RESULT ok")


def relay(server, loss):
    import random
    import select
    chance = random.Random(62)
    front, back = udp(), udp()
    print("PORT %d" % front.getsockname()[1], flush=True)
    client = None
    end = time.time() + 120
    while time.time() < end:
        ready, _, _ = select.select([front, back], [], [], 0.5)
        for sock in ready:
            data, source = sock.recvfrom(65536)
            if sock is front:
                client = source
            if chance.random() < loss:
                continue
            if sock is front:
                back.sendto(data, server)
            elif client is not None:
                front.sendto(data, client)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3:])
