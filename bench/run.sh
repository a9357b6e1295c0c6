#!/bin/sh
# Cache-hit throughput: Larder vs nginx proxy_cache, same machine, same run,
# same origin, same number of workers. Installs wrk and nginx when missing.
#
#   bench/run.sh [duration_seconds] [connections]
#
# Prints requests/s and p99 latency for 1 KiB and 256 KiB hits through each,
# and the ratio Larder/nginx. Not a test: nothing here asserts a timing.
DURATION=${1:-10}
CONNECTIONS=${2:-64}
WORKERS=${WORKERS:-2}
THREADS=${THREADS:-2}
. "$(dirname "$0")/common.sh"

# Larder.
start_larder --memory-limit 256MiB --log-level warning
PIDS="$PIDS $LARDER_PID"

# nginx with proxy_cache, tuned as a fair user would: no access log,
# keep-alive to clients and upstream, same worker count.
NGINX_PORT=$(free_port)
mkdir -p "$WORK/cache"
chmod 777 "$WORK/cache"
start_nginx "
    proxy_cache_path $WORK/cache keys_zone=bench:10m max_size=1g;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            $NGINX_PROXY
            proxy_cache bench;
            add_header Cache-Status \$upstream_cache_status;
        }
    }"

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)  wrk: $THREADS threads, $CONNECTIONS connections, ${DURATION}s  workers: $WORKERS"
printf "%-8s %-7s %12s %10s\n" size proxy "requests/s" "p99 ms"
for size in 1024 262144; do
    path="/bench-$size?size=$size"
    # Warm both caches (a miss, then verify a hit).
    curl -s -o /dev/null "http://127.0.0.1:$LARDER_PORT$path"
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT$path"
    curl -s -o /dev/null "http://127.0.0.1:$NGINX_PORT$path"
    lh=$(curl -s -D - -o /dev/null "http://127.0.0.1:$LARDER_PORT$path" | tr -d '\r' | awk -F': ' 'tolower($1)=="cache-status" {print $2}')
    nh=$(curl -s -D - -o /dev/null "http://127.0.0.1:$NGINX_PORT$path" | tr -d '\r' | awk -F': ' 'tolower($1)=="cache-status" {print $2}')
    echo "  cache check: larder '$lh', nginx '$nh'" >&2
    set -- $(measure "http://127.0.0.1:$LARDER_PORT$path"); l_rps=$1; l_p99=$2
    set -- $(measure "http://127.0.0.1:$NGINX_PORT$path"); n_rps=$1; n_p99=$2
    label=$([ "$size" -eq 1024 ] && echo 1KiB || echo 256KiB)
    printf "%-8s %-7s %12s %10s\n" "$label" larder "$l_rps" "$l_p99"
    printf "%-8s %-7s %12s %10s\n" "$label" nginx "$n_rps" "$n_p99"
    echo "$label larder/nginx: $(awk -v a="$l_rps" -v b="$n_rps" 'BEGIN {printf "%.2f", a/b}')"
done
