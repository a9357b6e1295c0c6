#!/bin/sh
# Store lookups from 1 and 2 threads, in-process (no sockets, no wrk):
# one hot key, 10,000 keys, and one hot key under a configured route. Each
# thread looks up through its own LocalHits, as a worker does. Prints
# nanoseconds per lookup at 1 and at 2 threads and their ratio: a ratio
# near 1 means a second thread costs the first nothing (nothing shared is
# written on a hit). On this 2-core machine nothing else should run.
#
#   bench/store-threads.sh [lookups_per_thread]
set -eu
cd "$(dirname "$0")/.."
swift build -c release --product store-bench >&2
.build/release/store-bench "${1:-2000000}"
