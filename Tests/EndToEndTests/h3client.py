#!/usr/bin/env python3
"""An HTTP/3 client for Larder's end-to-end tests (aioquic, from PyPI, in the
virtual environment `.ci/install-deps --test` makes; no code shared with
Larder).

    h3client.py PORT MODE [ARG...]

It speaks HTTP/3 over QUIC to 127.0.0.1:PORT (certificates not verified:
the tests' own), prints one line per finding, then "RESULT ok" or
"RESULT error <what>".

Modes:
  get PATH N [NAME=VALUE ...]   N concurrent GETs of PATH on one connection;
        prints "STREAM <id> <status> <body bytes> <sha256> <cache-status>"
  head PATH                     a HEAD; prints "STREAM ..." and "FIELD name value" for each field
  fields PATH                   a GET; prints "FIELD name value" for each response field
  post PATH SIZE                a POST of SIZE bytes (0x61...); prints "STREAM ..."
  query PATH SIZE N             N QUERYs of SIZE bytes (0x71..., text/plain) one after another
  sequence PATH N               N GETs one after another on one connection
  first PATH URL                a GET; at its first body bytes prints "FIRST <bytes>" and GETs URL
        (over HTTP/1.1: the origin's /__release), then "STREAM ..." at its end
  hold PATH                     one GET, then keeps the connection open until the server
        closes it (20 s at most); prints the GET's STREAM line, "CLOSED <error code>" and
        "GOAWAY <its payload in hex, or None>"
  stall PATH                    a GET whose answer never gets room (flow control held shut) on a
        connection kept alive; prints "RESET <code>" when the server resets the stream
  pause PATH                    a GET ("STREAM ...", "CERT <serial>"), then, once a line comes
        on stdin, another GET on the same connection
  retry PATH                    a GET; prints "RETRIED <0|1>": whether the server sent a Retry
  rapid-reset PATH N            up to N streams each reset as soon as opened; prints "CLOSED <error code>"
        once the server ends the connection (20 s at most)
  cert PATH                     a GET; prints "CERT <serial>" of the server's certificate
  limits PATH                   a GET; prints "MAXSTREAMS <n>" (bidirectional streams the
        server allows) and "QPACK <n>" (the dynamic table capacity its SETTINGS allow)
"""
import asyncio
import hashlib
import urllib.request
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamDataReceived, StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}
        self.closed = asyncio.get_event_loop().create_future()
        # aioquic drops GOAWAY unread: the server's control stream (its first
        # unidirectional one, id 3) is read here too, for "hold" to print it.
        self.goaway = None
        self.control = b""

    def request(self, method, path, fields=(), body=b""):
        sid = self._quic.get_next_available_stream_id()
        headers = [(b":method", method.encode()), (b":scheme", b"https"), (b":authority", b"127.0.0.1"),
                   (b":path", path.encode())] + [(n.encode(), v.encode()) for n, v in fields]
        if body:
            headers.append((b"content-length", str(len(body)).encode()))
        self.h3.send_headers(sid, headers, end_stream=not body)
        if body:
            self.h3.send_data(sid, body, end_stream=True)
        done = asyncio.get_event_loop().create_future()
        self.waiting[sid] = {"done": done, "headers": [], "body": bytearray()}
        self.transmit()
        return sid, done

    def note_control(self, data):
        self.control += data
        buf, frames = self.control, []

        def varint(at):
            length = 1 << (buf[at] >> 6)
            value = buf[at] & 0x3F
            for i in range(1, length):
                value = (value << 8) | buf[at + i]
            return value, at + length
        try:
            _, at = varint(0)  # the stream type (0: control)
            while at < len(buf):
                kind, at = varint(at)
                size, at = varint(at)
                if at + size > len(buf):
                    break
                if kind == 0x7:
                    self.goaway = buf[at:at + size].hex()
                at += size
        except IndexError:
            pass

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived) and event.stream_id == 3:
            self.note_control(event.data)
        if isinstance(event, StreamReset) and getattr(self, "stalled", None) and not self.stalled.done():
            self.stalled.set_result(event.error_code)
        if isinstance(event, ConnectionTerminated):
            if not self.closed.done():
                self.closed.set_result(event.error_code)
            for state in self.waiting.values():
                if not state["done"].done():
                    state["done"].set_exception(ConnectionError("connection closed: %s" % event.error_code))
        for h3event in self.h3.handle_event(event):
            state = self.waiting.get(getattr(h3event, "stream_id", None))
            if state is None:
                continue
            if isinstance(h3event, HeadersReceived):
                state["headers"] += [(n.decode(), v.decode()) for n, v in h3event.headers]
            elif isinstance(h3event, DataReceived):
                state["body"] += h3event.data
                if h3event.data and state.pop("on_first", None):
                    print("FIRST %d" % len(state["body"]), flush=True)
                    urllib.request.urlopen(state["release"], timeout=10).read()
            if getattr(h3event, "stream_ended", False) and not state["done"].done():
                state["done"].set_result(state)


