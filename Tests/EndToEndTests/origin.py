#!/usr/bin/env python3
"""A small origin server for Larder's end-to-end tests (standard library only).

It shares no code with Larder. It prints "PORT <n>" on stdout once it
listens on 127.0.0.1 (port 0 = ephemeral). Every request except /__* is
counted by its path-and-query, so tests can check how many reached it.

Query parameters on any path:
  cc=...        Cache-Control value (default: max-age=60; "none" for no header)
  etag=X        ETag "X"; a matching If-None-Match gets 304 (with X-Validated: n)
  etag_then=Y   ETag "Y" from the second request on (a changed representation)
  body_then=1   with etag_then: the body changes with the ETag too
  lm=N          Last-Modified N seconds before the server started; a later
                If-Modified-Since gets 304
  fail_after=N  after N requests to this path, answer 500
  tcc=..., cdn=...  Larder-Cache-Control / CDN-Cache-Control values
  cookie=1      add Set-Cookie
  extra=N:v;... add arbitrary response fields (%XX is byte XX: any byte)
  raw=TEXT      answer with exactly these bytes (%XX-encoded), nothing else
  bighead=N     add a response field X-Big of N bytes
  size=N        body size in bytes (default 32); the body is a deterministic
                pattern derived from the path
  chunked=1     send the body with Transfer-Encoding: chunked (in pieces)
  type=T        Content-Type: T (default: none)
  vary=Name     add "Vary: Name"; the body then includes that header's value
  delay=S       sleep S seconds (float) before answering
  hold_after=N  after N requests to this path, each one waits (at most 30 s)
                until /__release?key=PATH is asked, then answers as usual;
                never released, it is an origin that accepts and hangs
  interim=C,... send these 1xx responses first (103 carries Link and
                X-Interim fields, 102 none)
  status=N      status code (default 200); reason=TEXT its reason phrase
  tags=a b      add Surrogate-Key (and the same as Cache-Tag)
  skey=a b      add only Surrogate-Key; ctag=a,b only Cache-Tag
  hop=1         add hop-by-hop fields (Connection: X-Hop-Secret, Keep-Alive, ...)
  reset=N       the first N requests to this path get the connection closed
                without any response
  gzip=1        gzip the body when the request's Accept-Encoding names gzip
                (with Vary: Accept-Encoding); gzip=always whatever it says
  gzip_corrupt=1  with gzip: one byte in the middle of the gzip data flipped
  coding=zstd|br  the body in that coding whatever Accept-Encoding says (no Vary;
                coding_if_asked=1: only when it names the coding); coding_stream=1:
                a zstd frame without its size; coding_corrupt=1: one byte in
                the middle flipped
  fill=zero     the body is zero bytes (compresses a thousandfold)
  drop_after=N  after N requests to this path, every one gets the connection
                closed without any response (an origin gone away)
  cl_self=1     add Content-Location naming this very path and query
                (cl_self=abs: as an absolute URL with the request's Host)
  ranges=1      answer a Range header (bytes=a-b, a-, -n) with 206 and
                Content-Range, as static file servers do, or for several
                ranges with a multipart/byteranges 206 (not when an If-Range
                names another ETag: then the whole, 200)
  parts_reversed=1  with ranges=1: a multipart 206's parts in reverse order
  coalesce=1    with ranges=1: several ranges answered as one range from the
                first byte asked to the last (RFC 9110 section 14.2 allows it)
  ignore_if_range=1  with ranges=1: answer the range whatever If-Range names
  overrun_if_range=N, short_if_range=N  with ranges=1: a one-range 206 to a
                request with If-Range carries N bytes more (or fewer) than
                its Content-Range says, sent chunked (a lying upstream)
  cut=N         announce the whole body (Content-Length) but send only N
                bytes of it, then close the connection
  garbage=1     answer with bytes that are not HTTP, then close
  gate=1        with chunked=1: the first chunk, then the rest only once
                /__release?key=PATH is asked (30 s at most; "gate" in /__last
                says "released" or "timeout")
  trickle=S     send the body in 10 pieces, S seconds apart; a reader that
                goes away is recorded ("aborted" in /__last, else "done");
                "pieces" in /__last counts the pieces sent so far
Run as "origin.py PORT --tls CERT KEY" to serve https.
Special paths:
  /__count?key=PATH   how many requests PATH received (text)
  /__last?key=PATH    JSON of the last request's method, headers, body length,
                      and max_concurrent: the most requests for PATH answered at once
  /__held?key=PATH    how many requests for PATH are held now (hold_after)
  /__release?key=PATH lets every held request for PATH (and later ones) answer
  /echo               answers with the request body (any method, QUERY too;
                      type= sets its Content-Type)
A GET with "Upgrade: websocket" gets the RFC 6455 handshake (101) and its
frames echoed (text and binary; a ping gets its pong, a close its close);
refuse=N answers such a request N (no upgrade) instead.
"""
import base64
import gzip
import re
import hashlib
import json
import sys
import threading
import time
import websocket_echo  # (beside this file)
from email.utils import formatdate, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

