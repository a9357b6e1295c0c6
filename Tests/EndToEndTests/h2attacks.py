#!/usr/bin/python3
"""More raw HTTP/2 attacks for Larder's end-to-end tests (issue 59), with
Debian's hyperframe and hpack (no code shared with Larder).

    h2attacks.py PORT MODE [ARG...]

It speaks h2c by prior knowledge to 127.0.0.1:PORT and prints one line per
finding, then "RESULT goaway=<code or none>".

Modes:
  over-limit PATH N      once the server's SETTINGS are acknowledged, N GETs
                         of PATH at once (they collapse onto one fetch); prints "ADVERTISED <max concurrent
                         streams>" and "STREAM <id> <status or RESET code>"
  trailers PATH N        a GET that puts a 4,000-byte field in the HPACK
                         table, then a POST whose trailers refer to it N
                         times (1 byte each, one frame: N < 16384), then a
                         plain GET;
                         "STREAM <id> <status or RESET code>"
  empty-data PATH       twice, on one connection, the second once the first
                         has ended: a GET as HEADERS without END_STREAM, then
                         an empty DATA frame with it;
                         "STREAM <id> <status> <cache-status>"
  small-window PATH W    a GET with a stream window of W bytes (W < 512),
                         reopened by what each DATA frame carried;
                         "STREAM 1 <status> <body bytes> <ended: 0|1>"
  lower-id PATH          a GET on stream 5, answered, then one on stream 3;
                         "STREAM <id> <status>" for those answered
  drain PATH N PID       N GETs of PATH, the window shut; once every head
                         has come, SIGTERM to PID, then reads every body to
                         its end (the window opened as it reads); "STREAM <id> <status>
                         <body bytes> <ended: 0|1>"
"""
import os
import signal
import socket
import sys
import time

import hpack
from hyperframe.frame import DataFrame, HeadersFrame, PingFrame, SettingsFrame, WindowUpdateFrame

