#!/bin/sh
# Larder vs nginx proxy_cache vs Varnish, side by side, in one command.
#
#   bench/compare.sh [seconds_per_run] [connections]
#
# Every proxy gets the same worker count (WORKERS, default 1) and the same
# origin: an nginx serving static files (fast enough not to be the limit
# on misses). With PIN=1 (the default) the proxy runs on CPUs 0..WORKERS-1
# and wrk on the cores after them (one wrk thread per client core, at
# most 8); with no core left for wrk, nothing is pinned. Each workload runs RUNS times (default 3) with the proxies
# interleaved; the table shows medians of requests/s, p99 latency and
# server CPU time per request (the proxy's processes' user+system time over
# the run divided by the requests served), and ratios against nginx and
# Varnish. RESULTS=1 appends the table to bench/RESULTS.md.
#
# Workloads: hot hits of 1 KiB, 16 KiB, 256 KiB and 4 MiB; 10,000 distinct
# 1 KiB keys requested at random (all in memory); misses (every request a
# new URL); disk-10k: the same 10,000 keys from a Larder whose memory tier
# is 2 MiB and whose working set is on its disk tier, against nginx
# (proxy_cache serves from files anyway; Varnish, memory only, sits it
# out); WORKLOADS="misses hot-1k" picks some. bench/scaling.sh runs it
# with 1, 2, 4 and 8 workers. Installs wrk, nginx and
# varnish from Debian when missing.
# Not a test: nothing here asserts a timing.
DURATION=${1:-5}
CONNECTIONS=${2:-64}
WORKERS=${WORKERS:-1}
RUNS=${RUNS:-3}
PIN=${PIN:-1}
ORIGIN=none
command -v varnishd >/dev/null 2>&1 || [ -x /usr/sbin/varnishd ] || {
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q varnish >&2
}
. "$(dirname "$0")/common.sh"
VARNISHD=$(command -v varnishd || echo /usr/sbin/varnishd)
CLK_TCK=$(getconf CLK_TCK)
CORES=$(nproc)
if [ "$PIN" = 1 ] && [ "$CORES" -gt "$WORKERS" ]; then
    SERVER_CPU="taskset -c 0-$((WORKERS - 1))"; CLIENT_CPU="taskset -c $WORKERS-$((CORES - 1))"
    CLIENT_CORES=$((CORES - WORKERS)); [ "$CLIENT_CORES" -gt 8 ] && CLIENT_CORES=8
else
    SERVER_CPU=""; CLIENT_CPU=""; CLIENT_CORES=2
fi
# One wrk thread per client core: two wrk threads sharing one pinned core
# take turns in scheduler slices of a few ms, and that wait lands in the
# p99 of whichever proxy keeps wrk busiest (the fastest one).
THREADS=${THREADS:-$CLIENT_CORES}

# The origin: static files with an hour of freshness.
mkdir -p "$WORK/www"
for spec in 1k:1024 16k:16384 256k:262144 4m:4194304; do
    head -c "${spec#*:}" /dev/urandom > "$WORK/www/${spec%%:*}"
done
start_static_origin "
        location ~ ^/(1k|16k|256k|4m)/ {
            add_header Cache-Control \"max-age=3600\";
            try_files /\$1 =404;
        }"

# Larder: memory tier only (as Varnish's malloc storage); a second one with
# a 2 MiB memory tier over a disk tier for disk-10k.
start_larder_pinned() {  # name, then tier options
    name=$1; shift
    # shellcheck disable=SC2086
    $SERVER_CPU "$LARDER" serve --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$ORIGIN_PORT" --workers "$WORKERS" \
        "$@" --admin-listen none --log-level error 2> "$WORK/$name.err" &
    LARDER_PID=$!
    PIDS="$PIDS $LARDER_PID"
    i=0; while ! grep -qs "listening on" "$WORK/$name.err" && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
    LARDER_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$WORK/$name.err")
}
# ROUTE=1: both Larders with one [[route]] that matches nothing (what a
# configured route costs a hit; compare a run without).
ROUTE_CONFIG=""
if [ -n "${ROUTE:-}" ]; then
    printf '[[route]]\nprefix = "/nothing-here/"\ndefault_ttl = "1m"\nmemory_ttl = "1h"\n' > "$WORK/route.toml"
    ROUTE_CONFIG="--config $WORK/route.toml"
fi
# shellcheck disable=SC2086
start_larder_pinned larder-disk --memory-limit 2MiB --cache-dir "$WORK/larder-disk" $ROUTE_CONFIG
DISK_LARDER_PID=$LARDER_PID; DISK_LARDER_PORT=$LARDER_PORT
# shellcheck disable=SC2086
start_larder_pinned larder --memory-limit 2GiB $ROUTE_CONFIG

# nginx proxy_cache, as a fair user would set it up.
NGINX_PORT=$(free_port)
mkdir -p "$WORK/cache"
chmod 777 "$WORK/cache"
LAUNCH="$SERVER_CPU" start_nginx "
    proxy_cache_path $WORK/cache levels=1:2 keys_zone=bench:64m max_size=4g;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache bench;
        }
    }"

# Varnish with its default VCL and malloc storage, one thread pool per worker.
VARNISH_PORT=$(free_port)
mkdir -p "$WORK/varnish"
chmod 777 "$WORK/varnish"
$SERVER_CPU "$VARNISHD" -F -n "$WORK/varnish" -a "127.0.0.1:$VARNISH_PORT" -b "127.0.0.1:$ORIGIN_PORT" \
    -s malloc,2G -p thread_pools="$WORKERS" -p default_ttl=3600 > "$WORK/varnish.out" 2>&1 &
VARNISH_PID=$!
PIDS="$PIDS $VARNISH_PID"
i=0; while ! curl -s -o /dev/null "http://127.0.0.1:$VARNISH_PORT/1k/ready" && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done

