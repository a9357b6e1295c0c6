#!/bin/sh
# Disk tier benchmarks (not tests):
#  1. hits served from the disk tier (memory tier far smaller than the working
#     set) vs nginx proxy_cache, which serves from files;
#  2. start-up with ENTRIES entries on disk, Larder and nginx side by side:
#     from exec to the first response (a miss), and from exec to the first
#     hit of a key stored before the restart.
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

start_caching_nginx

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

# 2. Start-up with many entries on disk: fill each proxy through itself
# (a known key first), stop it, then time from exec to the first answer:
# once for a new URL (a miss), once for the known key (a hit).
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
fill() {  # port, directory
    curl -s -o /dev/null "http://127.0.0.1:$1/s/known?size=512&cc=max-age%3D3600"
    while [ "$(find "$2" -type f -name '[!.]*' | wc -l)" -lt "$ENTRIES" ]; do
        wrk -t2 -c32 -d10s -s "$WORK/fill.lua" "http://127.0.0.1:$1" > /dev/null
        echo "  $(find "$2" -type f -name '[!.]*' | wc -l) entries on disk" >&2
    done
    sleep 2  # let the last writes land
}
# Polls (every 2 ms) until the URL answers; prints its cache verdict.
first_answer() {
    until out=$(curl -s -D - -o /dev/null "$1" 2> /dev/null) && [ -n "$out" ]; do sleep 0.002; done
    echo "$out" | tr -d '\r' | awk -F': ' 'tolower($1) == "cache-status" || tolower($1) == "x-cache" {print $2}'
}
elapsed_ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
stop_nginx() {
    master=$(cat "$WORK/nginx.pid"); kill "$master"
    i=0; while kill -0 "$master" 2> /dev/null && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
}

start_disk_larder "$WORK/startup-cache" 64MiB
fill "$LARDER_PORT" "$WORK/startup-cache"
kill "$LARDER_PID"; wait "$LARDER_PID" 2>/dev/null || true
stop_nginx
rm -rf "$WORK/nginx-cache"/*
"$NGINX" -c "$WORK/nginx.conf" -p "$WORK" 2>> "$WORK/nginx.err"
fill "$NGINX_PORT" "$WORK/nginx-cache"
stop_nginx
l_count=$(find "$WORK/startup-cache" -name '*.lrd' | wc -l)
n_count=$(find "$WORK/nginx-cache" -type f | wc -l)

# Larder started directly on a known port, polled as nginx is (no wait
# for its log line).
L_PORT=$(free_port)
exec_larder() {
    "$LARDER" serve --listen "127.0.0.1:$L_PORT" --upstream "http://127.0.0.1:$ORIGIN_PORT" --workers "$WORKERS" \
        --memory-limit 64MiB --cache-dir "$WORK/startup-cache" --disk-limit 4GiB --log-level error 2>> "$WORK/larder.err" &
    LARDER_PID=$!
    PIDS="$PIDS $LARDER_PID"
}
t0=$(date +%s%N); exec_larder
first_answer "http://127.0.0.1:$L_PORT/s/first-miss?size=1" > /dev/null; l_miss=$(elapsed_ms "$t0")
kill "$LARDER_PID"; wait "$LARDER_PID" 2>/dev/null || true
t0=$(date +%s%N); exec_larder
l_verdict=$(first_answer "http://127.0.0.1:$L_PORT/s/known?size=512&cc=max-age%3D3600"); l_hit=$(elapsed_ms "$t0")

t0=$(date +%s%N); "$NGINX" -c "$WORK/nginx.conf" -p "$WORK" 2>> "$WORK/nginx.err"
first_answer "http://127.0.0.1:$NGINX_PORT/s/first-miss?size=1" > /dev/null; n_miss=$(elapsed_ms "$t0")
stop_nginx
t0=$(date +%s%N); "$NGINX" -c "$WORK/nginx.conf" -p "$WORK" 2>> "$WORK/nginx.err"
n_verdict=$(first_answer "http://127.0.0.1:$NGINX_PORT/s/known?size=512&cc=max-age%3D3600"); n_hit=$(elapsed_ms "$t0")

printf "%-22s %10s %14s %16s\n" "start-up" "entries" "to a miss, ms" "to a hit, ms"
printf "%-22s %10s %14s %16s\n" larder "$l_count" "$l_miss" "$l_hit ($l_verdict)"
printf "%-22s %10s %14s %16s\n" "nginx proxy_cache" "$n_count" "$n_miss" "$n_hit ($n_verdict)"