def line(sid, state):
    fields = dict(state["headers"])
    body = bytes(state["body"])
    return "STREAM %d %s %d %s %s" % (sid, fields.get(":status", "?"), len(body), hashlib.sha256(body).hexdigest(),
                                       fields.get("cache-status", "-").replace(" ", ""))


async def main(port, mode, args):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE,
                               server_name="localhost", max_stream_data=1 << 20, max_data=16 << 20)
    async with connect("127.0.0.1", port, configuration=config, create_protocol=Client) as client:
        if mode == "get":
            path, n = args[0], int(args[1])
            fields = [a.split("=", 1) for a in args[2:]]
            pending = [client.request("GET", path, fields) for _ in range(n)]
            for sid, done in pending:
                print(line(sid, await asyncio.wait_for(done, 30)))
        elif mode in ("head", "fields"):
            if mode == "head":
                # aioquic holds a HEAD answer's Content-Length against its (empty) body: RFC 9110 section 8.6 says not to.
                client.h3._check_content_length = lambda stream: None
            sid, done = client.request("HEAD" if mode == "head" else "GET", args[0])
            state = await asyncio.wait_for(done, 30)
            print(line(sid, state))
            for name, value in state["headers"]:
                print("FIELD %s %s" % (name, value))
        elif mode == "post":
            sid, done = client.request("POST", args[0], [("content-type", "application/octet-stream")],
                                       b"a" * int(args[1]))
            print(line(sid, await asyncio.wait_for(done, 30)))
        elif mode == "query":
            for _ in range(int(args[2])):
                sid, done = client.request("QUERY", args[0], [("content-type", "text/plain")], b"q" * int(args[1]))
                print(line(sid, await asyncio.wait_for(done, 30)))
        elif mode == "first":
            sid, done = client.request("GET", args[0])
            client.waiting[sid].update(on_first=True, release=args[1])
            print(line(sid, await asyncio.wait_for(done, 60)))
        elif mode == "sequence":
            for _ in range(int(args[1])):
                sid, done = client.request("GET", args[0])
                print(line(sid, await asyncio.wait_for(done, 30)))
        elif mode == "hold":
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)), flush=True)
            print("CLOSED %s" % await asyncio.wait_for(client.closed, 20))
            print("GOAWAY %s" % client.goaway)
        elif mode == "pause":
            # A GET, then (after a line on stdin) another on the same connection.
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)))
            print("CERT %x" % client._quic.tls._peer_certificate.serial_number, flush=True)
            await asyncio.get_event_loop().run_in_executor(None, sys.stdin.readline)
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)))
        elif mode == "cert":
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)))
            print("CERT %x" % client._quic.tls._peer_certificate.serial_number)
        elif mode == "limits":
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)))
            print("MAXSTREAMS %d" % client._quic._remote_max_streams_bidi)
            settings = client.h3.received_settings or {}
            print("QPACK %d" % settings.get(0x1, 0))
        elif mode == "rapid-reset":
            # Streams opened and reset at once (as HTTP/2's CVE-2023-44487), until the server closes.
            for _ in range(int(args[1])):
                sid = client._quic.get_next_available_stream_id()
                client.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"127.0.0.1"),
                                             (b":path", args[0].encode())], end_stream=False)
                if sid % 8 == 0:
                    client.transmit()  # (every other one reset before its head left: both kinds count)
                client._quic.reset_stream(sid, 0x10C)
                client.transmit()
                if client.closed.done():
                    break
                await asyncio.sleep(0.001)
            print("CLOSED %s" % await asyncio.wait_for(client.closed, 20))
        elif mode == "stall":
            # A GET whose answer the client never makes room for (no MAX_DATA or MAX_STREAM_DATA
            # sent), the connection kept alive by PINGs; waits (30 s at most) for the server to reset it.
            client._quic._write_connection_limits = lambda *a, **k: None
            client._quic._write_stream_limits = lambda *a, **k: None
            sid, done = client.request("GET", args[0])
            client.stalled = asyncio.get_event_loop().create_future()
            for n in range(150):
                if client.stalled.done():
                    break
                client._quic.send_ping(n)
                client.transmit()
                await asyncio.sleep(0.2)
            print("RESET %s" % (client.stalled.result() if client.stalled.done() else "none"))
        elif mode == "retry":
            sid, done = client.request("GET", args[0])
            print(line(sid, await asyncio.wait_for(done, 30)))
            print("RETRIED %d" % (1 if client._quic._retry_source_connection_id is not None else 0))
    print("RESULT ok")


if __name__ == "__main__":
    try:
        asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3:]))
    except Exception as e:  # noqa: BLE001 - the test reads what went wrong
        print("RESULT error %s: %s" % (type(e).__name__, e))
        sys.exit(1)
