#!/usr/bin/env python3
"""Soak driver for bench/soak.sh (standard library only).

Mixed traffic against a running Larder for a bounded time: hits, misses,
Vary variants, purges through the admin API, slow readers and clients that
hang up mid-response. Every complete body is checked against the origin's
deterministic body for that URL (fetched directly, once). Prints one line
of counters every `interval` seconds and "wrong bodies: N" at the end;
exits 1 if any body was wrong.

    soak.py LARDER_PORT ADMIN_PORT ORIGIN_PORT SECONDS [THREADS]
"""
import http.client
import random
import socket
import sys
import threading
import time

larder, admin, origin, seconds = (int(a) for a in sys.argv[1:5])
threads = int(sys.argv[5]) if len(sys.argv) > 5 else 16
deadline = time.time() + seconds
lock = threading.Lock()
counts = {"requests": 0, "wrong": 0, "errors": 0, "purges": 0, "hangups": 0, "slow": 0}
expected = {}


def direct(path):
    with lock:
        if path in expected:
            return expected[path]
    c = http.client.HTTPConnection("127.0.0.1", origin, timeout=30)
    c.request("GET", path)
    body = c.getresponse().read()
    c.close()
    with lock:
        expected[path] = body
    return body


def bump(key, n=1):
    with lock:
        counts[key] += n


def path_for(rng):
    kind = rng.random()
    if kind < 0.6:   # hot set: mostly hits
        return "/hot/%d?size=%d" % (rng.randrange(200), rng.choice([100, 2000, 20000]))
    if kind < 0.8:   # misses: fresh URLs with a short life
        return "/miss/%d?size=%d&cc=max-age%%3D2" % (rng.randrange(1_000_000), rng.choice([50, 5000]))
    return "/big/%d?size=%d" % (rng.randrange(20), rng.choice([300_000, 1_500_000]))


def worker(seed):
    rng = random.Random(seed)
    conn = None
    while time.time() < deadline:
        path = path_for(rng)
        action = rng.random()
        try:
            if action < 0.02:
                c = http.client.HTTPConnection("127.0.0.1", admin, timeout=30)
                target = rng.choice(["/purge?prefix=/hot/1", "/purge?url=" + path.replace("/", "%2F").replace("?", "%3F")
                                     .replace("&", "%26").replace("=", "%3D"), "/purge?prefix=/miss/&soft=true"])
                c.request("POST", target)
                c.getresponse().read()
                c.close()
                bump("purges")
                continue
            if action < 0.05:
                # Hang up mid-response.
                s = socket.create_connection(("127.0.0.1", larder), timeout=10)
                s.sendall(("GET %s HTTP/1.1\r\nHost: soak\r\n\r\n" % path).encode())
                s.recv(1000)
                s.close()
                bump("hangups")
                continue
            if action < 0.07:
                # A slow reader of a large body.
                s = socket.create_connection(("127.0.0.1", larder), timeout=30)
                s.sendall(b"GET /big/slow?size=1500000 HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
                data = b""
                while True:
                    chunk = s.recv(8192)
                    if not chunk:
                        break
                    data += chunk
                    time.sleep(0.001)
                s.close()
                body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
                if body != direct("/big/slow?size=1500000"):
                    bump("wrong")
                bump("slow")
                continue
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", larder, timeout=30)
            headers = {"Accept-Language": rng.choice(["en", "fr"])} if rng.random() < 0.1 else {}
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            body = response.read()
            bump("requests")
            if response.status != 200 or body != direct(path):
                bump("wrong")
                print("wrong body for %s: status %d, %d bytes" % (path, response.status, len(body)), file=sys.stderr)
        except Exception as error:  # noqa: BLE001 - counted, the soak goes on
            bump("errors")
            if conn is not None:
                conn.close()
            conn = None


pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
for t in pool:
    t.start()
for t in pool:
    t.join(timeout=seconds + 120)
print("requests %(requests)d, purges %(purges)d, hang-ups %(hangups)d, slow readers %(slow)d, errors %(errors)d" % counts)
print("wrong bodies: %d" % counts["wrong"])
sys.exit(1 if counts["wrong"] else 0)
