#!/usr/bin/python3
"""A raw HTTP/2 client for Larder's end-to-end tests (Debian's python3-h2,
hyperframe and hpack; no code shared with Larder).

    h2client.py PORT MODE [ARG...]

It speaks h2c by prior knowledge to 127.0.0.1:PORT and prints one line per
finding, then "RESULT ..." with what the connection came to:
goaway=<error code or none> closed=<0|1>.

Modes:
  get PATH N [NAME=VALUE ...]  N concurrent GETs of PATH on one connection (with these fields); prints
                         "STREAM <id> <status> <body bytes> <cache-status>"
  first PATH URL         a GET; at its first DATA prints "FIRST <bytes>" and GETs URL (the
                         origin's /__release), then "STREAM ..." at its end
  settings               prints the server's SETTINGS ("SETTING name value")
  bigheader PATH SIZE    a GET with a field of SIZE bytes; prints its status
  idle PATH              one GET, then nothing: waits (20 s at most) for the
                         server to end the connection; prints "IDLE CLOSED"
  uploads PATH SIZE      on one connection, one after another: a POST of SIZE
                         bytes announced by content-length, the same without
                         one, then a POST of 10 bytes; "STREAM ..." for each
  hpack-bomb PATH N      a GET that puts a 4,000-byte field in the HPACK
                         table, one that refers to it N times (1 byte each),
                         then a plain GET; "STREAM <id> <status or RESET code>"
  rapid-reset N          opens N streams, resetting each at once (CVE-2023-44487)
  made-you-reset N       N streams each broken by the client so that the
                         server must reset it (CVE-2025-8671)
  continuation N         a HEADERS frame without END_HEADERS, then N
                         CONTINUATION frames that never end it
  ping-flood N           N PINGs, reading nothing back
  settings-flood N       N SETTINGS frames, reading nothing back
  window-trickle PATH    a window of 1 byte, opened one byte at a time
  zero-window PATH       a window of 0 held for ever; waits for the server
"""
import socket
import sys
import time
import urllib.request

import h2.config
import h2.connection
import h2.events
import h2.settings
import hpack
from hyperframe.frame import ContinuationFrame, HeadersFrame, PingFrame, SettingsFrame, WindowUpdateFrame, RstStreamFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port))
    sock.settimeout(10)
    return sock


def request_headers(path, extra=()):
    return [(":method", "GET"), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1")] + list(extra)


def drain(sock, conn=None, seconds=10):
    """Reads until the server closes or `seconds` pass: (goaway code, closed)."""
    goaway, deadline = None, time.time() + seconds
    raw = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True)) if conn is None else conn
    if conn is None:
        raw.initiate_connection()
        raw.data_to_send()
    while time.time() < deadline:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return goaway, False
        except ConnectionResetError:
            return goaway, True
        if not data:
            return goaway, True
        # Frames by hand: the client's own state machine may object to what it provoked.
        goaway = scan_goaway(data) if goaway is None else goaway
    return goaway, False


def scan_goaway(data):
    i = 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i:i + 3], "big")
        kind = data[i + 3]
        if kind == 0x7 and i + 9 + 8 <= len(data):
            return int.from_bytes(data[i + 13:i + 17], "big")
        i += 9 + length
    return None


def result(goaway, closed):
    print("RESULT goaway=%s closed=%d" % ("none" if goaway is None else goaway, 1 if closed else 0), flush=True)


def client(sock, settings=None, validate=True):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                                                validate_outbound_headers=validate))
    conn.initiate_connection()
    if settings:
        conn.update_settings(settings)
    sock.sendall(conn.data_to_send())
    return conn


def get(port, path, n, extra=()):
    sock = connect(port)
    conn = client(sock, validate=not extra)  # extra fields may be what a server must refuse
    streams = {}
    for _ in range(n):
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, request_headers(path, extra), end_stream=True)
        streams[sid] = {"status": None, "bytes": 0, "cache": "", "done": False}
    sock.sendall(conn.data_to_send())
    while not all(s["done"] for s in streams.values()):
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                fields = dict(event.headers)
                streams[event.stream_id]["status"] = fields.get(":status")
                streams[event.stream_id]["cache"] = fields.get("cache-status", "")
            elif isinstance(event, h2.events.DataReceived):
                streams[event.stream_id]["bytes"] += len(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                streams[event.stream_id]["done"] = True
        sock.sendall(conn.data_to_send())
    for sid, s in sorted(streams.items()):
        print("STREAM %d %s %d %s" % (sid, s["status"], s["bytes"], s["cache"]), flush=True)
    result(None, False)


def first(port, path, release):
    """A GET; at its first DATA, "FIRST <bytes>" and a GET of `release` (the
    origin's /__release over HTTP/1.1); at its end "STREAM <id> <status> <bytes> <cache-status>"."""
    sock = connect(port)
    conn = client(sock)
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, request_headers(path), end_stream=True)
    sock.sendall(conn.data_to_send())
    status, received, cache, done, told = None, 0, "", False, False
    while not done:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                fields = dict(event.headers)
                status, cache = fields.get(":status"), fields.get("cache-status", "")
            elif isinstance(event, h2.events.DataReceived):
                received += len(event.data)
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if event.data and not told:
                    told = True
                    print("FIRST %d" % received, flush=True)
                    urllib.request.urlopen(release, timeout=10).read()
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        sock.sendall(conn.data_to_send())
    print("STREAM %d %s %d %s" % (sid, status, received, cache), flush=True)
    result(None, False)


