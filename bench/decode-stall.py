#!/usr/bin/python3
"""What clients that do not take gzip cost a worker when a stored gzip body
inflates a thousandfold (issue 42, item 3): one worker, a 62 KiB stored
body that decodes to 63 MiB.

  bench/decode-stall.py [path/to/larder]   (default .build/release/larder)

1. 40 clients ask for it without Accept-Encoding and close at once; right
   after, a small hit on the same worker is timed (it waited 4.7-6.7 s when
   every request decoded the whole body first).
2. 30 clients ask for it and do not read; the daemon's resident memory
   grows by (2 GB when each held a whole decoded copy).
3. One client reads it whole: the time it takes (the price of decoding).
4. Small hits' p99 (wrk, 8 connections, 5 s, medians of 3) alone, then while another
   client pulls the decode again and again on the same worker (issue 43's
   target: at most 2x).

Not a test: nothing here asserts a figure. Timings on a shared VM move
from run to run; compare builds in the same run.
"""
import os
import re
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LARDER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build/release/larder")
SIZE = 63 << 20
BOMB = "/bomb?gzip=1&fill=zero&size=%d" % SIZE


def request(port, target, headers="", read=True, rcvbuf=None):
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(60)
    s.connect(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n" % (target, headers)).encode())
    if not read:
        return s
    data = b""
    while b"\r\n\r\n" not in data:
        data += s.recv(65536)
    head, body = data.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
    while len(body) < length:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        body += chunk
    s.close()
    return head, len(body)


# Pulls the decoded body again and again, reading as fast as it can.
PULLER = """
import socket, sys
port, target = int(sys.argv[1]), sys.argv[2]
while True:
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(("GET %s HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nConnection: close\\r\\n\\r\\n" % target).encode())
    while s.recv(1 << 20):
        pass
    s.close()
"""


def p99(port, seconds=5):
    """Small hits' p99 in ms: wrk, 1 thread, 8 connections."""
    out = subprocess.run(["wrk", "-t1", "-c8", "-d%ds" % seconds, "--latency", "http://127.0.0.1:%d/small?size=1024" % port],
                         capture_output=True, text=True, check=True).stdout
    value = re.search(r"^\s*99%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    number, unit = float(value.group(1)), value.group(2)
    return number / 1000 if unit == "us" else number * 1000 if unit == "s" else number


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) * 1024


def main():
    if not os.path.exists(LARDER):
        subprocess.run(["swift", "build", "-c", "release", "--static-swift-stdlib", "--product", "larder"], cwd=ROOT,
                       check=True)
    origin = subprocess.Popen(["/usr/bin/python3", os.path.join(ROOT, "Tests/EndToEndTests/origin.py"), "0"],
                              stdout=subprocess.PIPE)
    origin_port = int(origin.stdout.readline().split()[1])
    larder = subprocess.Popen([LARDER, "serve", "--listen", "127.0.0.1:0", "--upstream", "http://127.0.0.1:%d" % origin_port,
                               "--workers", "1", "--admin-listen", "none", "--log-level", "error"],
                              stderr=subprocess.PIPE)
    try:
        line = larder.stderr.readline().decode()
        port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", line).group(1))
        request(port, BOMB, "Accept-Encoding: gzip\r\n")
        request(port, "/small?size=1024")
        for _ in range(3):
            request(port, "/small?size=1024")

        for _ in range(40):
            request(port, BOMB, read=False).close()
        start = time.monotonic()
        request(port, "/small?size=1024")
        print("small hit right after 40 decoding clients that left: %.1f ms" % ((time.monotonic() - start) * 1000))

        before = rss(larder.pid)
        held = [request(port, BOMB, read=False, rcvbuf=4096) for _ in range(30)]
        for s in held:
            s.settimeout(60)
            s.recv(512)  # the head: each one is under way
        time.sleep(1)
        print("30 decoding clients that do not read: resident memory +%d MiB" % ((rss(larder.pid) - before) >> 20))
        for s in held:
            s.close()

        start = time.monotonic()
        _, n = request(port, BOMB)
        seconds = time.monotonic() - start
        print("one client reading it whole: %d MiB in %.2f s (%.0f MiB/s decoded)" % (n >> 20, seconds, (n >> 20) / seconds))

        p99(port, seconds=2)  # warm up
        alone, busy = [], []
        for _ in range(3):  # interleaved: the VM's noise falls on both
            alone.append(p99(port))
            puller = subprocess.Popen(["/usr/bin/python3", "-c", PULLER, str(port), BOMB])
            try:
                time.sleep(0.5)
                busy.append(p99(port))
            finally:
                puller.terminate()
                puller.wait(10)
        a, b = sorted(alone)[1], sorted(busy)[1]
        print("small hits' p99 (medians of 3): %.2f ms alone, %.2f ms while a client pulls the decode (%.1fx)" % (a, b, b / a))
    finally:
        larder.terminate()
        origin.terminate()
        larder.wait(10)
        origin.wait(10)


if __name__ == "__main__":
    main()
