#!/bin/sh
# Memory per stored response: fills Larder's memory tier with ENTRIES small
# responses (a 16-byte body each, every request a new URL) and reports the
# process's resident memory per entry beyond the bytes stored (status line,
# header fields and body as served), and RSS against --memory-limit.
#
#   bench/memory.sh [entries]
#
# Not a test: nothing here asserts a figure.
ENTRIES=${1:-1000000}
WORKERS=${WORKERS:-2}
ORIGIN=none
. "$(dirname "$0")/common.sh"

mkdir -p "$WORK/www"
printf '0123456789abcdef' > "$WORK/www/t"
start_static_origin "location /t/ { add_header Cache-Control \"max-age=86400\"; try_files /t =404; }"
ADMIN_PORT=$(free_port)
start_larder --memory-limit "${LIMIT:-4GiB}" --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level error
PIDS="$PIDS $LARDER_PID"
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$LARDER_PID/status"; }
objects() { curl -s "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c 'import json,sys; s=json.load(sys.stdin); d=s["memory"]; print(d["objects"], d["bytes"], s["stored"], d["evictions"])'; }

# Warm up (allocator, connection pools), then take the baseline.
curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/t/warm"
cat > "$WORK/fill.lua" <<'LUA'
local counter, prefix = 0, nil
local threads = 0
-- Every run and thread its own URL prefix (the round number comes after
-- "--"), so no request repeats an earlier one: each is a new entry.
setup = function(thread) threads = threads + 1; thread:set("tid", tostring(threads)) end
init = function(args) prefix = "/t/entry-" .. (args[1] or "0") .. "-" .. tid .. "-" end
request = function() counter = counter + 1; return wrk.format(nil, prefix .. counter) end
LUA
wrk -t2 -c32 -d2s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" -- warm > /dev/null
set -- $(objects); base_objects=$1; base_stored=$3
base_rss=$(rss)
# One stored response as served: the head Larder keeps plus the body.
stored=$(curl -s -D - -o /dev/null "http://127.0.0.1:$LARDER_PORT/t/sample" | grep -iv '^age:\|^cache-status:' | wc -c)
stored=$((stored + 16))
round=0
while :; do
    set -- $(objects)
    [ "$3" -ge "$((base_stored + ENTRIES))" ] && break
    round=$((round + 1))
    wrk -t2 -c64 -d10s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" -- "$round" > /dev/null
    echo "  $1 entries" >&2
done
set -- $(objects); n=$(( $1 - base_objects )); charged=$2; evictions=$4
after=$(rss)
if [ "$evictions" -gt 0 ]; then
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, workers $WORKERS"
    echo "memory limit ${LIMIT:-4GiB}: $1 entries held, $evictions evicted, $charged bytes charged"
    echo "RSS: $base_rss at start -> $after bytes; above the start: $(( after - base_rss )) bytes"
    exit 0
fi
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, workers $WORKERS"
echo "entries added: $n; bytes stored per entry (head + body as served): $stored"
echo "RSS: $base_rss -> $after bytes; per entry: $(( (after - base_rss) / n )) bytes"
echo "overhead per entry beyond the stored bytes: $(( (after - base_rss) / n - stored )) bytes"
echo "memory tier's own count: $charged bytes charged for $1 entries ($(( charged / $1 )) per entry)"