def settings(port):
    sock = connect(port)
    conn = client(sock)
    while True:
        data = sock.recv(65536)
        events = conn.receive_data(data)
        for event in events:
            if isinstance(event, h2.events.RemoteSettingsChanged):
                for key, change in event.changed_settings.items():
                    print("SETTING %s %d" % (h2.settings.SettingCodes(key).name, change.new_value), flush=True)
                result(None, False)
                return


def bigheader(port, path, size):
    sock = connect(port)
    conn = client(sock)
    conn.send_headers(1, request_headers(path, [("x-big", "v" * size)]), end_stream=True)
    sock.sendall(conn.data_to_send())
    while True:
        data = sock.recv(65536)
        if not data:
            return result(None, True)
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.ResponseReceived):
                print("STATUS %s" % dict(event.headers)[":status"], flush=True)
                return result(None, False)
            if isinstance(event, h2.events.StreamReset):
                print("RESET %d" % event.error_code, flush=True)
                return result(None, False)
        sock.sendall(conn.data_to_send())


def uploads(port, path, size):
    sock = connect(port)
    conn = client(sock)
    for sid, length, announced in ((1, size, True), (3, size, False), (5, 10, True)):
        fields = [(":method", "POST"), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1")]
        if announced:
            fields.append(("content-length", str(length)))
        conn.send_headers(sid, fields)
        sent, status, received, done = 0, None, 0, False
        while not done:
            # As much of the body as the window allows, until the stream ends.
            while sent < length:
                try:
                    room = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, length - sent)
                except Exception:
                    break  # the stream is closed: stop sending
                if room <= 0:
                    break
                conn.send_data(sid, b"a" * room, end_stream=sent + room == length)
                sent += room
            sock.sendall(conn.data_to_send())
            data = sock.recv(65536)
            if not data:
                print("STREAM %d closed" % sid, flush=True)
                return result(None, True)
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived) and event.stream_id == sid:
                    status = dict(event.headers)[":status"]
                elif isinstance(event, h2.events.DataReceived):
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                    if event.stream_id == sid:
                        received += len(event.data)
                elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and event.stream_id == sid:
                    done = True
            sock.sendall(conn.data_to_send())
        print("STREAM %d %s %d" % (sid, status, received), flush=True)
    result(None, False)


def hpack_bomb(port, path, n):
    sock = connect(port)
    raw_start(sock)
    encoder = hpack.Encoder()
    big = ("x-bomb", "v" * 4000)

    def send(sid, block):
        frame = HeadersFrame(sid, block)
        frame.flags.add("END_HEADERS")
        frame.flags.add("END_STREAM")
        sock.sendall(frame.serialize())

    # The request's own fields never enter the table: it holds x-bomb alone.
    plain = [hpack.NeverIndexedHeaderTuple(name, value) for name, value in request_headers(path)]
    send(1, encoder.encode(plain + [big]))
    index = encoder.header_table.search(big[0].encode(), big[1].encode())[0]
    assert index < 127
    send(3, encoder.encode(plain) + bytes([0x80 | index]) * n)
    send(5, encoder.encode(plain))
    buffer, answers, deadline = bytearray(), {}, time.time() + 20
    decoder = hpack.Decoder()
    while len(answers) < 3 and time.time() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        buffer += data
        for kind, flags, stream, payload in frames_in(buffer):
            if kind == 0x1:
                answers.setdefault(stream, dict(decoder.decode(payload)).get(":status"))
            elif kind == 0x3:
                answers.setdefault(stream, "RESET %d" % int.from_bytes(payload[0:4], "big"))
            elif kind == 0x4 and not flags & 0x1:
                sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
    for stream in sorted(answers):
        print("STREAM %d %s" % (stream, answers[stream]), flush=True)
    result(None, False)


def idle(port, path):
    sock = connect(port)
    conn = client(sock)
    conn.send_headers(1, request_headers(path), end_stream=True)
    sock.sendall(conn.data_to_send())
    sock.settimeout(20)
    goaway = None
    while True:
        try:
            data = sock.recv(65536)
        except socket.timeout:
            return result(goaway, False)
        except ConnectionResetError:
            data = b""
        if not data:
            print("IDLE CLOSED", flush=True)
            return result(goaway, True)
        goaway = scan_goaway(data) if goaway is None else goaway


def raw_start(sock):
    sock.sendall(PREFACE + SettingsFrame(0).serialize())


