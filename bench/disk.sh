#!/bin/sh
# Disk tier benchmarks (not tests):
#  1. hits served from the disk tier (memory tier far smaller than the working
#     set) vs nginx proxy_cache, which serves from files;
#  2. start-up time to the first response with ENTRIES entries on disk.
#
#   bench/disk.sh [duration_seconds] [entries]
# Installs wrk and nginx when missing.
DURATION=${1:-10}
ENTRIES=${2:-100000}
WORKERS=${WORKERS:-2}
OBJECTS=${OBJECTS:-2000}
SIZE=${SIZE:-16384}
. "$(dirname "$0")/common.sh"

start_disk_larder() {  # $1: cache dir, $2: memory limit
    start_larder --memory-limit "$2" --cache-dir "$1" --disk-limit 4GiB --log-level error
}

NGINX_PORT=$(free_port)
mkdir -p "$WORK/nginx-cache"
chmod 777 "$WORK/nginx-cache"
start_nginx "
    proxy_cache_path $WORK/nginx-cache levels=1:2 keys_zone=bench:64m max_size=4g;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache bench;
        }
    }"

cat > "$WORK/random.lua" <<LUA
math.randomseed(42)
request = function()
  return wrk.format("GET", "/d/" .. math.random(1, $OBJECTS) .. "?size=$SIZE")
end
LUA

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r), $(df -T "$WORK" | awk 'NR==2 {print $2}') at $WORK"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  $OBJECTS objects of $SIZE bytes, memory tier 1MiB, wrk 2 threads 64 connections ${DURATION}s"

# 1. Disk hits.
start_disk_larder "$WORK/larder-cache" 1MiB
PIDS="$PIDS $LARDER_PID"
# Warm both caches with every object, eight at a time.
seq 1 "$OBJECTS" | xargs -P 8 -I N curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/d/N?size=$SIZE"
seq 1 "$OBJECTS" | xargs -P 8 -I N curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT/d/N?size=$SIZE"
sleep 2  # let both write their files
set -- $(measure "http://127.0.0.1:$LARDER_PORT" "$WORK/random.lua"); l_rps=$1; l_p99=$2
set -- $(measure "http://127.0.0.1:$NGINX_PORT" "$WORK/random.lua"); n_rps=$1; n_p99=$2
printf "%-22s %12s %10s\n" "disk-tier hits" "requests/s" "p99 ms"
printf "%-22s %12s %10s\n" larder "$l_rps" "$l_p99"
printf "%-22s %12s %10s\n" "nginx proxy_cache" "$n_rps" "$n_p99"
echo "larder/nginx: $(awk -v a="$l_rps" -v b="$n_rps" 'BEGIN {printf "%.2f", a/b}')"
kill "$LARDER_PID"; wait "$LARDER_PID" 2>/dev/null || true

# 2. Start-up with many entries on disk: fill through Larder, then restart.
start_disk_larder "$WORK/startup-cache" 64MiB
cat > "$WORK/fill.lua" <<'LUA'
-- Every request a new URL: each thread (and each run) has its own prefix.
counter = 0
prefix = ""
function init(args)
  prefix = string.gsub(tostring({}), "[^%w]", "") .. os.time()
end
request = function()
  counter = counter + 1
  return wrk.format("GET", "/s/" .. prefix .. "-" .. counter .. "?size=512")
end
LUA
while [ "$(find "$WORK/startup-cache" -name '*.lrd' | wc -l)" -lt "$ENTRIES" ]; do
    wrk -t2 -c32 -d10s -s "$WORK/fill.lua" "http://127.0.0.1:$LARDER_PORT" > /dev/null
    echo "  $(find "$WORK/startup-cache" -name '*.lrd' | wc -l) entries on disk" >&2
done
kill "$LARDER_PID"; wait "$LARDER_PID" 2>/dev/null || true
count=$(find "$WORK/startup-cache" -name '*.lrd' | wc -l)
t0=$(date +%s%N)
start_disk_larder "$WORK/startup-cache" 64MiB
PIDS="$PIDS $LARDER_PID"
until curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT/s/first?size=1" 2>/dev/null; do sleep 0.005; done
t1=$(date +%s%N)
echo "start-up to first response with $count entries on disk: $(( (t1 - t0) / 1000000 )) ms"
