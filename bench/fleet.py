#!/usr/bin/env python3
"""The fleet's targets, measured (issue 19). Not a test: nothing asserts.

    bench/fleet.py [purges] [requests]        (WORKERS=n: workers per node, default 1)

Starts a redis-server, the test origin (Tests/EndToEndTests/origin.py) and
three release-built Larder nodes in one fleet, all on loopback, then:

1. purge propagation: `purges` (default 1,000) URL purges sent one after
   another to node a's admin API; each answer comes once every live node
   applied the purge (or after 500 ms), so its latency bounds the time to
   reach every node. Prints p50/p99/max and how many were acknowledged by
   all three nodes.
2. a fleet hit against a miss, with a 1 ms origin: `requests` (default
   500) URLs fetched once on node a (misses, stored in Redis), then the
   same URLs on node b (fleet hits) and new URLs on node b (misses).
   Prints median latency of each and the upstream requests each made.
3. a local hit with and without [fleet]: wrk (when installed) on one hot
   URL of node a and of a node without [fleet], interleaved three times.
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PURGES = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
REQUESTS = int(sys.argv[2]) if len(sys.argv) > 2 else 500
WORKERS = os.environ.get("WORKERS", "1")
children = []
work = tempfile.mkdtemp(prefix="larder-fleet-bench-")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, **kw):
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    children.append(p)
    return p


def wait_for(check, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if check():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    return False


def get(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, dict(r.headers), r.read()


def main():
    subprocess.run(["swift", "build", "-c", "release", "--product", "larder"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    larder = os.path.join(ROOT, ".build", "release", "larder")
    redis_port = free_port()
    start(["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no", "--dir", work])
    wait_for(lambda: socket.create_connection(("127.0.0.1", redis_port)).close() is None)
    origin = start([sys.executable, os.path.join(ROOT, "Tests/EndToEndTests/origin.py"), "0"])
    origin_port = int(origin.stdout.readline().split()[1])
    upstream = f"http://127.0.0.1:{origin_port}"

    def node(name, fleet=True):
        port, admin = free_port(), free_port()
        config = os.path.join(work, f"{name}.toml")
        with open(config, "w") as f:
            if fleet:
                f.write(f'[fleet]\nredis = "redis://127.0.0.1:{redis_port}"\nname = "bench"\nnode = "{name}"\n')
        start([larder, "serve", "--config", config, "--upstream", upstream, "--listen", f"127.0.0.1:{port}",
               "--admin-listen", f"127.0.0.1:{admin}", "--workers", WORKERS, "--log-level", "warning"])
        stats = lambda: json.loads(get(f"http://127.0.0.1:{admin}/stats")[2])
        wait_for(lambda: (not fleet and stats()) or (stats()["fleet"] or {}).get("connected"))
        return f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}", stats

    a, a_admin, a_stats = node("a")
    b, _, b_stats = node("b")
    node("c")
    alone, _, _ = node("alone", fleet=False)

    # 1. purge propagation
    latencies, all_acked = [], 0
    for i in range(PURGES):
        t = time.perf_counter()
        _, _, body = get(f"{a_admin}/purge?url=%2Fpurged%2F{i}", method="POST")
        latencies.append((time.perf_counter() - t) * 1000)
        fleet = json.loads(body).get("fleet") or {}
        all_acked += fleet.get("acknowledged") == 3
    latencies.sort()
    print(f"purge propagation over {PURGES} purges, 3 nodes: p50 {statistics.median(latencies):.2f} ms, "
          f"p99 {latencies[int(len(latencies) * 0.99) - 1]:.2f} ms, max {latencies[-1]:.2f} ms; "
          f"acknowledged by all three: {all_acked}/{PURGES}")

    # 2. fleet hit vs miss with a 1 ms origin
    def timed(url):
        t = time.perf_counter()
        _, headers, _ = get(url)
        return (time.perf_counter() - t) * 1000, headers.get("Cache-Status", "")

    count = lambda path: int(get(f"{upstream}/__count?key={urllib.request.quote(path, safe='')}")[2])
    paths = [f"/f/{i}?delay=0.001&size=1024" for i in range(REQUESTS)]
    for p in paths:
        get(a + p)
    wait_for(lambda: a_stats()["fleet"]["shared_stores"] >= REQUESTS)
    fleet_hits = [timed(b + p) for p in paths]
    misses = [timed(b + p.replace("/f/", "/m/")) for p in paths]
    upstream_hits = sum(count(p) for p in paths) - REQUESTS
    upstream_misses = sum(count(p.replace("/f/", "/m/")) for p in paths)
    print(f"fleet hit on b: median {statistics.median(t for t, _ in fleet_hits):.3f} ms "
          f"({sum('detail=fleet' in s for _, s in fleet_hits)}/{REQUESTS} said detail=fleet), upstream requests {upstream_hits}; "
          f"miss on b: median {statistics.median(t for t, _ in misses):.3f} ms, upstream requests {upstream_misses}")

    # 3. local hits with and without [fleet]
    wrk = shutil.which("wrk")
    if not wrk:
        print("local hit with/without [fleet]: wrk not installed, skipped")
        return
    rates = {"fleet": [], "alone": []}
    for _ in range(3):
        for label, base in (("fleet", a), ("alone", alone)):
            get(base + "/hot")
            out = subprocess.run([wrk, "-t1", "-c16", "-d3s", base + "/hot"], capture_output=True, text=True).stdout
            rate = next(float(l.split()[1]) for l in out.splitlines() if l.startswith("Requests/sec"))
            rates[label].append(rate)
    f, s = statistics.median(rates["fleet"]), statistics.median(rates["alone"])
    print(f"local hot hit, {WORKERS} worker(s) per node: with [fleet] {f:.0f} req/s, without {s:.0f} req/s, ratio {f / s:.3f}")


try:
    main()
finally:
    for p in children:
        p.send_signal(signal.SIGTERM)
    for p in children:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
    shutil.rmtree(work, ignore_errors=True)