def open_streams(port, n, path, after):
    """Opens N streams with a GET of PATH, each followed by after(stream)."""
    sock = connect(port)
    raw_start(sock)
    block = hpack.Encoder().encode(request_headers(path))
    out = bytearray()
    try:
        for i in range(n):
            sid = 1 + 2 * i
            frame = HeadersFrame(sid, block)
            frame.flags.add("END_HEADERS")
            frame.flags.add("END_STREAM")
            out += frame.serialize() + after(sid).serialize()
            if len(out) > 16384:
                sock.sendall(out)
                out = bytearray()
        sock.sendall(out)
    except (BrokenPipeError, ConnectionResetError):
        return result(None, True)
    result(*drain(sock))


def rapid_reset(port, n):
    # Each stream is reset by the client as soon as it is opened.
    open_streams(port, n, "/rapid-reset", lambda sid: RstStreamFrame(sid, error_code=8))


def made_you_reset(port, n):
    # Each stream is sent a WINDOW_UPDATE with a zero increment: an error
    # the server must answer by resetting it.
    open_streams(port, n, "/made-you-reset?delay=5", lambda sid: WindowUpdateFrame(sid, window_increment=0))


def continuation(port, n):
    sock = connect(port)
    raw_start(sock)
    encoder = hpack.Encoder()
    block = encoder.encode(request_headers("/continuation"))
    try:
        sock.sendall(HeadersFrame(1, block).serialize())  # no END_HEADERS
        filler = encoder.encode([("x-filler", "f" * 100)])
        for _ in range(n):
            sock.sendall(ContinuationFrame(1, filler).serialize())
    except (BrokenPipeError, ConnectionResetError):
        return result(None, True)
    result(*drain(sock))


def flood(port, n, frame):
    sock = connect(port)
    raw_start(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    payload = frame.serialize() * 1000
    try:
        for _ in range(n // 1000):
            sock.sendall(payload)
    except (BrokenPipeError, ConnectionResetError):
        return result(None, True)
    result(*drain(sock))


def frames_in(buffer):
    """Complete frames at the front of `buffer`: (type, flags, stream, payload) each, and what is left."""
    out = []
    while len(buffer) >= 9:
        length = int.from_bytes(buffer[0:3], "big")
        if len(buffer) < 9 + length:
            break
        out.append((buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF, bytes(buffer[9:9 + length])))
        del buffer[:9 + length]
    return out


def window(port, path, trickle):
    """Frames are read by hand: the client's own flow control would object
    to the windows opened behind its back."""
    sock = connect(port)
    raw_start(sock)
    # SETTINGS_INITIAL_WINDOW_SIZE 1 (trickle) or 0, and the request.
    sock.sendall(SettingsFrame(0, settings={0x4: 1 if trickle else 0}).serialize())
    frame = HeadersFrame(1, hpack.Encoder().encode(request_headers(path)))
    frame.flags.add("END_HEADERS")
    frame.flags.add("END_STREAM")
    sock.sendall(frame.serialize())
    sock.settimeout(0.2)
    buffer, received, frames, start = bytearray(), 0, 0, time.time()

    def body():
        print("BODY %d frames=%d" % (received, frames), flush=True)

    while time.time() - start < 30:
        try:
            data = sock.recv(65536)
            if not data:
                body()
                return result(None, True)
            buffer += data
        except socket.timeout:
            pass
        except ConnectionResetError:
            body()
            return result(None, True)
        for kind, flags, stream, payload in frames_in(buffer):
            if kind == 0x0:
                received += len(payload)
                frames += 1
            elif kind == 0x3:
                print("RESET %d" % int.from_bytes(payload[0:4], "big"), flush=True)
                body()
                return result(None, False)
            elif kind == 0x7:
                body()
                return result(int.from_bytes(payload[4:8], "big"), True)
            elif kind == 0x4 and not flags & 0x1:
                sock.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
        if trickle:
            try:
                for _ in range(50):  # one byte at a time, stream and connection
                    sock.sendall(WindowUpdateFrame(1, window_increment=1).serialize()
                                 + WindowUpdateFrame(0, window_increment=1).serialize())
            except (BrokenPipeError, ConnectionResetError):
                body()
                return result(None, True)
    body()
    result(None, False)


def main():
    port, mode, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    if mode == "get":
        get(port, args[0], int(args[1]), [tuple(a.split("=", 1)) for a in args[2:]])
    elif mode == "first":
        first(port, sys.argv[3], sys.argv[4])
    elif mode == "settings":
        settings(port)
    elif mode == "bigheader":
        bigheader(port, args[0], int(args[1]))
    elif mode == "idle":
        idle(port, args[0])
    elif mode == "uploads":
        uploads(port, args[0], int(args[1]))
    elif mode == "hpack-bomb":
        hpack_bomb(port, args[0], int(args[1]))
    elif mode == "rapid-reset":
        rapid_reset(port, int(args[0]))
    elif mode == "made-you-reset":
        made_you_reset(port, int(args[0]))
    elif mode == "continuation":
        continuation(port, int(args[0]))
    elif mode == "ping-flood":
        flood(port, int(args[0]), PingFrame(0, opaque_data=b"12345678"))
    elif mode == "settings-flood":
        flood(port, int(args[0]), SettingsFrame(0, settings={0x3: 100}))
    elif mode == "window-trickle":
        window(port, args[0], True)
    elif mode == "zero-window":
        window(port, args[0], False)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
