"""RFC 6455 frames echoed, for origin.py's WebSocket answer (standard library only).

Text and binary frames come back as they were sent, a ping gets its pong,
a close its close (and the loop ends); client frames are unmasked.
"""


def echo(rfile, wfile):
    while True:
        head = rfile.read(2)
        if len(head) < 2:
            return
        opcode, length = head[0] & 0x0F, head[1] & 0x7F
        if length == 126:
            length = int.from_bytes(rfile.read(2), "big")
        elif length == 127:
            length = int.from_bytes(rfile.read(8), "big")
        mask = rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(rfile.read(length)))
        reply = {1: 1, 2: 2, 9: 10, 8: 8}.get(opcode)
        if reply is None:
            continue
        size = len(data)
        frame = bytes([0x80 | reply]) + (bytes([size]) if size < 126 else
                                         bytes([126]) + size.to_bytes(2, "big") if size < 65536 else
                                         bytes([127]) + size.to_bytes(8, "big"))
        wfile.write(frame + data)
        wfile.flush()
        if opcode == 8:
            return
