#!/bin/sh
# Resident memory while large responses go to the disk tier (issue 59's
# leak: every stored body stayed in the disk writer's queue). Larder with
# --memory-limit LIMIT and a cache directory takes ENTRIES misses of
# distinct SIZE-byte objects (as many at once as CONCURRENCY) from an nginx
# origin; anonymous RSS (RssAnon) is printed after each tenth of them, and
# the last figure against the limit. BASELINE=path/to/larder measures
# another build the same way, after this one.
#
#   bench/disk-store-memory.sh [entries] [size-bytes]
#
# Not a test: nothing here asserts a figure.
ENTRIES=${1:-1000}
SIZE=${2:-4194304}
LIMIT=${LIMIT:-256MiB}
CONCURRENCY=${CONCURRENCY:-4}
ORIGIN=none
. "$(dirname "$0")/common.sh"

mkdir -p "$WORK/www"
head -c "$SIZE" /dev/urandom > "$WORK/www/obj"
start_static_origin "location /big/ { add_header Cache-Control \"max-age=3600\"; try_files /obj =404; }"

anon() { awk '/RssAnon/ {print int($2 / 1024)}' "/proc/$1/status"; }

measure() {
    binary=$1
    rm -rf "$WORK/cache"
    tag=$(echo "$binary" | md5sum | cut -c1-8)
    saved=$LARDER; LARDER=$binary
    start_larder --memory-limit "$LIMIT" --cache-dir "$WORK/cache" --admin-listen none --log-level error
    echo "$binary: memory_limit $LIMIT, $ENTRIES misses of $SIZE bytes, $CONCURRENCY at once"
    step=$((ENTRIES / 10)); [ "$step" -gt 0 ] || step=1
    done_=0
    while [ "$done_" -lt "$ENTRIES" ]; do
        n=$step; [ $((done_ + n)) -le "$ENTRIES" ] || n=$((ENTRIES - done_))
        seq "$done_" $((done_ + n - 1)) | xargs -P "$CONCURRENCY" -I{} \
            curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/big/$tag-{}"
        done_=$((done_ + n))
        echo "  after $done_ misses: RssAnon $(anon "$LARDER_PID") MiB"
    done
    echo "  on disk: $(du -sm "$WORK/cache" | cut -f1) MiB; RssAnon $(anon "$LARDER_PID") MiB against memory_limit $LIMIT"
    kill "$LARDER_PID"; wait "$LARDER_PID" 2> /dev/null || true
    LARDER=$saved
}

echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, workers ${WORKERS:-2}"
measure "$LARDER"
[ -z "${BASELINE:-}" ] || measure "$BASELINE"
