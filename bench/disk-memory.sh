#!/bin/sh
# Memory per entry of the disk tier's index: Larder started on a cache
# directory of ENTRIES stored responses (copies of one real file under new
# keys, as bench/startup.sh makes them) against the same start on an empty
# one; resident memory once the start-up rebuild has indexed every file,
# divided by the entries. BASELINE=path/to/larder measures another build
# the same way, interleaved, for a before and after.
#
#   bench/disk-memory.sh [entries] [runs]
#
# Not a test: nothing here asserts a figure.
ENTRIES=${1:-100000}
RUNS=${2:-3}
ORIGIN=none
. "$(dirname "$0")/common.sh"

mkdir -p "$WORK/www" "$WORK/empty"
head -c 512 /dev/urandom > "$WORK/www/obj"
start_static_origin "location /s/ { add_header Cache-Control \"max-age=3600\"; try_files /obj =404; }"
start_larder --memory-limit 64MiB --cache-dir "$WORK/cache" --admin-listen none --log-level error
curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/s/known-key-00000"
kill "$LARDER_PID"; wait "$LARDER_PID" 2> /dev/null || true
seed=$(find "$WORK/cache" -name '*.lrd' | head -1)
[ -n "$seed" ] || { echo "Larder stored nothing" >&2; exit 1; }
python3 bench/startup.py clone "$seed" "$WORK/cache" "$ENTRIES"

# Resident bytes of a Larder on DIR once its disk tier is ready (bounded wait).
resident() {
    binary=$1 dir=$2
    admin=$(free_port)
    "$binary" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ORIGIN_PORT" --workers 2 --memory-limit 64MiB \
        --cache-dir "$dir" --admin-listen "127.0.0.1:$admin" --log-level error > /dev/null 2> "$WORK/larder.err" &
    pid=$!
    i=0
    while [ $i -lt 600 ]; do
        ready=$(curl -s "http://127.0.0.1:$admin/stats" | python3 -c \
            'import json,sys; t=json.load(sys.stdin)["disk"]; print(t["index_complete"], t["objects"])' 2> /dev/null || true)
        case $ready in True*) break ;; esac
        if ! kill -0 "$pid" 2> /dev/null; then
            wait "$pid"; status=$?
            echo "$binary stopped (exit status $status):" >&2; cat "$WORK/larder.err" >&2; exit 1
        fi
        sleep 0.1; i=$((i+1))
    done
    rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$pid/status")
    kill "$pid"; wait "$pid" 2> /dev/null
    echo "$rss ${ready#* }"
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores; $ENTRIES entries; medians of $RUNS starts"
for build in "$LARDER" ${BASELINE:-}; do : > "$WORK/per-entry.$(echo "$build" | md5sum | cut -c1-8)"; done
r=0
while [ $r -lt "$RUNS" ]; do
    for build in "$LARDER" ${BASELINE:-}; do
        set -- $(resident "$build" "$WORK/empty"); empty=$1
        set -- $(resident "$build" "$WORK/cache"); full=$1 objects=$2
        echo "$(( (full - empty) / objects ))" >> "$WORK/per-entry.$(echo "$build" | md5sum | cut -c1-8)"
    done
    r=$((r + 1))
done
for build in "$LARDER" ${BASELINE:-}; do
    per=$(sort -n "$WORK/per-entry.$(echo "$build" | md5sum | cut -c1-8)" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')
    echo "$build: $per bytes of resident memory per entry on disk (index, kept sub-directories)"
done
