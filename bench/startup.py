"""Helpers for bench/startup.sh (not a test).

  startup.py clone FILE DIR N   N copies of a Larder cache file (format v4)
                                under new keys of the same length, named and
                                summed as Larder names and sums them
  startup.py first PORT PATH -- COMMAND...
                                starts COMMAND, polls PORT with a raw socket
                                every millisecond until PATH answers, prints
                                the milliseconds from exec to the answer's
                                head and its cache verdict, stops COMMAND
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import time

MASK = (1 << 64) - 1
PRIME = 0x00000100000001B3


def name_hash(data):
    """Larder's NameHash (Sources/CacheStorage/Disk/FileName.swift)."""
    h = 0xCBF29CE484222325
    whole = len(data) - len(data) % 8
    for i in range(0, whole, 8):
        h = ((h ^ struct.unpack_from("<Q", data, i)[0]) * PRIME) & MASK
    for c in data[whole:]:
        h = ((h ^ c) * PRIME) & MASK
    return h


CRC_TABLE = []
for n in range(256):
    c = n
    for _ in range(8):
        c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    CRC_TABLE.append(c)


def crc_register(state, data):
    """CRC-32C's register fed `data` (no inversions)."""
    for b in data:
        state = (state >> 8) ^ CRC_TABLE[(state ^ b) & 0xFF]
    return state


class ChecksumWithSuffix:
    """Larder's record checksum (CRC-32C) of varying bytes followed by a
    fixed suffix, without feeding the suffix each time: the register is
    linear, so feeding the suffix is a 32x32 bit map plus a constant."""

    def __init__(self, suffix):
        self.constant = crc_register(0, suffix)
        zeros = bytes(len(suffix))
        self.columns = [crc_register(1 << bit, zeros) for bit in range(32)]

    def __call__(self, head):
        state = crc_register(0xFFFFFFFF, head)
        out = self.constant
        for bit in range(32):
            if state >> bit & 1:
                out ^= self.columns[bit]
        return out ^ 0xFFFFFFFF


def clone(source, directory, count):
    data = open(source, "rb").read()
    key_length = struct.unpack_from("<I", data, 32)[0]
    variant = os.path.basename(source).split("-", 1)[1]
    width = key_length - len("/s/")
    if width < 7:
        sys.exit("the seed key is too short to make distinct keys of its length")
    checksum = ChecksumWithSuffix(data[36 + key_length:])
    for i in range(count):
        key = ("/s/%0*d" % (width, i)).encode()
        record = bytearray(data)
        record[36:36 + key_length] = key
        struct.pack_into("<Q", record, 24, checksum(bytes(record[32:36 + key_length])))
        name = "%016x" % name_hash(key)
        sub = os.path.join(directory, name[:2])
        os.makedirs(sub, mode=0o700, exist_ok=True)
        with open(os.path.join(sub, name + "-" + variant), "wb") as f:
            f.write(record)


def first(port, path, command):
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    head = None
    try:
        while head is None and time.monotonic() - start < 10 and process.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                    s.sendall(f"GET {path} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
                    data = b""
                    while b"\r\n\r\n" not in data:
                        piece = s.recv(65536)
                        if not piece:
                            break
                        data += piece
                    head = data
            except OSError:
                time.sleep(0.001)
        elapsed = (time.monotonic() - start) * 1000
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait()
    if not head:
        sys.exit(f"no answer on port {port} within 10 s")
    verdict = [line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
               if line.lower().startswith((b"cache-status:", b"x-cache:"))]
    print(f"{elapsed:.1f} {verdict[0].replace(' ', '') if verdict else '-'}")


if __name__ == "__main__":
    if sys.argv[1] == "clone":
        clone(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "first" and sys.argv[4] == "--":
        first(int(sys.argv[2]), sys.argv[3], sys.argv[5:])
    else:
        sys.exit(__doc__)
