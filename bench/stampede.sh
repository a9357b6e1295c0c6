#!/bin/sh
# Stampede: many clients keep asking for one URL that expires every second
# and takes the origin 200 ms to produce. Compares how many requests reach
# the origin, and the latency clients see, through Larder (request
# collapsing) and nginx (proxy_cache_lock; it only locks new entries, so a
# second nginx row adds proxy_cache_use_stale updating, which serves the
# expired copy while one request refreshes it).
#
#   bench/stampede.sh [duration_seconds] [connections]
#
# Not a test: nothing here asserts a timing.
DURATION=${1:-10}
CONNECTIONS=${2:-200}
WORKERS=${WORKERS:-2}
THREADS=${THREADS:-2}
. "$(dirname "$0")/common.sh"

start_larder --memory-limit 64MiB --log-level warning
PIDS="$PIDS $LARDER_PID"

NGINX_PORT=$(free_port)
NGINX_STALE_PORT=$(free_port)
mkdir -p "$WORK/cache"
chmod 777 "$WORK/cache"
start_nginx "
    proxy_cache_path $WORK/cache keys_zone=stampede:10m max_size=1g;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache stampede;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 10s;
            proxy_cache_lock_age 10s;
        }
    }
    server {
        listen 127.0.0.1:$NGINX_STALE_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache stampede;
            proxy_cache_lock on;
            proxy_cache_use_stale updating;
            proxy_cache_background_update on;
        }
    }"

count() {
    key=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1")
    curl -s "http://127.0.0.1:$ORIGIN_PORT/__count?key=$key"
}

echo "machine: $(nproc) cores, $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  wrk: $THREADS threads, $CONNECTIONS connections, ${DURATION}s  workers: $WORKERS"
echo "one URL, max-age=1, origin answers after 200 ms"
printf "%-12s %12s %10s %10s %10s %16s\n" proxy "requests/s" "p50 ms" "p99 ms" "max ms" "origin requests"
for proxy in larder nginx nginx-stale; do
    case $proxy in
        larder) port=$LARDER_PORT ;;
        nginx) port=$NGINX_PORT ;;
        *) port=$NGINX_STALE_PORT ;;
    esac
    path="/stampede-$proxy?cc=max-age%3D1&delay=0.2&size=4096"
    out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency "http://127.0.0.1:$port$path")
    rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
    ms() { echo "$out" | awk -v p="$1" '$1 == p {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}'; }
    max=$(echo "$out" | awk '/Latency/ {v=$4; if (v ~ /us$/) {sub(/us/,"",v); v=v/1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v=v*1000}; print v}')
    printf "%-12s %12s %10s %10s %10s %16s\n" "$proxy" "$rps" "$(ms 50%)" "$(ms 99%)" "$max" "$(count "$path")"
done
