#!/usr/bin/env python3
"""Keep-alive load for bench/instructions.sh's post-query and query-method
workloads (wrk's request parser knows no QUERY method):

    query-load.py METHOD URL SECONDS [CONNECTIONS]

Each connection sends METHOD with one JSON GraphQL query body, reads the
answer, and again, until SECONDS pass. Prints wrk's "N requests in" line."""
import socket
import sys
import threading
import time
from urllib.parse import urlsplit

method, url, seconds = sys.argv[1], urlsplit(sys.argv[2]), float(sys.argv[3])
connections = int(sys.argv[4]) if len(sys.argv) > 4 else 8
body = b'{"query":"{ user(id: 1) { name } }"}'
request = (b"%s %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
           % (method.encode(), (url.path or "/").encode(), url.netloc.encode(), len(body))) + body
counts = [0] * connections


def run(i, deadline):
    sock = socket.create_connection((url.hostname, url.port))
    buffer = b""
    while time.time() < deadline:
        sock.sendall(request)
        while b"\r\n\r\n" not in buffer:
            buffer += sock.recv(65536)
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))
        while len(buffer) < length:
            buffer += sock.recv(65536)
        buffer = buffer[length:]
        counts[i] += 1
    sock.close()


deadline = time.time() + seconds
threads = [threading.Thread(target=run, args=(i, deadline)) for i in range(connections)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("%d requests in %.2fs" % (sum(counts), seconds))