# In disk-10k, "larder" is the Larder with the disk tier.
port_of() {
    case $1 in
        larder) if [ "$workload" = disk-10k ]; then echo "$DISK_LARDER_PORT"; else echo "$LARDER_PORT"; fi ;;
        nginx) echo "$NGINX_PORT" ;; varnish) echo "$VARNISH_PORT" ;;
    esac
}
pids_of() {
    case $1 in
        larder) if [ "$workload" = disk-10k ]; then echo "$DISK_LARDER_PID"; else echo "$LARDER_PID"; fi ;;
        nginx) master=$(cat "$WORK/nginx.pid"); echo "$master $(pgrep -P "$master" | tr '\n' ' ')" ;;
        varnish) echo "$VARNISH_PID $(pgrep -P "$VARNISH_PID" | tr '\n' ' ')" ;;
    esac
}
cpu_ticks() {  # user+system clock ticks of the given processes
    total=0
    for pid in "$@"; do
        t=$(awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || echo 0)
        total=$((total + t))
    done
    echo "$total"
}

write_keys_scripts "$WORK/random.lua" "$WORK/sequential.lua"
write_misses_script "$WORK/misses.lua"

# One run: prints "requests_per_second p99_ms cpu_us_per_request".
run() {  # proxy path [script]
    port=$(port_of "$1")
    wrk_script=""; [ -n "${3:-}" ] && wrk_script="-s $3"
    # shellcheck disable=SC2046
    before=$(cpu_ticks $(pids_of "$1"))
    # shellcheck disable=SC2086
    out=$($CLIENT_CPU wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency $wrk_script "http://127.0.0.1:$port$2")
    # shellcheck disable=SC2046
    after=$(cpu_ticks $(pids_of "$1"))
    requests=$(echo "$out" | awk '/requests in/ {print $1}')
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    p99=$(echo "$out" | awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}')
    errors=$(echo "$out" | awk '/Non-2xx|Socket errors/ {print}' | tr '\n' ' ')
    [ -n "$errors" ] && echo "  warning: $1 $2: $errors" >&2
    cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$requests" 'BEGIN {printf "%.1f", (n > 0 ? t * 1000000 / hz / n : 0)}')
    echo "$rps $p99 $cpu"
}

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR + 1) / 2)]}'; }

warm() {  # proxy path: a miss, then a hit
    curl -s -o /dev/null "http://127.0.0.1:$(port_of "$1")$2"
    curl -s -o /dev/null "http://127.0.0.1:$(port_of "$1")$2"
}

TABLE="$WORK/table.md"
{
    echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ); wrk $THREADS threads, $CONNECTIONS connections, ${DURATION}s x $RUNS runs (medians); workers: $WORKERS; pinned: ${SERVER_CPU:-no}"
    echo "versions: larder $("$LARDER" --version), $("$NGINX" -v 2>&1 | sed 's/.*version: //'), $("$VARNISHD" -V 2>&1 | head -1 | sed 's/.*(varnish-\([^ ]*\).*/varnish \1/')"
    echo
    echo "| workload | proxy | requests/s | p99 ms | CPU µs/request | Larder/this (req/s) | this/Larder (CPU) |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
} > "$TABLE"

for workload in ${WORKLOADS:-hot-1k hot-16k hot-256k hot-4m random-10k disk-10k misses}; do
    proxies="larder nginx varnish"
    case $workload in
        hot-*) path="/${workload#hot-}/hot"; script="" ;;
        random-10k) path="/"; script="$WORK/random.lua" ;;
        disk-10k) path="/"; script="$WORK/random.lua"; proxies="larder nginx" ;;
        misses) path="/"; script="$WORK/misses.lua" ;;
    esac
    for proxy in $proxies; do
        case $workload in
            hot-*) warm "$proxy" "$path" ;;
            # Every key once, then every one again (stored, and on disk).
            random-10k|disk-10k) wrk -t2 -c16 -d6s -s "$WORK/sequential.lua" "http://127.0.0.1:$(port_of "$proxy")/" > /dev/null ;;
        esac
        : > "$WORK/$proxy.runs"
    done
    r=0
    while [ $r -lt "$RUNS" ]; do
        for proxy in $proxies; do run "$proxy" "$path" "$script" >> "$WORK/$proxy.runs"; done
        r=$((r + 1))
    done
    for proxy in $proxies; do
        rps=$(awk '{print $1}' "$WORK/$proxy.runs" | median)
        p99=$(awk '{print $2}' "$WORK/$proxy.runs" | median)
        cpu=$(awk '{print $3}' "$WORK/$proxy.runs" | median)
        echo "$proxy $rps $p99 $cpu" >> "$WORK/$workload.medians"
    done
    l_rps=$(awk '$1 == "larder" {print $2}' "$WORK/$workload.medians")
    l_cpu=$(awk '$1 == "larder" {print $4}' "$WORK/$workload.medians")
    while read -r proxy rps p99 cpu; do
        ratio=$(awk -v a="$l_rps" -v b="$rps" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
        cpuratio=$(awk -v a="$l_cpu" -v b="$cpu" 'BEGIN {printf "%.2f", (a > 0 ? b / a : 0)}')
        [ "$proxy" = larder ] && { ratio="—"; cpuratio="—"; }
        echo "| $workload | $proxy | $rps | $p99 | $cpu | $ratio | $cpuratio |" >> "$TABLE"
    done < "$WORK/$workload.medians"
    echo "$workload done" >&2
done

cat "$TABLE"
if [ "${RESULTS:-0}" = 1 ]; then
    { echo; echo "### bench/compare.sh $DURATION $CONNECTIONS"; echo; cat "$TABLE"; } >> bench/RESULTS.md
fi