from h2client import frames_in  # (beside this file)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def fields(path, method="GET"):
    return [(":method", method), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1")]


class Raw:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(10)
        self.buffer = bytearray()
        self.decoder = hpack.Decoder()
        self.goaway = None
        self.closed = False
        self.server_settings = {}

    def send(self, *frames):
        try:
            self.sock.sendall(b"".join(f.serialize() for f in frames))
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def frames(self, seconds=10):
        """Frames as they come, until the server closes or `seconds` pass."""
        deadline = time.time() + seconds
        while time.time() < deadline and not self.closed:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return
            except ConnectionResetError:
                data = b""
            if not data:
                self.closed = True
                return
            self.buffer += data
            for kind, flags, stream, payload in frames_in(self.buffer):
                if kind == 0x4 and not flags & 0x1:
                    for i in range(0, len(payload), 6):
                        self.server_settings[int.from_bytes(payload[i:i + 2], "big")] = int.from_bytes(payload[i + 2:i + 6], "big")
                    self.send(SettingsFrame(0, flags=["ACK"]))
                elif kind == 0x7:
                    self.goaway = int.from_bytes(payload[4:8], "big")
                elif kind == 0x1:
                    # Header blocks are decoded in order, to keep the table in step.
                    payload = payload[(1 + payload[0]) if flags & 0x8 else 0:]
                    payload = payload[5:] if flags & 0x20 else payload
                    decoded = self.decoder.decode(payload)
                    yield kind, flags, stream, {(k if isinstance(k, str) else k.decode()): v for k, v in decoded}
                    continue
                yield kind, flags, stream, payload

    def handshake(self, settings=None):
        """Preface and SETTINGS; returns once the server has our ACK of its SETTINGS (a PING after it came back)."""
        self.sock.sendall(PREFACE + SettingsFrame(0, settings=settings or {}).serialize())
        pinged = False
        for kind, flags, stream, payload in self.frames():
            if kind == 0x4 and not flags & 0x1 and not pinged:
                self.send(PingFrame(0, opaque_data=b"settled!"))
                pinged = True
            elif kind == 0x6 and flags & 0x1:
                return

    def result(self):
        print("RESULT goaway=%s" % ("none" if self.goaway is None else self.goaway), flush=True)


def answers(raw, wanted, seconds=20):
    """Stream id -> status or "RESET code", until `wanted` streams have one."""
    out = {}
    for kind, flags, stream, payload in raw.frames(seconds):
        if kind == 0x1:
            out.setdefault(stream, str(payload.get(":status", "")))
        elif kind == 0x3:
            out.setdefault(stream, "RESET %d" % int.from_bytes(payload[0:4], "big"))
        if len(out) >= wanted:
            break
    return out


def over_limit(port, path, n):
    raw = Raw(port)
    raw.handshake()
    print("ADVERTISED %s" % raw.server_settings.get(0x3), flush=True)
    encoder = hpack.Encoder()
    out = []
    for i in range(n):
        frame = HeadersFrame(1 + 2 * i, encoder.encode(fields(path)))
        frame.flags.add("END_HEADERS")
        frame.flags.add("END_STREAM")
        out.append(frame)
    raw.send(*out)
    for stream, answer in sorted(answers(raw, n).items()):
        print("STREAM %d %s" % (stream, answer), flush=True)
    raw.result()


def trailers(port, path, n):
    raw = Raw(port)
    raw.handshake()
    encoder = hpack.Encoder()
    big = ("x-bomb", "v" * 4000)
    plain = [hpack.NeverIndexedHeaderTuple(name, value) for name, value in fields(path)]
    first = HeadersFrame(1, encoder.encode(plain + [big]))
    first.flags.add("END_HEADERS")
    first.flags.add("END_STREAM")
    index = encoder.header_table.search(big[0].encode(), big[1].encode())[0]
    post = [hpack.NeverIndexedHeaderTuple(name, value) for name, value in fields(path + "&post=1", "POST")]
    head = HeadersFrame(3, encoder.encode(post))
    head.flags.add("END_HEADERS")
    body = DataFrame(3, b"0123456789")
    trailer = HeadersFrame(3, bytes([0x80 | index]) * n)
    trailer.flags.add("END_HEADERS")
    trailer.flags.add("END_STREAM")
    last = HeadersFrame(5, encoder.encode(plain))
    last.flags.add("END_HEADERS")
    last.flags.add("END_STREAM")
    raw.send(first)
    raw.send(head, body, trailer)
    raw.send(last)
    for stream, answer in sorted(answers(raw, 3).items()):
        print("STREAM %d %s" % (stream, answer), flush=True)
    raw.result()


def empty_data(port, path):
    raw = Raw(port)
    raw.handshake()
    encoder = hpack.Encoder()
    out = {}
    for sid in (1, 3):
        head = HeadersFrame(sid, encoder.encode(fields(path)))
        head.flags.add("END_HEADERS")
        end = DataFrame(sid, b"")
        end.flags.add("END_STREAM")
        raw.send(head, end)
        # The answer is read to its END_STREAM: asked again before that, the
        # second GET would join the first fetch (collapsed), not hit.
        for kind, flags, stream, payload in raw.frames(20):
            if kind == 0x1 and stream == sid:
                out[sid] = "%s %s" % (payload.get(":status", ""), payload.get("cache-status", ""))
            if kind == 0x3 and stream == sid:
                out[sid] = "RESET"
                break
            if kind in (0x0, 0x1) and stream == sid and flags & 0x1:
                break
    for sid in sorted(out):
        print("STREAM %d %s" % (sid, out[sid]), flush=True)
    raw.result()


def small_window(port, path, window):
    raw = Raw(port)
    raw.handshake({0x4: window})
    head = HeadersFrame(1, hpack.Encoder().encode(fields(path)))
    head.flags.add("END_HEADERS")
    head.flags.add("END_STREAM")
    raw.send(head)
    status, received, ended = None, 0, 0
    for kind, flags, stream, payload in raw.frames(15):
        if stream != 1:
            continue
        if kind == 0x1:
            status = payload.get(":status", "")
        elif kind == 0x0:
            received += len(payload)
            if payload:
                raw.send(WindowUpdateFrame(0, window_increment=len(payload)),
                         WindowUpdateFrame(1, window_increment=len(payload)))
        elif kind == 0x3:
            break
        if flags & 0x1 and kind in (0x0, 0x1):
            ended = 1
            break
    print("STREAM 1 %s %d %d" % (status, received, ended), flush=True)
    raw.result()


def lower_id(port, path):
    raw = Raw(port)
    raw.handshake()
    encoder = hpack.Encoder()
    for sid in (5, 3):
        head = HeadersFrame(sid, encoder.encode(fields(path)))
        head.flags.add("END_HEADERS")
        head.flags.add("END_STREAM")
        raw.send(head)
        for kind, flags, stream, payload in raw.frames(5):
            if kind == 0x1 and stream == sid:
                print("STREAM %d %s" % (sid, payload.get(":status", "")), flush=True)
            if (kind == 0x0 and stream == sid and flags & 0x1) or kind == 0x7:
                break
    raw.result()


def drain(port, path, n, pid):
    raw = Raw(port)
    raw.handshake()
    encoder = hpack.Encoder()
    streams = {}
    out = []
    for i in range(n):
        sid = 1 + 2 * i
        frame = HeadersFrame(sid, encoder.encode(fields("%s&n=%d" % (path, i))))
        frame.flags.add("END_HEADERS")
        frame.flags.add("END_STREAM")
        out.append(frame)
        streams[sid] = {"status": None, "bytes": 0, "ended": 0}
    raw.send(*out)
    signalled = False
    for kind, flags, stream, payload in raw.frames(30):
        s = streams.get(stream)
        if kind == 0x1 and s is not None:
            s["status"] = str(payload.get(":status", ""))
        elif kind == 0x0 and s is not None:
            s["bytes"] += len(payload)
            if payload and signalled:
                raw.send(WindowUpdateFrame(0, window_increment=len(payload)),
                         WindowUpdateFrame(stream, window_increment=len(payload)))
        elif kind == 0x3 and s is not None:
            s["ended"] = -1
        if s is not None and flags & 0x1 and kind in (0x0, 0x1):
            s["ended"] = 1
        if not signalled and all(s["status"] is not None for s in streams.values()):
            # The windows stay shut until after the signal: the rest of
            # each body waits in Larder while the upstream fetches end.
            os.kill(pid, signal.SIGTERM)
            signalled = True
            time.sleep(0.5)
            taken = sum(s["bytes"] for s in streams.values())
            raw.send(WindowUpdateFrame(0, window_increment=taken),
                     *[WindowUpdateFrame(sid, window_increment=s["bytes"]) for sid, s in streams.items() if s["bytes"]])
        if all(s["ended"] for s in streams.values()):
            break
    for sid, s in sorted(streams.items()):
        print("STREAM %d %s %d %d" % (sid, s["status"], s["bytes"], s["ended"]), flush=True)
    raw.result()


def main():
    port, mode, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if mode == "over-limit":
        over_limit(port, args[0], int(args[1]))
    elif mode == "trailers":
        trailers(port, args[0], int(args[1]))
    elif mode == "empty-data":
        empty_data(port, args[0])
    elif mode == "small-window":
        small_window(port, args[0], int(args[1]))
    elif mode == "lower-id":
        lower_id(port, args[0])
    elif mode == "drain":
        drain(port, args[0], int(args[1]), int(args[2]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