START = int(time.time())
counts = {}
last = {}
inflight = {}
peak = {}
held = {}
released = {}
lock = threading.Lock()


def pattern(seed, size):
    block = hashlib.sha256(seed.encode()).hexdigest().encode()
    out = bytearray()
    i = 0
    while len(out) < size:
        out += block + str(i).encode() + b"\n"
        i += 1
    return bytes(out[:size])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: the head and the body are written separately; with Nagle
    # on, a second response on a kept-alive connection waited ~40 ms for
    # the client's delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                line = self.rfile.readline(1024).strip()
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline(8)
        length = int(self.headers.get("Content-Length", "0") or 0)
        return self.rfile.read(length) if length else b""

    def handle_any(self):
        url = urlsplit(self.path)
        # latin-1: a percent-encoded byte is that byte (extra=, raw= carry any)
        q = {k: v[0] for k, v in parse_qs(url.query, encoding="latin-1").items()}
        self.reason = q.get("reason")
        body_in = self.read_body() if self.command not in ("GET", "HEAD") or "Content-Length" in self.headers else b""
        if url.path == "/__count":
            with lock:
                n = counts.get(q.get("key", ""), 0)
            return self.send(200, str(n).encode(), {"Cache-Control": "no-store"})
        if url.path == "/__last":
            with lock:
                info = dict(last.get(q.get("key", ""), {}))
                info["max_concurrent"] = peak.get(q.get("key", ""), 0)
            return self.send(200, json.dumps(info).encode(), {"Cache-Control": "no-store"})
        if url.path == "/__held":
            with lock:
                n = held.get(q.get("key", ""), 0)
            return self.send(200, str(n).encode(), {"Cache-Control": "no-store"})
        if url.path == "/__release":
            with lock:
                release = released.setdefault(q.get("key", ""), threading.Event())
            release.set()
            return self.send(200, b"released\n", {"Cache-Control": "no-store"})
        with lock:
            counts[self.path] = counts.get(self.path, 0) + 1
            last[self.path] = {
                "method": self.command,
                "headers": [[k.lower(), v] for k, v in self.headers.items()],
                "body_length": len(body_in),
                "body_sha256": hashlib.sha256(body_in).hexdigest(),
                "peer_port": self.client_address[1],
            }
        if self.headers.get("Upgrade", "").lower() == "websocket":
            return self.websocket(q)
        if ("reset" in q and counts[self.path] <= int(q["reset"])) or \
                ("drop_after" in q and counts[self.path] > int(q["drop_after"])):
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if q.get("garbage") == "1":
            self.close_connection = True
            self.wfile.write(b"THIS IS NOT HTTP\r\n\x00\x01\x02\r\n\r\n")
            self.wfile.flush()
            return
        if "raw" in q:
            # The whole response, byte for byte as given (latin-1 text).
            self.wfile.write(q["raw"].encode("latin-1"))
            self.wfile.flush()
            if q.get("closeafter") == "1":
                self.close_connection = True
            return
        if "interim" in q:
            # Interim responses before the final one: "103" (with a Link
            # field, and X-Interim), "102", or both as "102,103".
            for code in q["interim"].split(","):
                text = "HTTP/1.1 %s %s\r\n" % (code, "Early Hints" if code == "103" else "Processing")
                if code == "103":
                    text += "Link: </style.css>; rel=preload; as=style\r\nX-Interim: yes\r\n"
                self.wfile.write((text + "\r\n").encode())
                self.wfile.flush()
                time.sleep(0.05)
        if "hold_after" in q and counts[self.path] > int(q["hold_after"]):
            with lock:
                release = released.setdefault(self.path, threading.Event())
                held[self.path] = held.get(self.path, 0) + 1
            release.wait(30)
            with lock:
                held[self.path] -= 1
        if "delay" in q:
            time.sleep(float(q["delay"]))
        status = int(q.get("status", "200"))
        if "fail_after" in q and counts[self.path] > int(q["fail_after"]):
            return self.send(500, b"origin failure\n", {"Cache-Control": "no-store"})
        headers = {}
        if q.get("cc", "") != "none":
            headers["Cache-Control"] = q.get("cc", "max-age=60")
        if "cc_then" in q and counts[self.path] > 1:
            # Cache-Control from the second request on.
            headers["Cache-Control"] = q["cc_then"]
        if "tcc" in q:
            headers["Larder-Cache-Control"] = q["tcc"]
        if "cdn" in q:
            headers["CDN-Cache-Control"] = q["cdn"]
        if "extra" in q:
            # extra=Name:value;Name2:value2 adds arbitrary response fields.
            for item in q["extra"].split(";"):
                name, _, value = item.partition(":")
                headers[name] = value
        if q.get("cookie") == "1":
            headers["Set-Cookie"] = "session=%d" % counts[self.path]
        if "cl_self" in q:
            absolute = "http://" + self.headers.get("Host", "") if q["cl_self"] == "abs" else ""
            headers["Content-Location"] = absolute + self.path
        if "etag" in q:
            headers["ETag"] = '"%s"' % q["etag"]
        if "etag_then" in q and counts[self.path] > 1:
            # Another representation from the second request on.
            headers["ETag"] = '"%s"' % q["etag_then"]
        if "lm" in q:
            headers["Last-Modified"] = formatdate(START - int(q["lm"]), usegmt=True)
        # (QUERY: safe, and validated as GET is; RFC 10008.)
        if self.command in ("GET", "HEAD", "QUERY") and self.not_modified(headers):
            headers["X-Validated"] = str(counts[self.path])
            return self.send(304, b"", headers)
        if url.path == "/echo":
            if "type" in q:
                headers["Content-Type"] = q["type"]
            return self.send(status, body_in, headers)
        seed = url.path
        if q.get("body_then") == "1" and "etag_then" in q and counts[self.path] > 1:
            seed += q["etag_then"]
        body = bytes(int(q.get("size", "32"))) if q.get("fill") == "zero" else pattern(seed, int(q.get("size", "32")))
        if "type" in q:
            headers["Content-Type"] = q["type"]
        if "vary" in q:
            headers["Vary"] = q["vary"]
            body = (q["vary"] + "=" + str(self.headers.get(q["vary"])) + "\n").encode() + body
        if "tags" in q:
            headers["Surrogate-Key"] = q["tags"]
            headers["Cache-Tag"] = q["tags"].replace(" ", ",")
        if "skey" in q:
            headers["Surrogate-Key"] = q["skey"]
        if "ctag" in q:
            headers["Cache-Tag"] = q["ctag"]
        if q.get("hop") == "1":
            # Hop-by-hop fields a proxy must not pass on.
            headers["Connection"] = "X-Hop-Secret"
            headers["X-Hop-Secret"] = "1"
            headers["Keep-Alive"] = "timeout=5"
            headers["Upgrade"] = "h2c"
        if "gzip" in q:
            if q["gzip"] != "always":
                headers["Vary"] = "Accept-Encoding"
            if q["gzip"] == "always" or "gzip" in self.headers.get("Accept-Encoding", ""):
                body = gzip.compress(body, mtime=0)
                headers["Content-Encoding"] = "gzip"
                if q.get("gzip_corrupt") == "1":
                    middle = len(body) // 2
                    body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1:]
        if "coding" in q and (q.get("coding_if_asked") != "1" or q["coding"] in self.headers.get("Accept-Encoding", "")):
            # zstd or br whatever Accept-Encoding says (Debian's python3-zstandard,
            # python3-brotli); coding_stream=1: a zstd frame that does not declare its size.
            if q["coding"] == "zstd":
                import zstandard
                if q.get("coding_stream") == "1":
                    packer = zstandard.ZstdCompressor().compressobj()
                    body = packer.compress(body) + packer.flush()
                else:
                    body = zstandard.ZstdCompressor(write_checksum=True).compress(body)
            else:
                import brotli
                body = brotli.compress(body)
            headers["Content-Encoding"] = q["coding"]
            if q.get("coding_corrupt") == "1":
                middle = len(body) // 2
                body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1:]
        if "range_error" in q and "," in self.headers.get("Range", ""):
            # An error to a request of several ranges only (a plain GET, or one range, is served).
            return self.send(int(q["range_error"]), b"no multiple ranges here\n", headers)
        if_range = self.headers.get("If-Range")
        if q.get("ranges") == "1" and status == 200 and "Range" in self.headers and \
                (if_range is None or if_range == headers.get("ETag") or q.get("ignore_if_range") == "1"):
            n = len(body)
            spans = []
            for spec in self.headers["Range"].strip()[len("bytes="):].split(","):
                m = re.fullmatch(r"(\d*)-(\d*)", spec.strip())
                if not self.headers["Range"].strip().startswith("bytes=") or not m or not (m.group(1) or m.group(2)):
                    spans = []
                    break
                if m.group(1):
                    lo = int(m.group(1))
                    hi = min(int(m.group(2)), n - 1) if m.group(2) else n - 1
                else:
                    lo, hi = max(0, n - int(m.group(2))), n - 1
                if lo < n and lo <= hi:
                    spans.append((lo, hi))
            if spans and q.get("coalesce") == "1":
                spans = [(min(lo for lo, _ in spans), max(hi for _, hi in spans))]
            if len(spans) == 1:
                lo, hi = spans[0]
                headers["Content-Range"] = "bytes %d-%d/%d" % (lo, hi, n)
                body, status = body[lo:hi + 1], 206
                if if_range is not None and "overrun_if_range" in q:
                    body, q["chunked"] = body + b"X" * int(q["overrun_if_range"]), "1"
                if if_range is not None and "short_if_range" in q:
                    body, q["chunked"] = body[:-int(q["short_if_range"])], "1"
            elif spans:
                # Several ranges: multipart/byteranges (RFC 9110 section 14.6).
                part_type = headers.pop("Content-Type", "application/octet-stream")
                # multipart_bad: truncate, boundary (another one declared), unit, length (another total).
                bad = q.get("multipart_bad", "")
                unit, total = (b"items" if bad == "unit" else b"bytes"), n + (1 if bad == "length" else 0)
                out = b"preamble to ignore\r\n"
                for lo, hi in (spans[::-1] if q.get("parts_reversed") == "1" else spans):
                    out += b"--SEP\r\nContent-Type: %s\r\nContent-Range: %s %d-%d/%d\r\n\r\n" % (
                        part_type.encode(), unit, lo, hi, total) + body[lo:hi + 1] + b"\r\n"
                headers["Content-Type"] = "multipart/byteranges; boundary=" + ("OTHER" if bad == "boundary" else "SEP")
                body, status = out + b"--SEP--\r\n", 206
                if bad == "truncate":
                    body, q["chunked"] = body[:len(body) // 2], "1"
        if "bighead" in q:
            headers["X-Big"] = "b" * int(q["bighead"])
        headers["X-Origin-Count"] = str(counts[self.path])
        self.trickle = float(q["trickle"]) if "trickle" in q else None
        self.gate = q.get("gate") == "1"
        if "cut" in q:
            self.close_connection = True
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[:int(q["cut"])])
            self.wfile.flush()
            return
        if q.get("closeafter") == "1":
            # Close once answered without saying so, as servers do with idle
            # keep-alive connections: the proxy's pooled connection dies.
            self.close_connection = True
        self.send(status, body, headers, chunked=q.get("chunked") == "1")

    def not_modified(self, headers):
        inm = self.headers.get("If-None-Match")
        if inm is not None:
            # Weak comparison, as RFC 9110 section 13.1.2 requires here.
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            return "ETag" in headers and (headers["ETag"].removeprefix("W/") in tags or "*" in tags)
        ims = self.headers.get("If-Modified-Since")
        if ims is not None and "Last-Modified" in headers:
            try:
                return parsedate_to_datetime(ims) >= parsedate_to_datetime(headers["Last-Modified"])
            except (TypeError, ValueError):
                return False
        return False

    def send(self, status, body, headers, chunked=False):
        self.send_response(status, getattr(self, "reason", None))
        for k, v in headers.items():
            self.send_header(k, v)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        elif status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command == "HEAD" or status == 304:
            return
        if getattr(self, "trickle", None) is not None and not chunked:
            step = max(1, len(body) // 10 + 1)

            def pieces():
                for i in range(0, len(body), step):
                    self.wfile.write(body[i:i + step])
                    self.wfile.flush()
                    with lock:
                        last[self.path]["pieces"] = last[self.path].get("pieces", 0) + 1
                    time.sleep(self.trickle)
            return self.written_or_aborted(pieces)
        if chunked:
            trickle = getattr(self, "trickle", None)
            step = max(1, len(body) // (7 if trickle is None else 10) + 1)

            def chunks():
                for i in range(0, len(body), step):
                    piece = body[i:i + step]
                    self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                    self.wfile.flush()
                    if self.gate and i == 0:
                        # The rest waits for /__release?key=PATH (30 s at most).
                        with lock:
                            release = released.setdefault(self.path, threading.Event())
                        opened = release.wait(30)
                        with lock:
                            last[self.path]["gate"] = "released" if opened else "timeout"
                    if trickle is not None:
                        time.sleep(trickle)
                self.wfile.write(b"0\r\n\r\n")
            self.written_or_aborted(chunks)
        else:
            self.wfile.write(body)

    def written_or_aborted(self, write):
        """Runs write(); notes "done", or "aborted" when the client went away."""
        try:
            write()
        except (BrokenPipeError, ConnectionResetError):
            with lock:
                last[self.path]["aborted"] = True
            self.close_connection = True
            return
        with lock:
            last[self.path]["done"] = True

    def websocket(self, q):
        if "refuse" in q:
            return self.send(int(q["refuse"]), b"no upgrade here\n", {"Cache-Control": "max-age=60"})
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                          "Sec-WebSocket-Accept: %s\r\nX-Origin-Count: %d\r\n\r\n" % (accept, counts[self.path])).encode())
        self.wfile.flush()
        self.close_connection = True
        websocket_echo.echo(self.rfile, self.wfile)

    def handle_counted(self):
        # How many requests for one path were being answered at once, at most.
        with lock:
            inflight[self.path] = inflight.get(self.path, 0) + 1
            peak[self.path] = max(peak.get(self.path, 0), inflight[self.path])
        try:
            self.handle_any()
        finally:
            with lock:
                inflight[self.path] -= 1

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_QUERY = handle_counted


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    if len(sys.argv) > 3 and sys.argv[2] == "--tls":
        # origin.py PORT --tls CERT KEY: serve https (HTTP/1.1 over TLS).
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[3], sys.argv[4])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
