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
start_larder --memory-limit 4GiB --admin-listen "127.0.0.1:$ADMIN_PORT" --log-level error
PIDS="$PIDS $LARDER_PID"
rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$LARDER_PID/status"; }
objects() { curl -s "http://127.0.0.1:$ADMIN_PORT/stats" | python3 -c 'import json,sys; d=json.load(sys.stdin)["memory"]; print(d["objects"], d["bytes"])'; }

# Warm up (allocator, connection pools), then take the baseline.
curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/t/warm"
cat > "$WORK/fill.lua" <<'LUA'
local counter, prefix = 0, nil
setup = function(thread) thread:set("tid", tostring(math.random(1, 1e9))) end
init = function() prefix = "/t/entry-" .. tid .. "-" end
request = function() counter = counter + 1; return wrk.format(nil, prefix .. counter) end
LUA
wrk -t2 -c32 -d2s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" > /dev/null
set -- $(objects); base_objects=$1
base_rss=$(rss)
# One stored response as served: the head Larder keeps plus the body.
stored=$(curl -s -D - -o /dev/null "http://127.0.0.1:$LARDER_PORT/t/sample" | grep -iv '^age:\|^cache-status:' | wc -c)
stored=$((stored + 16))
while :; do
    set -- $(objects)
    [ "$1" -ge "$((base_objects + ENTRIES))" ] && break
    wrk -t2 -c64 -d10s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT/" > /dev/null
    echo "  $1 entries" >&2
done
set -- $(objects); n=$(( $1 - base_objects )); charged=$2
after=$(rss)
echo "date: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, workers $WORKERS"
echo "entries added: $n; bytes stored per entry (head + body as served): $stored"
echo "RSS: $base_rss -> $after bytes; per entry: $(( (after - base_rss) / n )) bytes"
echo "overhead per entry beyond the stored bytes: $(( (after - base_rss) / n - stored )) bytes"
echo "memory tier's own count: $charged bytes charged for $1 entries ($(( charged / $1 )) per entry)"
